import { Effect, Option, Scope, Stream } from "effect"
import { AppConfig } from "../platform/Config.js"
import { randomBase62, type SessionId } from "../platform/Ids.js"
import { Notifications } from "../platform/Listener.js"
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
  readonly s: SessionId
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
    const topics = new Map<SessionId, Set<HubListener>>()
    /**
     * The last `seq` told to each session's listeners here. A logged event at or before it is not told again (a
     * catch-up after a reconnection may read what a notification also brought), and one past the next is preceded by
     * the events between, read from the log: listeners get every event once, in order, whatever the notifications did.
     */
    const told = new Map<SessionId, number>()
    const config = yield* AppConfig
    const clustered = Option.isSome(config.databaseUrl)
    const repo = yield* SessionsRepo
    /** This runner: the `r` of its notes, and how it names itself to a session's owner as a follower. */
    const self = randomBase62(12)

    const tellListeners = (sessionId: SessionId, event: HubEvent) => {
      const listeners = topics.get(sessionId)
      if (listeners === undefined) return
      if (event._tag === "logged") told.set(sessionId, Math.max(told.get(sessionId) ?? 0, event.seq))
      for (const listener of listeners) {
        // One subscriber's failure is its own: the others still get the event.
        try {
          listener(event)
        } catch {}
      }
    }

    const loggedOf = (row: { turn: number; seq: number; payload: unknown }): HubEvent => ({
      _tag: "logged",
      turn: row.turn,
      seq: row.seq,
      event: row.payload as InternalEvent & { seq: number }
    })

    /** Tells the session's listeners what the log holds after what they were told, up to `upTo` (or the end). */
    const fillFromLog = (sessionId: SessionId, after: number, upTo: number) =>
      Effect.gen(function*() {
        let last = after
        while (last < upTo) {
          const rows = yield* repo.eventsAfter(sessionId, last, 500)
          for (const row of rows) {
            if (row.seq > upTo) return
            if (row.seq > (told.get(sessionId) ?? 0)) tellListeners(sessionId, loggedOf(row))
            last = row.seq
          }
          if (rows.length < 500) return
        }
      })

    const publishLocal = (sessionId: SessionId, event: HubEvent) =>
      Effect.sync(() => {
        if (!topics.has(sessionId)) return
        if (event._tag === "logged" && event.seq <= (told.get(sessionId) ?? 0)) return
        tellListeners(sessionId, event)
      })

    /** Another runner's event: in order after what the listeners here were told, the events between from the log. */
    const publishRemote = (sessionId: SessionId, event: HubEvent) =>
      Effect.gen(function*() {
        if (!topics.has(sessionId)) return
        const before = told.get(sessionId)
        if (event._tag === "logged" && before !== undefined && event.seq > before + 1) {
          yield* fillFromLog(sessionId, before, event.seq - 1)
        }
        yield* publishLocal(sessionId, event)
      })

    /** One session's listeners here, told what the log holds past what they were told (see `catchUp`). */
    const catchUpSession = (sessionId: SessionId) =>
      Effect.gen(function*() {
        if (!topics.has(sessionId)) return
        const before = told.get(sessionId)
        if (before !== undefined) return yield* fillFromLog(sessionId, before, Number.MAX_SAFE_INTEGER)
        const position = (yield* repo.positions(sessionId)).seq
        if (position > 0) yield* fillFromLog(sessionId, position - 1, Number.MAX_SAFE_INTEGER)
      })
    /**
     * After the listening connection came back: whatever was logged while nobody here listened, for every session
     * with listeners, from where each was (a session whose listeners were told nothing yet: its newest event, which
     * every subscriber orders by `seq` and fills any gap before from the log itself).
     */
    const catchUp = Effect.suspend(() => Effect.forEach(Array.from(topics.keys()), catchUpSession, { discard: true })).pipe(
      Effect.catchAllCause((cause) => Effect.logWarning("session events could not be caught up after a reconnection", cause))
    )

    if (clustered) {
      // This runner's own notes (`noteOf` writes `r` first) were told here as they were published: skipped unread.
      const own = JSON.stringify({ r: self }).slice(0, -1) + ","
      const signals = (yield* Notifications).listen(CHANNEL, (payload) => payload.startsWith(own))
      yield* signals.pipe(
        Stream.runForEach((signal) =>
          Effect.gen(function*() {
            if (signal._tag === "Listening") {
              if (signal.again) yield* catchUp
              return
            }
            const note = JSON.parse(signal.payload) as Note
            if (note.r === self || !topics.has(note.s)) return
            if (note.e !== undefined) return yield* publishRemote(note.s, note.e)
            if (note.p !== undefined) {
              const rows = yield* repo.eventsAfter(note.s, note.p.seq - 1, 1)
              const row = rows[0]
              if (row === undefined || row.seq !== note.p.seq) return
              yield* publishRemote(note.s, loggedOf(row))
            }
          }).pipe(Effect.catchAllCause((cause) => Effect.logWarning("unreadable session notification", cause)))
        ),
        Effect.forkScoped
      )
    }

    /** The notification that tells other runners of `event`; none outside cluster mode (or too big to say). */
    const noteOf = (sessionId: SessionId, event: HubEvent): Option.Option<string> => {
      if (!clustered) return Option.none()
      const payload = JSON.stringify({ r: self, s: sessionId, e: event } satisfies Note)
      if (Buffer.byteLength(payload) <= MAX_PAYLOAD) return Option.some(payload)
      if (event._tag !== "logged") return Option.none()
      return Option.some(JSON.stringify({ r: self, s: sessionId, p: { turn: event.turn, seq: event.seq } } satisfies Note))
    }

    /** Tells this runner's subscribers and, in cluster mode, the others' (for what is not logged: `SessionLog` logs). */
    const publish = (sessionId: SessionId, event: HubEvent) =>
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
    const listen = (sessionId: SessionId, listener: HubListener): Effect.Effect<void, never, Scope.Scope> =>
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
          if (registered.size === 0 && topics.get(sessionId) === registered) {
            topics.delete(sessionId)
            told.delete(sessionId)
          }
        }))
      })

    const subscriptions = Effect.sync(() => {
      let count = 0
      for (const listeners of topics.values()) count += listeners.size
      return count
    })

    return { publish, publishLocal, noteOf, channel: CHANNEL, listen, subscriptions, clustered, self, catchUpSession } as const
  }),
  dependencies: [SessionsRepo.Default, AppConfig.Default, Notifications.Default]
}) {}
