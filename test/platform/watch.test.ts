import { RunnerAddress, Runners } from "@effect/cluster"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, TestServices } from "effect"
import { ShardFences } from "../../src/platform/cluster/Fences.js"
import { RunnersRepo } from "../../src/platform/cluster/Repo.js"
import { watchRunners } from "../../src/platform/cluster/Watch.js"
import { DatabaseSessions } from "../../src/platform/Database.js"
import { pollUntil } from "../support/Poll.js"

/**
 * The runners' watch (`platform/cluster/Watch.ts`) over a fake heartbeat table and fake pings: which runner it cuts,
 * and when. On the real clock: the watch times by `Date.now()`, as a runner must when its own event loop may stall.
 */
const watching = (peer: { beats: () => string; ping: Effect.Effect<void, Error> }) =>
  Effect.gen(function*() {
    const cuts: Array<string> = []
    const repo = {
      register: () => Effect.void,
      unregister: () => Effect.void,
      beatAndWatch: () => Effect.sync(() => [{ address: "127.0.0.1:2", applicationName: "atrium:peer", beat: peer.beats(), selfFresh: true }]),
      cut: (applicationName: string) => Effect.sync(() => (cuts.push(applicationName), 0)),
      remaining: () => Effect.succeed(0),
      markUnhealthy: () => Effect.void
    } as unknown as RunnersRepo
    const runners = { ping: () => peer.ping } as unknown as Runners.Runners["Type"]
    yield* Layer.build(watchRunners(RunnerAddress.make("127.0.0.1", 1)).pipe(
      Layer.provide(Layer.succeed(RunnersRepo, repo)),
      Layer.provide(Layer.succeed(Runners.Runners, runners)),
      Layer.provide(ShardFences.Default),
      Layer.provide(Layer.succeed(DatabaseSessions, DatabaseSessions.make({ applicationName: "atrium:self" })))
    ))
    return cuts
  })

/** A heartbeat that moves for its first `moving` reads (the watch must see it beat), then stands still. */
const stopsAfter = (moving: number) => {
  let reads = 0
  return () => String(Math.min(++reads, moving))
}

describe("the runners' watch", () => {
  it.scoped("cuts a runner that stood still and whose port refuses every ping (kill -9), within seconds", () =>
    Effect.gen(function*() {
      const cuts = yield* watching({ beats: stopsAfter(3), ping: Effect.fail(new Error("ECONNREFUSED")) })
      // Silent at 2.5 s, pings unanswered since 1 s before: cut by about 3 s after its last beat. Before, a refused
      // ping never counted as one left unanswered, and such a runner was never cut by the watch.
      yield* pollUntil(Effect.sync(() => cuts.length), (n) => n > 0, "the killed runner cut", { within: 15_000 })
      assert.deepStrictEqual(cuts.slice(0, 1), ["atrium:peer"])
    }).pipe(TestServices.provideLive), { timeout: 30_000 })
})
