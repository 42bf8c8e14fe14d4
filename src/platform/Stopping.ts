import { Duration, Effect } from "effect"
import { AppConfig } from "./Config.js"

/**
 * The one `SHUTDOWN_GRACE` of a stop, however many steps wait within it. A stop waits in turn for the HTTP server's
 * open streams (`HttpServerLive`), then for the runner's sent turns while the cluster still answers (`TurnDrainLive`,
 * sessions/Activation.ts), then in each session's own finalizer; each step waits what is left of the grace from the
 * moment the stop began (`begin`), so a stop stays within one grace however its turns are spread over the steps.
 * Before a stop (a session handed over because its shard moves to a runner that joined) a wait gets the whole grace.
 */
export class Stopping extends Effect.Service<Stopping>()("atrium/platform/Stopping", {
  effect: Effect.map(AppConfig, ({ shutdownGrace }) => {
    let deadline: number | undefined
    return {
      /** The stop begins now, if it had not yet: its steps share the grace from here. */
      begin: Effect.sync(() => {
        deadline ??= Date.now() + Duration.toMillis(shutdownGrace)
      }),
      /** What a step that waits for turns may wait: the rest of the stop's grace, or the whole grace outside a stop. */
      left: Effect.sync(() => deadline === undefined ? shutdownGrace : Duration.millis(Math.max(0, deadline - Date.now())))
    }
  }),
  dependencies: [AppConfig.Default]
}) {}
