import type { SessionId } from "../platform/Ids.js"
import { Cause, Clock, Deferred, Duration, Effect, Exit, Option } from "effect"
import { Fenced } from "../platform/cluster/Fences.js"
import { groupCommit } from "../platform/GroupCommit.js"
import type { InternalEvent } from "../runtime/Events.js"
import { SessionsConfig } from "./Config.js"
import { SessionHub } from "./Hub.js"
import { SessionsRepo } from "./Repo.js"
import type { LogWrite } from "./Rows.js"

/** The most writes one statement carries; more wait for the next. */
const MAX_BATCH = 512

interface Pending {
  readonly write: LogWrite
  readonly done: Deferred.Deferred<void>
}

/**
 * Group commit of the sessions' logs: every write of every session of this process goes through one writer
 * (`groupCommit`), which commits all that arrived while the previous statement ran as ONE statement
 * (`SessionsRepo.commitLog`). A turn's events are not written one transaction each: those a fast model emits
 * together share a commit, and so do those of sessions running side by side. Subscribers (here and, through the
 * statement's `NOTIFY`, on other runners) see an event only once it is committed, as before.
 *
 * If a shared statement fails, each write is tried alone, so a refused write (its session was deleted meanwhile)
 * fails only itself: its events are not told to anyone, and a caller waiting for it dies with the cause.
 *
 * A failed write breaks its session's log: every later write of that session is refused without being tried, until
 * the session says it has read its position again (`resume`). Otherwise a later write could commit after a lost one
 * and leave a hole in `seq` (issue 33: resumes that went 5094, 5097). The session sees `broken` and stops its turn.
 *
 * Cluster mode: a write's `NOTIFY` goes out only while another runner follows its session (`follow`, renewed by the
 * follower) or the session started on this runner within the lease (`expectFollowers`). PostgreSQL wakes every
 * listening backend, one per runner, for every `NOTIFY`, whatever its channel, and each wake is a transaction: a
 * turn nobody follows elsewhere (a background run, a stream on the owner's own runner, one runner) costs none of
 * them (issue 45, docs/sessions.md "Who is told").
 */
export class SessionLog extends Effect.Service<SessionLog>()("atrium/sessions/SessionLog", {
  scoped: Effect.gen(function*() {
    const repo = yield* SessionsRepo
    const hub = yield* SessionHub
    const lease = Duration.toMillis((yield* SessionsConfig).followLease)
    /** Until when each session's writes are told to other runners (epoch milliseconds). */
    const toldUntil = new Map<SessionId, number>()
    /** Each session's last write not yet committed: what a new follower waits for before it reads the log. */
    const lastPending = new Map<SessionId, Deferred.Deferred<void>>()
    const broken = new Set<SessionId>()
    /** Sessions whose write was refused by its fence since they last resumed. */
    const fenced = new Set<SessionId>()
    const refusal = (sessionId: SessionId) => Cause.die(new Error(`an earlier write of session ${sessionId} failed; its log waits for the session to resume`))

    const logged = (write: LogWrite) =>
      (write.events ?? []).map((event) => ({
        _tag: "logged" as const,
        turn: event.turn,
        seq: event.seq,
        event: event.payload as unknown as InternalEvent & { seq: number }
      }))

    /** Whether another runner may follow the session now (its writes are notified). */
    const followed = (sessionId: SessionId, now: number) => {
      const until = toldUntil.get(sessionId)
      if (until === undefined) return false
      if (until > now) return true
      toldUntil.delete(sessionId)
      return false
    }

    const commit = (batch: ReadonlyArray<Pending>) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        repo.commitLog(
          batch.map((pending) => pending.write),
          hub.channel,
          batch.map((pending) =>
            hub.clustered && followed(pending.write.sessionId, now)
              ? logged(pending.write).flatMap((event) => Option.toArray(hub.noteOf(pending.write.sessionId, event)))
              : []
          )
        ))

    const flush = (all: ReadonlyArray<Pending>): Effect.Effect<void> =>
      Effect.gen(function*() {
        const batch: Array<Pending> = []
        for (const pending of all) {
          if (broken.has(pending.write.sessionId)) yield* Deferred.failCause(pending.done, refusal(pending.write.sessionId))
          else batch.push(pending)
        }
        if (batch.length === 0) return
        const exit = yield* Effect.exit(commit(batch))
        if (Exit.isSuccess(exit)) {
          // A write refused by its fence (its session's shard has a newer owner) wrote nothing: its session's log
          // breaks here like after a failed write, and its writer learns why (`Fenced`).
          const refused = new Set(exit.value)
          for (const [i, pending] of batch.entries()) {
            if (!refused.has(i)) continue
            broken.add(pending.write.sessionId)
            fenced.add(pending.write.sessionId)
            yield* Effect.logWarning(`a write of session ${pending.write.sessionId} was refused: this runner no longer owns its shard`)
            yield* Deferred.die(pending.done, new Fenced(`session ${pending.write.sessionId}`))
          }
          for (const [i, pending] of batch.entries()) {
            if (refused.has(i)) continue
            for (const event of logged(pending.write)) yield* hub.publishLocal(pending.write.sessionId, event)
            yield* Deferred.succeed(pending.done, undefined)
          }
          return
        }
        if (batch.length === 1) {
          broken.add(batch[0]!.write.sessionId)
          yield* Effect.logWarning("a session log write was refused", exit.cause)
          yield* Deferred.failCause(batch[0]!.done, exit.cause)
          return
        }
        for (const pending of batch) yield* flush([pending])
      })

    // What is still queued when the service stops is written before it ends (`groupCommit`).
    const offer = yield* groupCommit<Pending>({
      maxBatch: MAX_BATCH,
      // Each write is answered by `flush`, however it went: a session's last one is then no longer pending.
      write: (all: ReadonlyArray<Pending>) =>
        Effect.ensuring(flush(all), Effect.sync(() => {
          for (const { done, write } of all) if (lastPending.get(write.sessionId) === done) lastPending.delete(write.sessionId)
        }))
    })

    const enqueue = (write: LogWrite) =>
      Effect.gen(function*() {
        const done = yield* Deferred.make<void>()
        lastPending.set(write.sessionId, done)
        yield* offer({ write, done })
        return done
      })

    /** Queues the write; returns when it is queued, not committed (it will be committed in order with the rest). */
    const append = (write: LogWrite) => Effect.asVoid(enqueue(write))

    /** Queues the write and returns once it is committed (and its events told). */
    const commitNow = (write: LogWrite) => Effect.flatMap(enqueue(write), Deferred.await)

    /** Whether a write of the session failed since it last resumed (its turn must stop: the log cannot go on). */
    const failed = (sessionId: SessionId) => broken.has(sessionId)

    /** Whether a write of the session was refused by its fence since it last resumed: this runner lost it. */
    const refused = (sessionId: SessionId) => fenced.has(sessionId)

    /** The session has read its position from the database again: its writes are tried again. */
    const resume = (sessionId: SessionId) =>
      Effect.sync(() => {
        broken.delete(sessionId)
        fenced.delete(sessionId)
      })

    /**
     * The session's writes are told to other runners for the lease from now (or longer, if already told longer): it
     * starts on this runner, and followers it does not know of yet say so within the lease.
     */
    const expectFollowers = (sessionId: SessionId) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        toldUntil.set(sessionId, Math.max(toldUntil.get(sessionId) ?? 0, now + lease))
      })

    /**
     * Another runner follows the session: its writes are notified for the lease, and this returns once every write
     * queued before is committed, so a follower that reads the log after this misses nothing (what is committed
     * later is notified).
     */
    const follow = (sessionId: SessionId) =>
      Effect.gen(function*() {
        yield* expectFollowers(sessionId)
        const pending = lastPending.get(sessionId)
        if (pending !== undefined) yield* Effect.exit(Deferred.await(pending))
      })

    /** The session stopped here (passivated, moved, deleted). */
    const forget = (sessionId: SessionId) => Effect.sync(() => void toldUntil.delete(sessionId))

    return { append, commit: commitNow, failed, refused, resume, follow, expectFollowers, forget } as const
  }),
  dependencies: [SessionsRepo.Default, SessionHub.Default, SessionsConfig.Default]
}) {}
