import { Deferred, Duration, Effect, Option } from "effect"
import Cluster from "node:cluster"
import * as Os from "node:os"
import { AppConfig } from "./Config.js"

/**
 * `WORKERS=N|auto`: `npm start` as N processes that share the HTTP port (node:cluster hands each connection to one of
 * them), each a runner of the cluster with its own runner port (`RUNNER_PORT` + its index, see Cluster.ts). The
 * primary only supervises: it starts the workers, starts again one that dies, and on SIGTERM passes the signal on and
 * waits for all of them. Workers need cluster mode (`DATABASE_URL`): embedded PGlite is one process.
 */
const countOf = (raw: string) => {
  const value = raw.trim().toLowerCase()
  if (value === "auto") return Os.availableParallelism()
  const n = Number.parseInt(value, 10)
  return Number.isFinite(n) && n > 0 ? n : 1
}

/** Runs `server` in this process, or, as the primary of `WORKERS=N` (N > 1), N worker processes that run it. */
export const withWorkers = <E, R>(server: Effect.Effect<never, E, R>) =>
  Effect.gen(function*() {
    if (Cluster.isWorker) return yield* server
    // The primary reads the settings the workers will read: a setting that stops them stops it, once, here.
    const settings = yield* Effect.provide(AppConfig, AppConfig.Default)
    const count = countOf(settings.workers)
    if (count <= 1) return yield* server
    if (Option.isNone(settings.databaseUrl)) {
      yield* Effect.logWarning("WORKERS needs DATABASE_URL (embedded PGlite is one process); running one process")
      return yield* server
    }
    let stopping = false
    const workers = new Map<number, ReturnType<typeof Cluster.fork>>()
    const allGone = yield* Deferred.make<void>()
    const start = (index: number) => {
      const worker = Cluster.fork({ WORKER_INDEX: String(index) })
      workers.set(index, worker)
      worker.on("exit", (code, signal) => {
        workers.delete(index)
        if (stopping) {
          if (workers.size === 0) Deferred.unsafeDone(allGone, Effect.void)
          return
        }
        console.error(`worker ${index} exited (${signal ?? code}); starting it again`)
        setTimeout(() => start(index), 1_000)
      })
    }
    for (let index = 0; index < count; index++) start(index)
    yield* Effect.logInfo(`started ${count} workers`)
    return yield* Effect.never.pipe(
      Effect.onInterrupt(() =>
        Effect.gen(function*() {
          stopping = true
          if (workers.size === 0) return
          for (const worker of workers.values()) worker.process.kill("SIGTERM")
          // Each worker drains within SHUTDOWN_GRACE; past that and a margin, it is killed.
          yield* Deferred.await(allGone).pipe(
            Effect.timeout(Duration.sum(settings.shutdownGrace, "20 seconds")),
            Effect.catchAll(() => Effect.sync(() => workers.forEach((worker) => worker.process.kill("SIGKILL"))))
          )
        })
      )
    )
  })
