import { RunnerHealth, Runners, RunnerStorage, Sharding, ShardingConfig, SqlMessageStorage } from "@effect/cluster"
import { Layer } from "effect"

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
