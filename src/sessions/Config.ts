import { Config, Effect } from "effect"
import { duration, setting } from "../platform/Config.js"

export class SessionsConfig extends Effect.Service<SessionsConfig>()("atrium/sessions/SessionsConfig", {
  effect: Config.all({
    /** How much of a session's history (in characters of its turns) a model call sees; older turns are left out. */
    contextChars: setting("SESSION_CONTEXT_CHARS", Config.integer, 48_000),
    /**
     * Cluster mode: how long a session's owner keeps telling other runners its events (`NOTIFY`) after one of them
     * said it follows the session, and after the session starts on a runner (followers it does not know of yet say so
     * within a third of it). A follower says so three times per lease (docs/sessions.md, "Who is told").
     */
    followLease: duration("SESSION_FOLLOW_LEASE", "10 seconds")
  })
}) {}
