import { Config, Effect } from "effect"

export class SessionsConfig extends Effect.Service<SessionsConfig>()("atrium/sessions/SessionsConfig", {
  effect: Config.all({
    /** How much of a session's history (in characters of its turns) a model call sees; older turns are left out. */
    contextChars: Config.integer("SESSION_CONTEXT_CHARS").pipe(Config.withDefault(48_000))
  })
}) {}
