import { Config, Effect } from "effect"
import { setting } from "../platform/Config.js"

export class AgentsConfig extends Effect.Service<AgentsConfig>()("atrium/agents/AgentsConfig", {
  effect: Config.all({
    /** The platform's share of an unlock's price, in percent; the creator earns the rest. */
    platformSharePercent: setting("PLATFORM_SHARE_PERCENT", Config.integer, 30).pipe(
      Config.validate({ message: "PLATFORM_SHARE_PERCENT must be 0-100", validation: (n) => n >= 0 && n <= 100 })
    )
  })
}) {}
