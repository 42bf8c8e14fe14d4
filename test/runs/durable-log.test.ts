import { assert, describe, layer } from "@effect/vitest"
import { Cause, Effect, Exit, Layer } from "effect"
import { openLog } from "../../src/runs/Background.js"
import { RunRecords } from "../../src/runs/Repo.js"
import { UserId } from "../../src/platform/Ids.js"
import { RunId } from "../../src/runtime/Domain.js"
import type { InternalEvent } from "../../src/runtime/Events.js"
import { insertUser, TestDatabase } from "../support/Database.js"

/**
 * A background run's log when a step is tried again (issue 43, docs/runs.md "A step tried again"): each event a step
 * tells carries the step and its attempt, and an attempt after others marks theirs superseded, so every read of the
 * log (`GET /v1/runs/:id/events`, a background response's fold, an eval's driver) tells the step once, from its last
 * attempt, whether the attempt before it was cut within the execution (an outage's retry) or with its runner (a kill:
 * the next execution counts the attempts from the log).
 */

let made = 0
const queuedRun = Effect.gen(function*() {
  const repo = yield* RunRecords
  const userId = UserId.make(`usr_durable_log_${process.pid}_${++made}`)
  yield* insertUser(userId)
  const id = RunId.make(`run_durable_log_${process.pid}_${made}`)
  yield* repo.enqueue({
    id,
    partition: { accountId: userId, endUserId: "" },
    agentId: null,
    agentVersion: null,
    agent: "builtin",
    sessionId: null,
    request: {},
    deadlineAt: new Date(Date.now() + 60_000)
  })
  return id
})

const text = (delta: string): InternalEvent => ({ type: "text", delta })
const read = (runId: RunId) =>
  Effect.map(Effect.flatMap(RunRecords, (repo) => repo.eventsAfter(runId, 0)), (rows) => rows.map((row) => row.payload as Record<string, unknown>))

describe("durable runs: a step tried again", () => {
  layer(RunRecords.Default.pipe(Layer.provideMerge(TestDatabase())))((it) => {
    it.effect("the events of an attempt cut by an outage are superseded by the next attempt's; a later execution counts on", () =>
      Effect.gen(function*() {
        const repo = yield* RunRecords
        const runId = yield* queuedRun
        yield* Effect.scoped(Effect.gen(function*() {
          const log = yield* openLog(repo, runId)
          yield* log.emit({ type: "preparing", run_id: runId, agent: "builtin" })
          // The first attempt tells some of its text (written), then dies as a database restart would cut it.
          const first = yield* Effect.exit(log.attempt("step/1", Effect.gen(function*() {
            yield* log.emit(text("Hel"))
            yield* log.flush
            yield* log.emit(text("lo (lost)"))
            return yield* Effect.die(new Error("Connection terminated"))
          })))
          assert.isTrue(Exit.isFailure(first) && Cause.isDie(first.cause))
          yield* log.attempt("step/1", Effect.all([log.emit(text("Hello")), log.emit({ type: "turn_start", turn: 2 })]))
          yield* log.flush
        }))
        const once = yield* read(runId)
        assert.deepStrictEqual(once.map((e) => [e.type, e.delta, e.step, e.attempt]), [
          ["preparing", undefined, undefined, undefined],
          ["text", "Hello", "step/1", 2],
          ["turn_start", undefined, "step/1", 2]
        ])
        // Both attempts' events are kept in the log (superseded, not deleted): seqs are never taken twice.
        const { last } = yield* repo.logState(runId)
        assert.strictEqual(last, 5)
        // A stream resumed after seq 5 numbers its events on from the 3 a read shows up to there (`event_id`).
        assert.strictEqual(yield* repo.shownUpTo(runId, 5), 3)

        // The next execution (its runner killed mid-step) counts the step's attempts from the log.
        yield* Effect.scoped(Effect.gen(function*() {
          const log = yield* openLog(repo, runId)
          yield* log.attempt("step/1", log.emit(text("Hello again")))
          yield* log.attempt("tool/1/0", log.emit({ type: "tool_call", tool_call_id: "c1", name: "calculator", status: "completed" }))
          yield* log.flush
        }))
        const twice = yield* read(runId)
        assert.deepStrictEqual(twice.map((e) => [e.type, e.step, e.attempt]), [
          ["preparing", undefined, undefined],
          ["text", "step/1", 3],
          ["tool_call", "tool/1/0", 1]
        ])
      }))
  })
})
