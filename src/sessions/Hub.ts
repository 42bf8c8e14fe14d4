import * as PgClient from "@effect/sql-pg/PgClient"
import { Effect, Option, Schedule, Scope, Stream } from "effect"
import { AppConfig } from "../platform/Config.js"
import { randomBase62 } from "../platform/Ids.js"
import type { InternalEvent } from "../runtime/Events.js"
import { SessionsRepo } from "./Repo.js"

/** A session event as live subscribers receive it: logged ones carry their `seq`; `closed` ends every subscription. */
export type HubEvent =
  | { readonly _tag: "logged"; readonly turn: number; readonly seq: number; readonly event: InternalEvent & { readonly seq: number } }
  /** The end of a turn that never ran (the session was deleted while it waited): told, not logged. */
  | { readonly _tag: "dropped"; readonly turn: number; readonly event: InternalEvent }
  | { readonly _tag: "closed" }

/** The channel of session events in cluster mode. */
const CHANNEL = "atrium_session_events"

/** PostgreSQL refuses a notification payload of 8000 bytes or more; a bigger event travels as its `seq` only. */
const MAX_PAYLOAD = 7_000

/** One notification: the runner that sent it, the session, and the event (or where to read it from the log). */
interface Note {
  readonly r: string
  readonly s: string
  readonly e?: HubEvent
  readonly p?: { readonly turn: number; readonly seq: number }
}

/** Receives a session's live events, in order, synchronously as they are published. */
export type HubListener = (event: HubEvent) => void

/**
 * Live fan-out of session events: the listeners of each session with subscribers in this process, a set made on the
 * first subscription and dropped with the last, so an event costs nothing for sessions nobody here watches. A
 * listener is a plain callback, not a queue and a fiber: a held subscription is a listener and a socket, and costs
 * nothing while the session is quiet (bench/engine.ts). The durable
 * log is written before an event is published; a subscriber that misses something reads it from the log.
 *
 * Cluster mode: the session's owner runs its turns, and subscribers may be on any runner. What the owner publishes
 * also goes out on PostgreSQL `NOTIFY` (`atrium_session_events`); every runner listens and hands other runners'
 * events to its own subscribers. Notifications of one session come from one owner, one after the other, so they
 * arrive in order; a subscriber still checks `seq` and fills any gap from the log (docs/sessions.md).
 */
export class SessionHub extends Effect.Service<SessionHub>()("atrium/sessions/SessionHub", {
  scoped: Effect.gen(function*() {
    const topics = new Map<string, Set<HubListener>>()
    const clustered = Option.isSome((yield* AppConfig).databaseUrl)
    const repo = yield* SessionsRepo
    const pg = yield* PgClient.PgClient
    const self = randomBase62(12)

    const publishLocal = (sessionId: string, event: HubEvent) =>
      Effect.sync(() => {
        const listeners = topics.get(sessionId)
        if (listeners === undefined) return
        for (const listener of listeners) {
          // One subscriber's failure is its own: the others still get the event.
          try {
            listener(event)
          } catch {}
        }
      })

    if (clustered) {
      yield* pg.listen(CHANNEL).pipe(
        Stream.runForEach((payload) =>
          Effect.gen(function*() {
            const note = JSON.parse(payload) as Note
            if (note.r === self || !topics.has(note.s)) return
            if (note.e !== undefined) return yield* publishLocal(note.s, note.e)
            if (note.p !== undefined) {
              const rows = yield* repo.eventsAfter(note.s, note.p.seq - 1, 1)
              const row = rows[0]
              if (row === undefined || row.seq !== note.p.seq) return
              yield* publishLocal(note.s, {
                _tag: "logged",
                turn: row.turn,
                seq: row.seq,
                event: row.payload as unknown as InternalEvent & { seq: number }
              })
            }
          }).pipe(Effect.catchAllCause((cause) => Effect.logWarning("unreadable session notification", cause)))
        ),
        Effect.tapErrorCause((cause) => Effect.logWarning("session event listener failed; listening again", cause)),
        Effect.retry(Schedule.spaced("1 second")),
        Effect.forkScoped
      )
    }

    /** The notification that tells other runners of `event`; none outside cluster mode (or too big to say). */
    const noteOf = (sessionId: string, event: HubEvent): Option.Option<string> => {
      if (!clustered) return Option.none()
      const payload = JSON.stringify({ r: self, s: sessionId, e: event } satisfies Note)
      if (Buffer.byteLength(payload) <= MAX_PAYLOAD) return Option.some(payload)
      if (event._tag !== "logged") return Option.none()
      return Option.some(JSON.stringify({ r: self, s: sessionId, p: { turn: event.turn, seq: event.seq } } satisfies Note))
    }

    /** Tells this runner's subscribers and, in cluster mode, the others' (for what is not logged: `SessionLog` logs). */
    const publish = (sessionId: string, event: HubEvent) =>
      Effect.gen(function*() {
        yield* publishLocal(sessionId, event)
        const note = noteOf(sessionId, event)
        if (Option.isSome(note)) yield* repo.notify(CHANNEL, note.value)
      })

    /**
     * Calls `listener` with everything published after this returns, for the life of the scope. The release is added
     * to the scope itself, not through `acquireRelease`, which would keep the subscribing request's fiber refs (its
     * whole context) for as long as a subscription is held.
     */
    const listen = (sessionId: string, listener: HubListener): Effect.Effect<void, never, Scope.Scope> =>
      Effect.flatMap(Effect.scope, (scope) => {
        let listeners = topics.get(sessionId)
        if (listeners === undefined) {
          listeners = new Set()
          topics.set(sessionId, listeners)
        }
        listeners.add(listener)
        const registered = listeners
        return Scope.addFinalizer(scope, Effect.sync(() => {
          registered.delete(listener)
          if (registered.size === 0 && topics.get(sessionId) === registered) topics.delete(sessionId)
        }))
      })

    const subscriptions = Effect.sync(() => {
      let count = 0
      for (const listeners of topics.values()) count += listeners.size
      return count
    })

    return { publish, publishLocal, noteOf, channel: CHANNEL, listen, subscriptions, clustered } as const
  }),
  dependencies: [SessionsRepo.Default, AppConfig.Default]
}) {}
