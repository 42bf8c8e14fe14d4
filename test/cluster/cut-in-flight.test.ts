import {
  Entity,
  MessageStorage,
  Reply,
  Runner,
  RunnerAddress,
  RunnerHealth,
  Runners,
  RunnerStorage,
  Sharding,
  ShardingConfig,
  Snowflake
} from "@effect/cluster"
import * as Rpc from "@effect/rpc/Rpc"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Layer, MutableHashMap, Option, Schema, TestClock, TestContext } from "effect"
import { cutInFlightWhenUnavailable } from "../../src/platform/Cluster.js"

/**
 * Issue 42 item 7: a message in flight to a runner that then leaves the healthy set (paused: its kernel keeps the
 * socket open, so nothing ever answers) is cut and sent again to the shard's new owner, instead of waiting out the
 * caller's 12 s deadline. In the shape of `@effect/cluster`'s own `Sharding.test.ts` ("retries client interrupts to
 * the runner processing the request"): a client-only `Sharding` over an in-memory runner storage with two other
 * runners, and a `Runners` that records where each request went. The first owner never answers; the second does.
 */

const Probe = Entity.make("Probe", [Rpc.make("Get", { success: Schema.Number })])

const runnerA = RunnerAddress.make("runner-a", 1)
const runnerB = RunnerAddress.make("runner-b", 2)

/** An in-memory runner storage that keeps each runner's health (`RunnerStorage.makeMemory` says every one is healthy). */
const runnerStorage = Layer.effect(
  RunnerStorage.RunnerStorage,
  Effect.gen(function*() {
    const storage = yield* RunnerStorage.makeMemory
    const healthy = MutableHashMap.empty<RunnerAddress.RunnerAddress, boolean>()
    for (const address of [runnerA, runnerB]) {
      yield* storage.register(Runner.make({ address, groups: ["default"], weight: 1 }), true)
      MutableHashMap.set(healthy, address, true)
    }
    return RunnerStorage.RunnerStorage.of({
      ...storage,
      getRunners: Effect.map(storage.getRunners, (runners) =>
        runners.map(([runner]) => [runner, Option.getOrElse(MutableHashMap.get(healthy, runner.address), () => true)] as const)),
      setRunnerHealth: (address, value) => Effect.sync(() => void MutableHashMap.set(healthy, address, value))
    })
  })
)

/**
 * Where each request was sent. The runner the first request goes to (the shard's owner) pauses as it arrives: it
 * never answers; any other answers 42.
 */
const makeRunners = (requestedOn: Array<RunnerAddress.RunnerAddress>) =>
  Layer.scoped(
    Runners.Runners,
    Effect.map(Runners.makeNoop, (runners) => ({
      ...runners,
      send: ({ address, message }) =>
        Effect.suspend(() => {
          if (message._tag !== "OutgoingRequest") return Effect.void
          requestedOn.push(address)
          if (address.host === requestedOn[0]!.host) return Effect.never
          return message.respond(
            new Reply.WithExit({
              requestId: message.envelope.requestId,
              id: Snowflake.Snowflake(BigInt(requestedOn.length)),
              exit: Exit.succeed(42) as Exit.Exit<any>
            })
          )
        })
    }))
  )

const cluster = <R>(runners: Layer.Layer<Runners.Runners, never, R>) =>
  Sharding.layer.pipe(
    Layer.provide(runners),
    Layer.provideMerge(runnerStorage),
    Layer.provide([RunnerHealth.layerNoop, MessageStorage.layerMemory, Snowflake.layerGenerator]),
    Layer.provide(ShardingConfig.layer({ runnerAddress: Option.none(), refreshAssignmentsInterval: 10, sendRetryInterval: 100 }))
  )

describe("a message in flight to a runner that leaves (issue 42 item 7)", () => {
  it.scoped("is cut when the cluster sees its runner go, and answered by the shard's new owner", () =>
    Effect.gen(function*() {
      const requestedOn: Array<RunnerAddress.RunnerAddress> = []
      yield* Effect.gen(function*() {
        yield* TestClock.adjust(10)
        const client = (yield* Probe.client)("1")
        // The first send goes to the shard's owner, which is paused from then on: nothing answers it there.
        const call = yield* Effect.fork(client.Get())
        while (requestedOn.length === 0) yield* TestClock.adjust(10)
        const paused = requestedOn[0]!
        const other = paused.host === runnerA.host ? runnerB : runnerA
        yield* TestClock.adjust(1000)
        assert.isNull(call.unsafePoll(), "answered while its owner was paused")
        // The runners' watch takes the paused runner out of the healthy set (cluster/Watch.ts).
        const storage = yield* RunnerStorage.RunnerStorage
        yield* storage.setRunnerHealth(paused, false)
        // Within the next assignment refresh (10 ms here) and one send retry (100 ms): answered by the new owner.
        yield* TestClock.adjust(200)
        const exit = call.unsafePoll()
        assert.isNotNull(exit, "the call still waits on the paused runner")
        assert.deepStrictEqual(exit, Exit.succeed(42))
        assert.deepStrictEqual(requestedOn.map((a) => a.host), [paused.host, other.host])
        yield* Fiber.interrupt(call)
      }).pipe(Effect.provide(cluster(cutInFlightWhenUnavailable(makeRunners(requestedOn)))))
    }).pipe(Effect.provide(TestContext.TestContext)))

  it.scoped("without the cut, it waits on the paused runner (what the cut is for)", () =>
    Effect.gen(function*() {
      const requestedOn: Array<RunnerAddress.RunnerAddress> = []
      yield* Effect.gen(function*() {
        yield* TestClock.adjust(10)
        const client = (yield* Probe.client)("1")
        const call = yield* Effect.fork(client.Get())
        while (requestedOn.length === 0) yield* TestClock.adjust(10)
        const paused = requestedOn[0]!
        const storage = yield* RunnerStorage.RunnerStorage
        yield* storage.setRunnerHealth(paused, false)
        yield* TestClock.adjust("10 seconds")
        assert.isNull(call.unsafePoll())
        assert.strictEqual(requestedOn.length, 1)
        yield* Fiber.interrupt(call)
      }).pipe(Effect.provide(cluster(makeRunners(requestedOn))))
    }).pipe(Effect.provide(TestContext.TestContext)))
})
