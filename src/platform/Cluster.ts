import { RunnerHealth, Runners, RunnerStorage, Sharding, ShardingConfig, SqlMessageStorage } from "@effect/cluster"
import { Effect, Fiber, FiberSet, Layer } from "effect"

/**
 * One cluster runner in this process: every entity (wallets, later sessions) lives here, and the shards are not
 * shared with other processes. `ShardingConfig` is given explicitly: `layerFromEnv` would read our `HOST`/`PORT`.
 * Entity messages are not persisted (a caller waits for its answer); the SQL message storage is there for the
 * durable messages and the multi-runner mode to come.
 */
export const ClusterLive = Sharding.layer.pipe(
  Layer.provideMerge(Runners.layerNoop),
  Layer.provideMerge(SqlMessageStorage.layerWith({ prefix: "cluster" })),
  Layer.provide([RunnerStorage.layerMemory, RunnerHealth.layerNoop]),
  Layer.provide(ShardingConfig.layer({
    entityMailboxCapacity: 10_000,
    entityMaxIdleTime: "5 minutes",
    // A message to an entity of this process is handed over as it is, not encoded and decoded with its schemas first.
    simulateRemoteSerialization: false
  }))
)

/**
 * Sends messages to entities from a fiber of the caller's service, not the caller's own fiber. A message that wakes
 * an entity builds it in the sending fiber, and the cluster keeps that fiber's FiberRefs (whose history holds an HTTP
 * request's context, and so the request itself) for as long as the entity stays active. Awaited, not joined: joining
 * would merge the service's context into the request's. Interrupting the caller interrupts the call.
 */
export const makeEntityCaller = Effect.gen(function*() {
  const runFork = yield* FiberSet.makeRuntime<never>()
  return <A, E>(call: Effect.Effect<A, E>): Effect.Effect<A, E> =>
    Effect.acquireUseRelease(
      Effect.sync(() => runFork(call)),
      (fiber) => Effect.flatten(Fiber.await(fiber)),
      (fiber) => Fiber.interrupt(fiber)
    )
})
