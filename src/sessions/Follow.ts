import type { SessionId } from "../platform/Ids.js"
import type * as ShardId from "@effect/cluster/ShardId"
import * as Sharding from "@effect/cluster/Sharding"
import { Clock, Duration, Effect, FiberSet, Option, Schedule } from "effect"
import { makeEntityCaller, shardOf } from "../platform/Cluster.js"
import { type InternalEvent, isTerminal } from "../runtime/Events.js"
import { SessionsConfig } from "./Config.js"
import { type HubEvent, SessionHub } from "./Hub.js"
import { SessionsRepo } from "./Repo.js"
import { Session } from "./SessionRpc.js"

export type SessionEvent = InternalEvent & { readonly seq: number }

/** Where a subscription's events go, each once and in order, as they happen. */
export interface SessionSink {
  readonly event: (event: SessionEvent) => void
  /** No more events: the session was deleted (or its log could not be read; the client resumes from its last seq). */
  readonly end: () => void
}

/**
 * Following a session's events for a stream: a turn live from the hub, or the log replayed and then live, each
 * event once and in order; and, in cluster mode, keeping the session's owner awake while streams wait on it.
 */

const REPLAY_PAGE = 500

/**
 * How long a read waits for the session's owner to wake in cluster mode (see `wakeBeforeRead`): an entity starts in
 * well under it; a hand-over lasts up to the grace. At 3 s a client reading through two runners in turn during one
 * hand-over waited 6.8 s (the fault checker's recovery probe, over its 5 s bound).
 */
const READ_WAKE = "1500 millis"

export class SessionFollow extends Effect.Service<SessionFollow>()("atrium/sessions/SessionFollow", {
  scoped: Effect.gen(function*() {
    const repo = yield* SessionsRepo
    const hub = yield* SessionHub
    const client = yield* Session.client
    /** Wakes leave from this service's fibers, so an active session does not keep a request alive. */
    const toEntity = yield* makeEntityCaller
    /**
     * Runs what a subscription starts from the hub's callback (reading a gap from the log) with the service's context,
     * not the subscribing request's, which would otherwise stay reachable for as long as the stream is held. Its
     * fibers belong to the service (interrupted when it stops) and to the subscription's scope where one is given.
     */
    const runInService = yield* FiberSet.makeRuntime<never>()
    /**
     * Cluster mode: a stream here follows a session another runner owns only while that owner tells this runner its
     * events (`NOTIFY`), which it does for `lease` after each follow (`SessionLog.follow`). Each watched session's
     * owner hears from this runner three times per lease (`ownerCheck`), which also wakes a session whose runner died.
     */
    const lease = (yield* SessionsConfig).followLease
    const ownerCheck = Duration.divide(lease, 3).pipe(Option.getOrElse(() => lease))
    /** How this runner names itself to an owner when it follows a session (none outside cluster mode). */
    const follower = hub.clustered ? hub.self : undefined

    /** A message to the session's entity: it starts on (or moves to) its owner, which closes a turn a dead runner cut. */
    const wake = (id: SessionId) => Effect.asVoid(Effect.orDie(toEntity(client(id).Wake({}))))

    /**
     * A wake that also says this runner follows the session: answered once whatever was logged before can be read,
     * and from then on the owner tells this runner what it logs, for the lease.
     */
    const follow = (id: SessionId) => Effect.asVoid(Effect.orDie(toEntity(client(id).Wake({ follower }))))

    /**
     * Before a read or a subscription: a wake, so the owner has closed a turn a dead runner cut. Bounded in cluster
     * mode: while the session's shard moves (a runner taking its shards back, the turn finishing on the runner giving
     * it up), nobody answers the wake until the hand-over ends, and a read waited up to the entity deadline (the fault
     * checker's woken runner answered a session read after 12 s, issue 42). Past `READ_WAKE` the read answers what
     * the log holds. The wake itself is not cut (`disconnect`): it may be starting the session on its new owner,
     * closing a cut turn and voiding its hold, which an interruption would leave half done; and waiting for a cut
     * call to wind down held the read up to a second more. One process has no hand-over: its wake is a local start,
     * waited for whole.
     */
    const wakeBeforeRead = hub.clustered
      ? (id: SessionId) => Effect.asVoid(Effect.timeoutOption(Effect.disconnect(wake(id)), READ_WAKE))
      : wake

    /**
     * Cluster mode: while streams wait for a session's events, the session is woken now and then. If its runner
     * died, that message reaches the next owner, which closes the cut turn (`run.failed` `interrupted`), and the
     * streams end instead of waiting for a turn no runner runs any more. One check per session in this process,
     * however many of its streams wait here: one per stream was a wake every 3 s per subscriber (2,000 idle
     * subscriptions on 200 sessions kept half a core busy); and one loop for all of them (`watched`).
     */
    const sharding = yield* Sharding.Sharding
    /**
     * A session whose shard this runner has held since the last check needs no waking from here: if this runner
     * dies, its streams die with it. So a single runner wakes nothing once its streams are settled, and a subscription
     * on the owner's runner costs no message. The check after the shard came here still wakes it: that is what
     * starts the entity that closes a turn the previous owner's death cut. Asked at every check, since shards move;
     * the session's shard itself never changes, so it is computed once.
     */
    type Watch = {
      streams: number
      heldBefore: boolean
      readonly shard: ShardId.ShardId
      /** When the owner last answered this runner's follow (0: not yet). */
      followedAt: number
    }
    /** Whether the session needs a wake now (its shard is not settled here), noting where its shard is. */
    const due = (watch: Watch) => {
      const held = sharding.hasShardId(watch.shard)
      const settled = held && watch.heldBefore
      watch.heldBefore = held
      return !settled
    }
    const renewal = Duration.toMillis(ownerCheck) * 1.5
    /**
     * Follows the session for `watch`. When the owner had not heard from this runner for longer than a renewal (the
     * first follow, or follows that failed while its runner was away), it may have logged events it did not tell
     * here: the hub reads them from the log for this runner's streams. Every cause is ignored: while the owner's
     * runner is dead the wake dies (no runner for the shard yet), and that must not stop the check, which the next
     * owner needs.
     */
    const followChecked = (id: SessionId, watch: Watch) =>
      Effect.gen(function*() {
        yield* follow(id)
        const now = yield* Clock.currentTimeMillis
        const lapsed = now - watch.followedAt > renewal
        watch.followedAt = now
        if (lapsed) yield* hub.catchUpSession(id)
      }).pipe(Effect.catchAllCause(() => Effect.void))
    /**
     * The sessions this process's streams wait on, each with its number of streams and whether its shard was held
     * here at the last check. One loop per process checks them all every `ownerCheck` (issue 28: a fiber and a
     * schedule per session cost 10,000 idle subscriptions a steady share of a core); a session's first check runs at
     * once, as a stream starts waiting on it. The check itself is a plain pass over the map: only the sessions that
     * need a wake get an effect (and a fiber), so settled ones cost a lookup each, not a fiber each (1,000 watched
     * sessions were 1,000 fibers every check).
     */
    const watched = new Map<SessionId, Watch>()
    if (hub.clustered) {
      const checkAll = Effect.suspend(() => {
        const waking: Array<readonly [SessionId, Watch]> = []
        for (const entry of watched) if (due(entry[1])) waking.push(entry)
        return waking.length === 0
          ? Effect.void
          : Effect.forEach(waking, ([id, watch]) => followChecked(id, watch), { discard: true, concurrency: 64 })
      })
      yield* checkAll.pipe(Effect.repeat(Schedule.spaced(ownerCheck)), Effect.forkScoped)
    }

    /**
     * For the life of the scope, this process's streams of the session keep its owner checked (cluster mode). `now`:
     * the first check at once, answered before this returns (bounded like a read's wake), so what the stream reads of
     * the log next and what the owner tells this runner from then on leave nothing out. A turn's own stream skips it:
     * the message it sends next follows the session (and starts it) as that check would, which cost a turn a second
     * entity message (issue 28).
     */
    const watchOwner = (id: SessionId, now: boolean) =>
      hub.clustered
        ? Effect.gen(function*() {
          const first = yield* Effect.acquireRelease(
            Clock.currentTimeMillis.pipe(Effect.map((at) => {
              const watch = watched.get(id)
              if (watch !== undefined) {
                watch.streams++
                return undefined
              }
              const added: Watch = { streams: 1, heldBefore: false, shard: shardOf(sharding, Session, id), followedAt: now ? 0 : at }
              watched.set(id, added)
              return now && due(added) ? added : undefined
            })),
            () =>
              Effect.sync(() => {
                const watch = watched.get(id)
                if (watch !== undefined && --watch.streams <= 0) watched.delete(id)
              })
          )
          if (first !== undefined) yield* Effect.timeoutOption(Effect.disconnect(followChecked(id, first)), READ_WAKE)
        })
        : Effect.void

    /**
     * Follows one turn for the life of the scope: its live events to `sink` until its last (then `end`), from a
     * listener added before the turn could start. Until `turn` is known (a message's turn is numbered when the
     * session accepts it) events wait; then those of other turns are dropped. No turn number: the next turn's
     * events, whichever it is (an approval's answer continues the waiting turn). `sending`: the caller sends the
     * session a message next (`watchOwner`'s first check is left to it).
     */
    const followTurn = (id: SessionId, sink: SessionSink, options?: { readonly sending?: boolean }) =>
      Effect.gen(function*() {
        let turn: Option.Option<number> | undefined
        let ended = false
        const early: Array<HubEvent> = []
        const deliver = (event: HubEvent): void => {
          if (ended) return
          if (turn === undefined) {
            early.push(event)
            return
          }
          if (event._tag === "closed") {
            ended = true
            return sink.end()
          }
          if (Option.isSome(turn) && event.turn !== turn.value) return
          sink.event(event.event as SessionEvent)
          if (isTerminal(event.event)) {
            ended = true
            sink.end()
          }
        }
        yield* hub.listen(id, deliver)
        yield* watchOwner(id, options?.sending !== true)
        /** Now that the turn is known, what arrived before it is delivered, in order. */
        return (known: Option.Option<number>) =>
          Effect.sync(() => {
            turn = known
            for (const event of early.splice(0)) deliver(event)
          })
      })

    /**
     * One turn read from the log: from its first event (replayed), then live, until its last event (then `end`). What
     * a retry with the message's `Idempotency-Key` reads, on whichever runner it lands. The session is woken first, so
     * a turn whose runner died is closed by its next owner rather than waited for.
     */
    const followLoggedTurn = (id: SessionId, turn: number, sink: SessionSink) =>
      Effect.gen(function*() {
        yield* wake(id)
        yield* followLog(id, yield* repo.turnStart(id, turn), Option.some(turn), sink)
      })

    /**
     * The session's events after `start`, to `sink`, for the life of the scope: from the log first, then live; across
     * turns until the session is deleted, or, given `turn`, that turn's only, until its last. The log is read after
     * listening, so every event is either replayed or live; `seq` drops duplicates.
     */
    const followLog = (id: SessionId, start: number, turn: Option.Option<number>, sink: SessionSink) =>
      Effect.gen(function*() {
        let last = start
        let ended = false
        /** Set while the log is read; live events meanwhile wait in `pending`, and those it covered are dropped. */
        let reading = true
        const pending: Array<HubEvent> = []
        const scope = yield* Effect.scope

        const end = () => {
          ended = true
          sink.end()
        }
        const ours = (eventTurn: number) => Option.isNone(turn) || turn.value === eventTurn
        /** Tells one logged event, if it is the followed turn's, and ends after that turn's last. */
        const tell = (eventTurn: number, event: SessionEvent) => {
          if (!ours(eventTurn)) return
          sink.event(event)
          if (Option.isSome(turn) && isTerminal(event)) end()
        }
        const readLog: Effect.Effect<void> = Effect.gen(function*() {
          for (;;) {
            const rows = yield* repo.eventsAfter(id, last, REPLAY_PAGE)
            for (const row of rows) {
              if (ended || row.seq <= last) continue
              last = row.seq
              tell(row.turn, row.payload as unknown as SessionEvent)
            }
            if (rows.length < REPLAY_PAGE || ended) break
          }
          reading = false
          while (pending.length > 0 && !reading && !ended) deliver(pending.shift()!)
        }).pipe(
          // The log cannot be read: end the stream rather than leave a hole in it; the client resumes from its last seq.
          Effect.catchAllCause((cause) => Effect.zipRight(Effect.logWarning("session subscription could not read the log", cause), Effect.sync(end)))
        )
        const deliver = (event: HubEvent): void => {
          if (ended) return
          if (reading) {
            pending.push(event)
            return
          }
          if (event._tag === "closed") return end()
          // A turn that never ran (the session was deleted while it waited) is ended without a log entry.
          if (event._tag === "dropped") {
            if (Option.isSome(turn) && turn.value === event.turn) {
              sink.event(event.event as SessionEvent)
              end()
            }
            return
          }
          if (event.seq <= last) return
          if (event.seq === last + 1) {
            last = event.seq
            return tell(event.turn, event.event as SessionEvent)
          }
          // Past the next `seq` (a notification lost between runners): the ones before it are in the log.
          reading = true
          pending.push(event)
          runInService(readLog, { scope })
        }

        yield* hub.listen(id, deliver)
        yield* watchOwner(id, true)
        yield* Effect.forkIn(readLog, scope)
      })

    return { wakeBeforeRead, followTurn, followLog, followLoggedTurn, follower } as const
  }),
  dependencies: [SessionsRepo.Default, SessionHub.Default, SessionsConfig.Default]
}) {}
