import type { SessionId } from "../platform/Ids.js"
import { Cause, Deferred, Effect, Exit, Option } from "effect"
import { Fenced } from "../platform/cluster/Fences.js"
import { groupCommit } from "../platform/GroupCommit.js"
import type { InternalEvent } from "../runtime/Events.js"
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
 */
export class SessionLog extends Effect.Service<SessionLog>()("atrium/sessions/SessionLog", {
  scoped: Effect.gen(function*() {
    const repo = yield* SessionsRepo
    const hub = yield* SessionHub
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

    const commit = (batch: ReadonlyArray<Pending>) =>
      repo.commitLog(
        batch.map((pending) => pending.write),
        hub.channel,
        batch.map((pending) => logged(pending.write).flatMap((event) => Option.toArray(hub.noteOf(pending.write.sessionId, event))))
      )

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
    const offer = yield* groupCommit({ maxBatch: MAX_BATCH, write: flush })

    const enqueue = (write: LogWrite) =>
      Effect.gen(function*() {
        const done = yield* Deferred.make<void>()
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

    return { append, commit: commitNow, failed, refused, resume } as const
  }),
  dependencies: [SessionsRepo.Default, SessionHub.Default]
}) {}
