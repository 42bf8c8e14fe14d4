import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { RunnerTurns, UnfinishedTurns } from "../../src/sessions/Activation.js"

/** Whether `turns` has none left, asked without waiting: a drain with nothing to wait for answers at once. */
const drainedNow = (turns: UnfinishedTurns) => Effect.map(Effect.timeoutOption(turns.drained(), "10 millis"), Option.isSome)

/** A runner's count of its sessions' unfinished turns (`RunnerTurns`): what a stopping runner drains. */
describe("RunnerTurns", () => {
  it.live("each platform built counts its own sessions' turns, and an activation that ends gives back its queued ones", () =>
    Effect.gen(function*() {
      // Two platforms built in one process, as the test workers build them.
      const first = yield* Effect.provide(RunnerTurns, RunnerTurns.Default)
      const second = yield* Effect.provide(RunnerTurns, RunnerTurns.Default)
      const session = new UnfinishedTurns(first.turns)
      yield* session.add(1)
      assert.isFalse(yield* drainedNow(first.turns), "the first platform waits for its session's turn")
      assert.isTrue(yield* drainedNow(second.turns), "another platform's turn keeps no drain waiting")
      // The activation ends with that turn still queued: it is the next activation's, no longer this runner's.
      yield* session.release()
      assert.isTrue(yield* drainedNow(first.turns))
      yield* session.add(1)
      assert.isTrue(yield* drainedNow(first.turns), "an activation counts nothing into its runner after its release")
    }))
})
