import { afterEach, assert, describe, it, vi } from "@effect/vitest"
import { Effect } from "effect"
import { ShardFences } from "../../src/platform/cluster/Fences.js"

/**
 * Fencing tokens as one runner's `ShardFences` keeps them (issue 42 item 8), over a table of generations in memory
 * with the semantics of `RunnersRepo.raiseGenerations` (migration 0017): an acquisition raises the shard's
 * generation, except by the runner that was its last owner under the generation it knew. The runner storage's
 * answers are played by hand, in the order Cluster.ts's `TrackedRunnerStorage` passes them on.
 */

const shard = { group: "default", id: 7 }
const key = "default:7"

/** `shard_generations` in memory, raised as the SQL raises it. */
const generations = () => {
  const rows = new Map<string, { generation: bigint; runner: string }>()
  let raises = 0
  const raise = (runner: string) => (fresh: ReadonlyArray<{ shard: string; known: string | null }>) =>
    Effect.sync(() => {
      raises++
      return fresh.map(({ known, shard }) => {
        const row = rows.get(shard)
        const asked = BigInt(known ?? "0") + 1n
        const generation = row === undefined
          ? asked
          : row.runner === runner && row.generation + 1n === asked
          ? row.generation
          : row.generation + 1n
        rows.set(shard, { generation, runner })
        return { shard, generation: String(generation) }
      })
    })
  return { rows, raise, raises: () => raises }
}

const runner = Effect.gen(function*() {
  const fences = yield* ShardFences
  fences.track()
  return fences
}).pipe(Effect.provide(ShardFences.Default))

/** The process's clock, moved on by `stall` to play a pause (SIGSTOP) that the 250 ms timer sees as a gap. */
let offset = 0
const realNow = Date.now.bind(Date)
const pause = (ms: number) => void (offset += ms)
afterEach(() => {
  vi.restoreAllMocks()
  offset = 0
})

describe("ShardFences", () => {
  it.effect("a shard re-locked by a refresh after a pause, owned meanwhile by another runner, gets a new generation", () =>
    Effect.gen(function*() {
      vi.spyOn(Date, "now").mockImplementation(() => realNow() + offset)
      const table = generations()
      const a = yield* runner
      const b = yield* runner
      yield* a.record(undefined, [shard], table.raise("A"))
      const fence = a.fenceOf(shard)!
      assert.strictEqual(fence.generation, "1")
      // A is paused past its locks: B acquires the shard, then hands it back (A rejoined) and releases it.
      pause(3_000)
      yield* b.record(undefined, [shard], table.raise("B"))
      b.release(shard)
      // A wakes; its first refresh takes the lock again on a new connection and names the shard as held.
      a.tick()
      // The refresh begins after the gap was seen (a later millisecond): only such a refresh verifies the shard again.
      pause(5)
      const refresh = a.refreshStarting()
      assert.isTrue(refresh.suspect)
      yield* a.record([shard], [shard], table.raise("A"), refresh)
      a.refreshConfirmed(refresh)
      assert.strictEqual(table.rows.get(key)!.generation, 3n)
      assert.strictEqual(a.fenceOf(shard)!.generation, "3")
      assert.isFalse(a.fenceCurrent(fence), "an entity started before the pause still writes under its old fence")
      assert.strictEqual(a.shardState(shard), "held")
    }))

  it.effect("after a refresh that failed, a shard another runner owned meanwhile gets a new generation", () =>
    Effect.gen(function*() {
      const table = generations()
      const a = yield* runner
      const b = yield* runner
      yield* a.record(undefined, [shard], table.raise("A"))
      const fence = a.fenceOf(shard)!
      // A's lock connection was ended (pg_terminate_backend): its refresh fails, B takes the shard and releases it.
      a.refreshFailed()
      yield* b.record(undefined, [shard], table.raise("B"))
      b.release(shard)
      const refresh = a.refreshStarting()
      yield* a.record([shard], [shard], table.raise("A"), refresh)
      a.refreshConfirmed(refresh)
      assert.isFalse(a.fenceCurrent(fence))
      assert.strictEqual(a.fenceOf(shard)!.generation, "3")
    }))

  it.effect("a shard re-locked after an outage that nobody else took keeps its generation (running turns go on)", () =>
    Effect.gen(function*() {
      const table = generations()
      const a = yield* runner
      yield* a.record(undefined, [shard], table.raise("A"))
      const fence = a.fenceOf(shard)!
      a.refreshFailed()
      const refresh = a.refreshStarting()
      yield* a.record([shard], [shard], table.raise("A"), refresh)
      a.refreshConfirmed(refresh)
      assert.isTrue(a.fenceCurrent(fence))
      assert.strictEqual(table.rows.get(key)!.generation, 1n)
    }))

  it.effect("a refresh of a runner that never stalled writes nothing", () =>
    Effect.gen(function*() {
      const table = generations()
      const a = yield* runner
      yield* a.record(undefined, [shard], table.raise("A"))
      for (let i = 0; i < 3; i++) {
        const refresh = a.refreshStarting()
        assert.isFalse(refresh.suspect)
        yield* a.record([shard], [shard], table.raise("A"), refresh)
        a.refreshConfirmed(refresh)
      }
      assert.strictEqual(table.raises(), 1)
    }))
})
