import { Entity, MessageStorage, RunnerHealth, Runners, RunnerStorage, Sharding, ShardingConfig } from "@effect/cluster"
import { Rpc } from "@effect/rpc"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Layer, Ref, Schema } from "effect"
import { makeEntityCaller, shared } from "../../src/platform/Cluster.js"

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
      for (let i = 0; i < 100 && !(yield* Ref.get(interrupted)); i++) yield* Effect.sleep("10 millis")
      assert.isTrue(yield* Ref.get(interrupted))
    }))
})
