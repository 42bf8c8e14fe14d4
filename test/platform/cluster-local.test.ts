import { Entity, MessageStorage, RunnerHealth, Runners, RunnerStorage, Sharding, ShardingConfig } from "@effect/cluster"
import { Rpc } from "@effect/rpc"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Exit, Fiber, Layer, Ref, Schema, TestClock, TestContext } from "effect"
import { embeddedSharding, makeEntityBatcher, makeEntityCaller, shared } from "../../src/platform/Cluster.js"
import { pollUntil } from "../support/Poll.js"

/**
 * The local-first path every entity client takes (issue 45 item 1, `platform/Cluster.ts`): a message to an entity
 * whose shard this runner holds goes into its mailbox through the cluster's own local delivery, not encoded and
 * decoded with its schemas first, and with the cluster's semantics (the caller's interruption reaches the entity).
 * On an in-memory cluster, as @effect/cluster's own Sharding tests do.
 */

/** How often the probe's payload was encoded and decoded: a schema that counts its own work. */
let encoded = 0
let decoded = 0
const Counted = Schema.transform(Schema.String, Schema.String, {
  strict: true,
  decode: (s) => (decoded++, s),
  encode: (s) => (encoded++, s)
})

const Echo = Rpc.make("Echo", { payload: { text: Counted }, success: Schema.String })
const Hang = Rpc.make("Hang")
const Probe = Entity.make("Probe", [Echo, Hang])

const inMemoryCluster = (config: Partial<ShardingConfig.ShardingConfig["Type"]>) =>
  Sharding.layer.pipe(
    Layer.provideMerge(Runners.layerNoop),
    Layer.provideMerge(MessageStorage.layerMemory),
    Layer.provide([RunnerStorage.layerMemory, RunnerHealth.layerNoop]),
    Layer.provide(ShardingConfig.layer(config))
  )

/** The probe on a cluster configured with `config`; `hangs` learns when a `Hang` starts and whether it was interrupted. */
const probeOn = (config: Partial<ShardingConfig.ShardingConfig["Type"]>) =>
  Effect.gen(function*() {
    const started = yield* Deferred.make<void>()
    const interrupted = yield* Ref.make(false)
    const live = Probe.toLayer(Effect.succeed({
      Echo: ({ payload }) => Effect.succeed(`echo ${payload.text}`),
      Hang: () =>
        Deferred.succeed(started, undefined).pipe(
          Effect.zipRight(Effect.never),
          Effect.onInterrupt(() => Ref.set(interrupted, true))
        )
    }))
    const context = yield* Layer.build(live.pipe(Layer.provideMerge(inMemoryCluster(config))))
    const makeClient = yield* Effect.provide(Probe.client, context)
    return { client: makeClient, started, interrupted }
  })

describe("the local-first entity path", () => {
  it.scopedLive("a message to an entity of this runner reaches its mailbox without being encoded", () =>
    Effect.gen(function*() {
      const { client } = yield* probeOn(shared)
      const toEntity = yield* makeEntityCaller
      encoded = decoded = 0
      for (let i = 0; i < 5; i++) assert.strictEqual(yield* toEntity(client(`p${i}`).Echo({ text: `m${i}` })), `echo m${i}`)
      assert.deepStrictEqual([encoded, decoded], [0, 0])
    }))

  it.scopedLive("the cluster's default (every local message encoded and decoded) is what the setting turns off", () =>
    Effect.gen(function*() {
      // The guard's counterpart: without `shared`'s setting, the same messages are serialised (this fails if the
      // counting above could not see an encoding).
      const { client } = yield* probeOn({ ...shared, simulateRemoteSerialization: true })
      encoded = decoded = 0
      for (let i = 0; i < 5; i++) assert.strictEqual(yield* client(`q${i}`).Echo({ text: `m${i}` }), `echo m${i}`)
      assert.isAtLeast(encoded, 5)
      assert.isAtLeast(decoded, 5)
    }))

  it.scopedLive("a caller that gives up interrupts the request in the entity, as a remote one would", () =>
    Effect.gen(function*() {
      const { client, interrupted, started } = yield* probeOn(shared)
      const toEntity = yield* makeEntityCaller
      const call = yield* Effect.fork(toEntity(client("h").Hang()))
      yield* Deferred.await(started)
      const exit = yield* Fiber.interrupt(call)
      assert.isTrue(Exit.isInterrupted(exit))
      // The interrupt travels as an envelope to the entity's mailbox and ends the handler.
      yield* pollUntil(Ref.get(interrupted), (done) => done, "the handler interrupted", { every: 10, within: 1_000 })
    }))
})

interface Ask {
  readonly key: string
  readonly n: number
}

/** Waits (up to 2 s) until `done` holds. */
const until = (done: () => boolean) => pollUntil(Effect.sync(done), (held) => held, "the batches sent", { every: 2, within: 2_000 })

describe("caller-side batching (makeEntityBatcher)", () => {
  /** A `send` that records each batch and answers it when `release` opens (a message on its way). */
  const recorded = Effect.gen(function*() {
    const batches: Array<ReadonlyArray<number>> = []
    const release = yield* Deferred.make<void>()
    const send = (requests: ReadonlyArray<Ask>) =>
      Effect.gen(function*() {
        batches.push(requests.map((r) => r.n))
        yield* Deferred.await(release)
        return requests.map((r) => r.n < 0 ? Exit.fail(`refused ${r.n}`) : Exit.succeed(`${r.key}:${r.n}`))
      })
    const ask = yield* makeEntityBatcher(send, (r: Ask) => r.key)
    return { ask, batches, release }
  })

  // On the TestClock (its own, as docs/testing.md says for a top-level test): the batcher has no timer, so moving the
  // clock only lets every fiber that can run do so first, without waiting on the real clock.
  it.scoped("a lone request leaves at once; those that come while it is on its way leave together after it", () =>
    Effect.gen(function*() {
      const { ask, batches, release } = yield* recorded
      const first = yield* Effect.fork(ask({ key: "w", n: 0 }))
      yield* until(() => batches.length === 1)
      assert.deepStrictEqual(batches, [[0]])
      const rest = yield* Effect.fork(Effect.forEach([1, 2, 3, -4], (n) => Effect.either(ask({ key: "w", n })), { concurrency: "unbounded" }))
      // Another entity's requests do not wait for this one's.
      const other = yield* Effect.fork(ask({ key: "v", n: 9 }))
      yield* until(() => batches.length === 2)
      yield* TestClock.adjust("20 millis")
      assert.deepStrictEqual(batches, [[0], [9]])
      yield* Deferred.succeed(release, undefined)
      assert.strictEqual(yield* Fiber.join(first), "w:0")
      assert.strictEqual(yield* Fiber.join(other), "v:9")
      const answers = yield* Fiber.join(rest)
      assert.deepStrictEqual(batches, [[0], [9], [1, 2, 3, -4]])
      // Each caller gets its own answer, a refusal included.
      assert.deepStrictEqual(answers.map((a) => a._tag === "Right" ? a.right : `left ${a.left}`), ["w:1", "w:2", "w:3", "left refused -4"])
    }).pipe(Effect.provide(TestContext.TestContext)))

  it.scoped("a caller that gives up before its request left takes it back", () =>
    Effect.gen(function*() {
      const { ask, batches, release } = yield* recorded
      const first = yield* Effect.fork(ask({ key: "w", n: 0 }))
      yield* until(() => batches.length === 1)
      const gaveUp = yield* Effect.fork(ask({ key: "w", n: 1 }))
      const kept = yield* Effect.fork(ask({ key: "w", n: 2 }))
      yield* TestClock.adjust("20 millis")
      yield* Fiber.interrupt(gaveUp)
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(first)
      assert.strictEqual(yield* Fiber.join(kept), "w:2")
      assert.deepStrictEqual(batches, [[0], [2]])
    }).pipe(Effect.provide(TestContext.TestContext)))
})

describe("the embedded runner's settings", () => {
  it("the embedded runner reads its due messages every second, as a cluster does (a durable clock is late by at most that)", () => {
    const settings = embeddedSharding({ shutdownGrace: Duration.seconds(10) })
    // The library's default is 10 s: an approval's 2 s timeout was answered after 8.9 s.
    assert.isTrue(Duration.lessThanOrEqualTo(Duration.decode(settings.entityMessagePollInterval), Duration.seconds(1)))
  })
})
