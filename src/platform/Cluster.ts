import {
  RunnerAddress,
  RunnerHealth,
  Runners,
  RunnerStorage,
  Sharding,
  ShardingConfig,
  type ShardId,
  SocketRunner,
  SqlMessageStorage,
  SqlRunnerStorage
} from "@effect/cluster"
import * as NodeClusterSocket from "@effect/platform-node/NodeClusterSocket"
import * as RpcSerialization from "@effect/rpc/RpcSerialization"
import { Cause, Duration, Effect, Exit, Fiber, FiberSet, Layer, Option, Schedule } from "effect"
import * as Net from "node:net"
import { AppConfig } from "./Config.js"
import { RunnersRepo } from "./cluster/Repo.js"
import { processApplicationName, withStartupLock } from "./Database.js"
import { EntityDeadline } from "./Outage.js"

/**
 * The cluster this process belongs to.
 *
 * Embedded (no `DATABASE_URL`): one runner in this process, every shard here, runner storage in memory (PGlite is
 * one backend, and `SqlRunnerStorage` would hold one of its connections for its advisory locks).
 *
 * Cluster mode (`DATABASE_URL` set): every process is a runner of one cluster over that database. Shard ownership
 * is in PostgreSQL (`SqlRunnerStorage`: a row per runner with a heartbeat, an advisory lock per shard on a connection
 * of its own, so a runner that dies releases its shards the moment PostgreSQL sees its connection close); runners
 * reach each other over the socket transport on `RUNNER_HOST:RUNNER_PORT`; a singleton pings the others and marks
 * the silent ones unhealthy. The timings below move a killed runner's shards within seconds, a hung one's within ~12 s (docs/sessions.md).
 *
 * `ShardingConfig` is always given explicitly: `layerFromEnv` would read our `HOST`/`PORT`.
 */

/** Timings of cluster mode: a dead runner is out of the assignment within `shardLockExpiration` + one refresh. */
const clusterTimings = {
  shardLockRefreshInterval: "3 seconds",
  shardLockExpiration: "9 seconds",
  refreshAssignmentsInterval: "1 second",
  runnerHealthCheckInterval: "2 seconds",
  sendRetryInterval: "100 millis",
  entityMessagePollInterval: "2 seconds"
} as const

const shared = {
  entityMailboxCapacity: 10_000,
  entityMaxIdleTime: "5 minutes"
} as const

/** A port nobody listens on right now (for `PORT=0`, where no runner port can be derived). */
const freePort = Effect.async<number>((resume) => {
  const server = Net.createServer()
  server.listen(0, "127.0.0.1", () => {
    const { port } = server.address() as Net.AddressInfo
    server.close(() => resume(Effect.succeed(port)))
  })
})

/**
 * `RUNNER_PORT`, or one derived from `PORT`: `PORT + 10000` (`PORT - 10000` past 65535), plus the worker's index
 * when `WORKERS` starts several processes. `PORT=0` (tests) takes a free port.
 */
export const runnerPortOf = (port: number, worker: number) =>
  port === 0 ? freePort : Effect.succeed((port + 10_000 <= 65_535 ? port + 10_000 : port - 10_000) + worker)

/**
 * The shards this runner holds, as the runner storage's own answers tell (`group:id`): every `acquire` and `refresh`
 * names the shards whose advisory locks it holds; a refresh that leaves one out, a refresh that fails (the database
 * restarting or gone, the lock connection ended by another runner) and a release forget them. A shard is
 * `confirmed` while it is held by that evidence and verified since any stall of this process (below). A runner whose
 * database went away forgets at once, one that was paused (SIGSTOP, a stuck host, a long GC) and woke holds nothing
 * verified: its sessions stop starting turns, billing and writing until a refresh confirms the shard again, or the
 * shard has moved (issues 26 and 33).
 * Not a clock on the last refresh: a runner handing its shards over (SIGTERM, a runner joining) refreshes them less
 * while its turns finish, and still holds them. Embedded mode has one runner that owns every shard: always held.
 */
const held = new Set<string>()
let everyShardConfirmed = true
const shardKey = (shardId: { readonly group: string; readonly id: number }) => `${shardId.group}:${shardId.id}`

/**
 * The process's own clock of liveness: a timer that ticks every 250 ms. A gap of over `STALL_MS` between ticks means
 * the process did not run (SIGSTOP, a stuck host, a long GC or a starved CPU): what it holds is unverified from then
 * until a lock refresh that started after the gap confirms it. Under the 6 s after which the other runners end a
 * silent runner's sessions, so a runner they cut always finds itself unverified when it wakes.
 */
let lastTick = Date.now()
let unverifiedSince: number | undefined
const STALL_MS = 4_000
const noticeStall = () => {
  const now = Date.now()
  if (now - lastTick > STALL_MS) unverifiedSince = now
  lastTick = now
}

/** `held` by the runner storage's last word and verified since any stall; `unverified` after a stall; else `lost`. */
export const shardState = (shardId: { readonly group: string; readonly id: number }): "held" | "unverified" | "lost" => {
  if (everyShardConfirmed) return "held"
  noticeStall()
  if (!held.has(shardKey(shardId))) return "lost"
  return unverifiedSince === undefined ? "held" : "unverified"
}

/** Whether this runner holds the shard by the runner storage's last word on it, verified since any stall. */
export const shardConfirmed = (shardId: { readonly group: string; readonly id: number }): boolean => shardState(shardId) === "held"

/**
 * Waits while the shard is unverified (a stall): true once a refresh confirms it (a healthy runner that was only slow
 * goes on after at most one refresh interval), false when it is lost or still unverified after `UNVERIFIED_WAIT`.
 */
export const awaitShard = (shardId: { readonly group: string; readonly id: number }): Effect.Effect<boolean> =>
  Effect.gen(function*() {
    const until = Date.now() + UNVERIFIED_WAIT_MS
    for (;;) {
      const state = shardState(shardId)
      if (state !== "unverified") return state === "held"
      if (Date.now() > until) return false
      yield* Effect.sleep("100 millis")
    }
  })
const UNVERIFIED_WAIT_MS = 8_000

const confirm = (shardIds: Iterable<ShardId.ShardId>) => {
  for (const shardId of shardIds) held.add(shardKey(shardId))
}

/** The runner storage, recording what each of its answers confirms about this runner's shard locks. */
const TrackedRunnerStorage = Layer.effect(
  RunnerStorage.RunnerStorage,
  Effect.map(RunnerStorage.RunnerStorage, (storage) => {
    everyShardConfirmed = false
    setInterval(noticeStall, 250).unref()
    return RunnerStorage.RunnerStorage.of({
      ...storage,
      acquire: (address, shardIds) => Effect.tap(storage.acquire(address, shardIds), confirm),
      refresh: (address, shardIds) =>
        Effect.suspend(() => {
          noticeStall()
          const started = Date.now()
          return Effect.tap(storage.refresh(address, shardIds), () => {
            // Only a refresh that began after the stall speaks for now.
            if (unverifiedSince !== undefined && started > unverifiedSince) unverifiedSince = undefined
          })
        }).pipe(
          Effect.tap((acquired) => {
            const kept = new Set(acquired.map(shardKey))
            for (const shardId of shardIds) if (!kept.has(shardKey(shardId))) held.delete(shardKey(shardId))
            confirm(acquired)
          }),
          // A refresh that failed or timed out (the cluster interrupts it) is the end of every lock it was to renew.
          Effect.onError(() => Effect.sync(() => held.clear()))
        ),
      // Effects, not calls: the cluster builds a release before it lets the shard's entities finish (hand-over).
      release: (address, shardId) =>
        Effect.zipRight(Effect.sync(() => held.delete(shardKey(shardId))), storage.release(address, shardId)),
      releaseAll: (address) => Effect.zipRight(Effect.sync(() => held.clear()), storage.releaseAll(address))
    })
  })
)

/** A runner whose heartbeat (written with every shard-lock refresh, each 3 s) has not moved for this long is dead. */
const SILENT_MS = 6_000

/**
 * Runners watch each other (issues 26 and 33): PostgreSQL never sees a paused process's connections close (the kernel
 * keeps answering its keepalives), so a SIGSTOPped runner kept its advisory shard locks for the whole pause. Every
 * runner files its connections' `application_name` under its address, reads the others' heartbeats every second,
 * and ends the database sessions (`pg_terminate_backend`: same role) of one whose heartbeat has not moved for
 * `SILENT_MS` of its own continuous watch. The locks go with the sessions, so the shards move; the paused runner, when
 * it wakes, finds its connections gone and its confirmations forgotten (`shardConfirmed`), and starts, bills and
 * writes nothing as an owner.
 *
 * Judged by what the watcher saw, not by the heartbeat's age: after a database outage every heartbeat is old, and the
 * first runner back must not end the others. A watch that fails (the database is away), a watcher that did not run
 * (paused itself) or whose own heartbeat is late starts over.
 */
const watchRunners = (address: RunnerAddress.RunnerAddress) =>
  Layer.scopedDiscard(Effect.gen(function*() {
    const repo = yield* RunnersRepo
    const self = `${address.host}:${address.port}`
    yield* Effect.acquireRelease(
      repo.register(self, processApplicationName()).pipe(Effect.retry(Schedule.spaced("1 second")), Effect.orDie),
      () => Effect.ignore(repo.unregister(self))
    )
    /** Each other runner's heartbeat as last seen, and since when (this process's clock) it has been that. */
    const seen = new Map<string, { beat: string; since: number }>()
    let lastWatch = Date.now()
    const watch = Effect.gen(function*() {
      const now = Date.now()
      if (now - lastWatch > STALL_MS) seen.clear()
      lastWatch = now
      const rows = yield* repo.heartbeats(self, SILENT_MS / 2000)
      for (const row of rows) {
        const before = seen.get(row.address)
        if (before === undefined || before.beat !== row.beat || !row.selfFresh) {
          seen.set(row.address, { beat: row.beat, since: now })
          continue
        }
        if (now - before.since < SILENT_MS) continue
        // A silent runner filed under this process's own name is an earlier runner of this process (a test that
        // restarts its platform in place): its sessions ended with it, and ending "its" sessions would end ours.
        const ended = row.applicationName === processApplicationName() ? 0 : yield* repo.cut(row.applicationName)
        seen.delete(row.address)
        if (ended > 0) yield* Effect.logWarning(`runner ${row.address} silent for ${SILENT_MS / 1000} s: ended its ${ended} database sessions`)
      }
    }).pipe(Effect.catchAllCause(() => Effect.sync(() => seen.clear())))
    yield* watch.pipe(Effect.delay("1 second"), Effect.forever, Effect.forkScoped)
  })).pipe(Layer.provide(RunnersRepo.Default))

/** A dead runner refuses the connection at once; a hung one gets about 3 s before it is called unhealthy. */
const PingHealth = Layer.scoped(
  RunnerHealth.RunnerHealth,
  Effect.gen(function*() {
    const runners = yield* Runners.Runners
    return RunnerHealth.RunnerHealth.of({
      isAlive: (address) =>
        runners.ping(address).pipe(
          Effect.timeout("1500 millis"),
          Effect.retry({ times: 2, schedule: Schedule.spaced("300 millis") }),
          Effect.isSuccess
        )
    })
  })
).pipe(Layer.provide(Runners.layerRpc), Layer.provide(NodeClusterSocket.layerClientProtocol))

const embedded = Sharding.layer.pipe(
  Layer.provideMerge(Runners.layerNoop),
  Layer.provideMerge(SqlMessageStorage.layerWith({ prefix: "cluster" })),
  Layer.provide([RunnerStorage.layerMemory, RunnerHealth.layerNoop]),
  Layer.provide(ShardingConfig.layer({
    ...shared,
    // A message to an entity of this process is handed over as it is, not encoded and decoded with its schemas first.
    simulateRemoteSerialization: false
  }))
)

const clustered = Layer.unwrapEffect(Effect.gen(function*() {
  const app = yield* AppConfig
  const runner = app.runner
  const port = Option.isSome(runner.port) ? runner.port.value + runner.worker : yield* runnerPortOf(app.port, runner.worker)
  const address = RunnerAddress.make(runner.host, port)
  // Listen where the others dial, on every interface when the advertised host is not a loopback one.
  const listen = RunnerAddress.make(runner.host === "127.0.0.1" || runner.host === "localhost" ? runner.host : "0.0.0.0", port)
  yield* Effect.logDebug(`cluster runner at ${address.host}:${address.port}`)
  return Layer.merge(watchRunners(address), SocketRunner.layer).pipe(
    Layer.provide([NodeClusterSocket.layerSocketServer, NodeClusterSocket.layerClientProtocol]),
    Layer.provide(PingHealth),
    Layer.provideMerge(Layer.orDie(withStartupLock(SqlMessageStorage.layerWith({ prefix: "cluster" })))),
    Layer.provide(TrackedRunnerStorage.pipe(Layer.provide(Layer.orDie(withStartupLock(SqlRunnerStorage.layerWith({ prefix: "cluster" })))))),
    Layer.provide(ShardingConfig.layer({
      ...shared,
      ...clusterTimings,
      // A stopping runner's sessions may finish their running turns within SHUTDOWN_GRACE (Session.ts).
      entityTerminationTimeout: Duration.sum(app.shutdownGrace, "5 seconds"),
      runnerAddress: Option.some(address),
      runnerListenAddress: Option.some(listen),
      // Every payload is encoded and decoded, also to an entity of this process: what works here works remotely.
      simulateRemoteSerialization: true
    })),
    Layer.provide(RpcSerialization.layerMsgPack)
  )
})).pipe(Layer.orDie)

/** The cluster: one in-process runner (embedded) or a runner of the deployment's cluster (`DATABASE_URL`). */
export const ClusterLive = Layer.unwrapEffect(Effect.map(AppConfig, (config) => Option.isSome(config.databaseUrl) ? clustered : embedded))

/**
 * Sends messages to entities from a fiber of the caller's service, not the caller's own fiber. A message that wakes
 * an entity builds it in the sending fiber, and the cluster keeps that fiber's FiberRefs (whose history holds an HTTP
 * request's context, and so the request itself) for as long as the entity stays active. Awaited, not joined: joining
 * would merge the service's context into the request's. Interrupting the caller interrupts the call.
 */
export const makeEntityCaller = Effect.suspend(() => makeEntityCallerWith(ENTITY_DEADLINE))

/** `makeEntityCaller` with a deadline of the caller's (tests). */
export const makeEntityCallerWith = (deadline: Duration.Duration) => Effect.gen(function*() {
  const runFork = yield* FiberSet.makeRuntime<never>()
  const once = <A, E>(call: Effect.Effect<A, E>): Effect.Effect<Exit.Exit<A, E>> =>
    Effect.acquireUseRelease(
      Effect.sync(() => runFork(call)),
      (fiber) => Fiber.await(fiber),
      (fiber) => Fiber.interrupt(fiber)
    )
  const resent = <A, E>(call: Effect.Effect<A, E>, attempt: number): Effect.Effect<Exit.Exit<A, E>> =>
    Effect.flatMap(once(call), (exit) =>
      isCut(exit) && attempt < RESENDS_WHEN_CUT
        ? Effect.zipRight(Effect.sleep(RESEND_PAUSE), resent(call, attempt + 1))
        : Effect.succeed(exit))
  /**
   * `resendWhenCut`: only for idempotent messages (a charge or grant with its key, a read). Every call has a deadline
   * (`ENTITY_DEADLINE`): past it the caller gets `EntityDeadline` (a defect: the HTTP edge answers 503 with
   * `Retry-After`), never a wait without end on an owner that is not there (issue 33).
   */
  return <A, E>(call: Effect.Effect<A, E>, options?: { readonly resendWhenCut?: boolean }): Effect.Effect<A, E> =>
    Effect.flatten(options?.resendWhenCut === true ? resent(call, 0) : once(call)).pipe(
      Effect.timeoutFailCause({
        duration: deadline,
        onTimeout: () => Cause.die(new EntityDeadline({ message: `No answer from the entity within ${Duration.format(deadline)}.` }))
      })
    )
})

/**
 * A call that ended interrupted though its caller was not (the caller's own interruption stops the wait instead):
 * the entity's shard was taken from it mid-call, by a hand-over or a runner that lost its shard locks.
 */
const isCut = <A, E>(exit: Exit.Exit<A, E>) => Exit.isFailure(exit) && Cause.isInterruptedOnly(exit.cause)

/** An idempotent message cut by a hand-over is sent again until its shard has an owner again, within the deadline. */
const RESEND_PAUSE = Duration.millis(250)
const RESENDS_WHEN_CUT = 40

/**
 * The most an entity call may take, resends included: longer than a failover (≤ 5 s after a kill -9, the lock
 * expiry's 9 s for a runner whose connection lingers), shorter than the 15 s within which every request is answered.
 */
export const ENTITY_DEADLINE = Duration.seconds(12)
