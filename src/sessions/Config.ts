import { Config, Effect } from "effect"
import { setting } from "../platform/Config.js"

export class SessionsConfig extends Effect.Service<SessionsConfig>()("atrium/sessions/SessionsConfig", {
  effect: Config.all({
    /** How much of a session's history (in characters of its turns) a model call sees; older turns are left out. */
    contextChars: setting("SESSION_CONTEXT_CHARS", Config.integer, 48_000)
  })
}) {}
