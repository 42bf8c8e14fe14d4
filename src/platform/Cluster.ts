import {
  ClusterError,
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
import { EntityCut, EntityDeadline } from "./Outage.js"

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
 * the silent ones unhealthy; the runners also watch each other's heartbeats and cut a silent one off (`watchRunners`).
 * Every acquisition of a shard raises its generation in the database (fencing tokens: `fenceOf`). The timings are
 * one budget, `failoverBudget` (docs/sessions.md, docs/operations.md).
 *
 * `ShardingConfig` is always given explicitly: `layerFromEnv` would read our `HOST`/`PORT`.
 */

/**
 * The failover budget (issues 26 and 33; docs/operations.md "Fault model"): every timing of shard ownership, of the
 * runners' watch over each other, and of the HTTP side's resends of a message to a moved entity derives from here.
 *
 * - A killed runner's locks go when PostgreSQL sees its connections close; a paused one's when the others, having
 *   seen its heartbeat (`beat`, every 0.5 s) stand still for `silent`, end its database sessions and take it out of
 *   the assignment. Its shards are then acquired within `assignments` + one acquisition: well within `failover`.
 * - A runner that did not run for `stall` (its own timer) holds nothing verified until a lock refresh confirms it;
 *   `stall` < `silent`, so a runner the others cut always knows it was away when it wakes.
 * - A message cut by a hand-over is sent again every `resendPause` until `entityDeadline`, which outlasts a failover
 *   and a lock expiry, and is answered within the 15 s every request is promised.
 */
export const failoverBudget = {
  /** What the cluster promises: a dead or paused runner's wallets and sessions answer on another runner within. */
  failover: Duration.seconds(5),
  /** Each runner's own heartbeat for the others' watch (apart from the lock refresh). */
  beat: Duration.millis(500),
  /** A runner whose heartbeat stood still this long (by the watcher's continuous watch) is silent: cut off. */
  silent: Duration.millis(2_500),
  /**
   * And it answered no ping (each given `pingTimeout`) for `pingSilent`: pings start once its heartbeat stood still
   * for half of `silent`, so a paused runner is cut at `silent`, and one that runs but could not beat (its database
   * connections reconnecting after an outage) is not cut.
   */
  pingTimeout: Duration.millis(5_000),
  pingSilent: Duration.millis(1_500),
  /**
   * A watcher whose own timer lagged this much (a stall of its own) within the last `silent` judges nobody: on a starved host every
   * runner beats and answers late, and cutting a live runner moves all its shards for nothing (at load 30 on two
   * cores, false cuts and the hand-overs they caused kept the cluster from recovering after a PostgreSQL restart).
   */
  watcherLag: Duration.millis(1_500),
  /** A gap this long in the process's own 250 ms timer: it did not run, what it holds is unverified. */
  stall: Duration.millis(1_500),
  /**
   * Shard locks are refreshed every 4 s and must answer within that (with 2 s, two busy workers on two cores missed
   * it now and then and gave up every shard at once; at 3 s it still happened every ~10 s at load 30); a heartbeat
   * row counts for 12 s. Neither bounds failover any more: the watch and the advisory locks do.
   */
  lockRefresh: Duration.seconds(4),
  lockExpiration: Duration.seconds(12),
  /** How often each runner reads the runners' table and recomputes the assignment. */
  assignments: Duration.millis(500),
  /** How often a shard that could not be acquired (its lock still held) is tried again; also the message poll. */
  acquireRetry: Duration.seconds(1),
  healthCheck: Duration.seconds(2),
  resendPause: Duration.millis(250),
  entityDeadline: Duration.seconds(12)
} as const

const clusterTimings = {
  shardLockRefreshInterval: failoverBudget.lockRefresh,
  shardLockExpiration: failoverBudget.lockExpiration,
  refreshAssignmentsInterval: failoverBudget.assignments,
  runnerHealthCheckInterval: failoverBudget.healthCheck,
  sendRetryInterval: "100 millis",
  entityMessagePollInterval: failoverBudget.acquireRetry
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
 * until a lock refresh that started after the gap confirms it. Under the `silent` time after which the other runners
 * end a silent runner's sessions, so a runner they cut always finds itself unverified when it wakes.
 */
let lastTick = Date.now()
let unverifiedSince: number | undefined
/** When this process's timer last ran late by over `watcherLag` (the host is starved: see `watchRunners`). */
let laggedAt = -Infinity
const STALL_MS = Duration.toMillis(failoverBudget.stall)
const noticeStall = () => {
  const now = Date.now()
  if (now - lastTick > STALL_MS) unverifiedSince = now
  if (now - lastTick > Duration.toMillis(failoverBudget.watcherLag)) laggedAt = now
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
 * Fencing tokens (issue 33 item 1, migration 0017): the generation under which this runner holds each shard, raised
 * in the database by every acquisition (`TrackedRunnerStorage`). An entity takes its shard's fence when it starts and
 * every write it makes carries it; the statement refuses it once the generation moved on (another runner acquired
 * the shard, or this one lost and re-acquired it: an entity started before that holds state that may be stale).
 */
export interface Fence {
  readonly shard: string
  readonly generation: string
}
const generations = new Map<string, string>()

/**
 * The fence of `shardId` for an entity starting now: `null` in embedded mode (one runner owns every shard, nothing
 * to fence); generation "0", which no shard has, when this runner does not hold it.
 */
export const fenceOf = (shardId: { readonly group: string; readonly id: number }): Fence | null => {
  if (everyShardConfirmed) return null
  const shard = shardKey(shardId)
  return { shard, generation: held.has(shard) ? generations.get(shard) ?? "0" : "0" }
}

/**
 * The fence of `shardId` for an entity starting now (its constructor, before it reads its state). The cluster starts
 * an entity only on a shard it acquired, and the acquisition is recorded with its generation first, so the fence is
 * there at once; the wait covers the moment a refresh is being retried (`unverified`) or recorded. A runner that does
 * not hold the shard after `failoverBudget.failover` gets generation "0": none of its writes is taken.
 */
export const takeFence = (shardId: { readonly group: string; readonly id: number }): Effect.Effect<Fence | null> =>
  Effect.gen(function*() {
    if (everyShardConfirmed) return null
    const shard = shardKey(shardId)
    const until = Date.now() + Duration.toMillis(failoverBudget.failover)
    while (!(held.has(shard) && generations.has(shard)) && Date.now() < until) yield* Effect.sleep("100 millis")
    return fenceOf(shardId)
  })

/** Whether `fence` is still this runner's (it could have been re-acquired under a newer generation since). */
export const fenceCurrent = (fence: Fence | null): boolean =>
  fence === null || (held.has(fence.shard) && generations.get(fence.shard) === fence.generation)

/** A write refused by its fence: this runner no longer owns the entity under the generation it started with. */
export class Fenced extends Error {
  readonly _tag = "Fenced"
  constructor(readonly sessionOrWallet: string) {
    super(`stale owner: ${sessionOrWallet} belongs to a newer generation of its shard`)
    this.name = "Fenced"
  }
}

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

/** The runner storage, recording what each of its answers confirms about this runner's shard locks. */
const TrackedRunnerStorage = Layer.effect(
  RunnerStorage.RunnerStorage,
  Effect.gen(function*() {
    const storage = yield* RunnerStorage.RunnerStorage
    const repo = yield* RunnersRepo
    everyShardConfirmed = false
    setInterval(noticeStall, 250).unref()
    /** One answer at a time is recorded, so a shard new to two answers at once is raised once. */
    const recording = yield* Effect.makeSemaphore(1)
    /**
     * Records what an answer of the storage confirms: the shards of `asked` it left out are no longer held, those it
     * names are, and each that was not held before gets a new generation first (fencing: raised before anything of
     * this runner can start an entity on it). A raise that fails fails the answer: those shards stay unheld.
     */
    const record = (address: RunnerAddress.RunnerAddress, asked: Iterable<ShardId.ShardId> | undefined, acquired: ReadonlyArray<ShardId.ShardId>) =>
      recording.withPermits(1)(Effect.gen(function*() {
        if (asked !== undefined) {
          const kept = new Set(acquired.map(shardKey))
          for (const shardId of asked) if (!kept.has(shardKey(shardId))) held.delete(shardKey(shardId))
        }
        const fresh = acquired.map(shardKey).filter((shard) => !held.has(shard))
        if (fresh.length > 0) {
          const rows = yield* repo.raiseGenerations(
            `${address.host}:${address.port}`,
            fresh.map((shard) => ({ shard, known: generations.get(shard) ?? null }))
          )
          for (const row of rows) generations.set(row.shard, row.generation)
        }
        for (const shardId of acquired) held.add(shardKey(shardId))
      }))
    const raiseFailed = (cause: Cause.Cause<unknown>) =>
      Effect.zipRight(
        Effect.logWarning("could not raise the generation of acquired shards", cause),
        Effect.fail(new ClusterError.PersistenceError({ cause: Cause.squash(cause) }))
      )
    return RunnerStorage.RunnerStorage.of({
      ...storage,
      acquire: (address, shardIds) =>
        Effect.tap(storage.acquire(address, shardIds), (acquired) => record(address, undefined, acquired).pipe(Effect.catchAllCause(raiseFailed))),
      refresh: (address, shardIds) =>
        Effect.suspend(() => {
          noticeStall()
          const started = Date.now()
          return Effect.tap(storage.refresh(address, shardIds), () => {
            // Only a refresh that began after the stall speaks for now.
            if (unverifiedSince !== undefined && started > unverifiedSince) unverifiedSince = undefined
          })
        }).pipe(
          Effect.tap((acquired) => record(address, shardIds, acquired).pipe(Effect.catchAllCause(raiseFailed))),
          // A refresh that failed or timed out (the cluster interrupts it) leaves every lock it was to renew
          // unverified, not lost: the cluster tries again at once (a connection reset, a slow statement), and the
          // attempt that goes through says what is held; if none does, the cluster gives every shard up
          // (`releaseAll` below forgets them). Forgetting them here made an entity that started in between take no
          // fence at all (generation "0": refused forever), and stopped running turns as "owner lost" on a refresh
          // that was only retried (the interrupt after a PostgreSQL restart never found its turn running).
          Effect.onError(() => Effect.sync(() => void (unverifiedSince = Date.now())))
        ),
      // Effects, not calls: the cluster builds a release before it lets the shard's entities finish (hand-over).
      release: (address, shardId) =>
        Effect.zipRight(Effect.sync(() => held.delete(shardKey(shardId))), storage.release(address, shardId)),
      releaseAll: (address) => Effect.zipRight(Effect.sync(() => held.clear()), storage.releaseAll(address))
    })
  })
).pipe(Layer.provide(RunnersRepo.Default))

const SILENT_MS = Duration.toMillis(failoverBudget.silent)
const PING_TIMEOUT = failoverBudget.pingTimeout
const PING_SILENT_MS = Duration.toMillis(failoverBudget.pingSilent)
const REJOIN_GRACE_MS = 15_000

/**
 * Runners watch each other (issues 26 and 33): PostgreSQL never sees a paused process's connections close (the kernel
 * keeps answering its keepalives), so a SIGSTOPped runner kept its advisory shard locks for the whole pause. Every
 * runner files its connections' `application_name` under its address, writes its own heartbeat every `beat`
 * (migration 0017), reads the others' every `beat`, and cuts off one whose heartbeat has not moved for `silent` of its
 * own continuous watch, and that answered no ping meanwhile (a runner that runs but could not beat, after a
 * database outage, answers): it ends its database sessions (`pg_terminate_backend`: same role), so its advisory locks go,
 * and takes it out of the assignment (the cluster's `healthy` flag, set back by the health check once it answers
 * pings again), so its shards move at once instead of when its heartbeat row expires. The paused runner, when it
 * wakes, finds its connections gone and its confirmations forgotten (`shardConfirmed`); its writes carry the
 * generations it held, which the database refuses (`fenceOf`).
 *
 * Judged by what the watcher saw, not by the heartbeat's age: after a database outage every heartbeat is old, and the
 * first runner back must not end the others. A watch that fails (the database is away), a watcher that did not run
 * (paused itself) or whose own heartbeat is late starts over.
 */
const watchRunners = (address: RunnerAddress.RunnerAddress) =>
  Layer.scopedDiscard(Effect.gen(function*() {
    const repo = yield* RunnersRepo
    const runners = yield* Runners.Runners
    const self = `${address.host}:${address.port}`
    yield* Effect.acquireRelease(
      repo.register(self, processApplicationName()).pipe(Effect.retry(Schedule.spaced("1 second")), Effect.orDie),
      () => Effect.ignore(repo.unregister(self))
    )
    yield* repo.beat(self).pipe(Effect.ignore, Effect.delay(failoverBudget.beat), Effect.forever, Effect.forkScoped)
    // Out of the watch before the heartbeat stops: a runner stopping (SIGTERM, its turns finishing) is not silent.
    yield* Effect.addFinalizer(() => Effect.ignore(repo.unregister(self)))
    /** Each other runner's heartbeat as last seen, and since when (this process's clock) it has been that. */
    const seen = new Map<string, { beat: string; since: number; moved: boolean }>()
    /**
     * Runners this watcher cut, and when. One that beats again (it woke) is not judged for `REJOIN_GRACE_MS` after
     * that: waking, it reconnects everything on a loaded host and may beat late once, and a second cut would only
     * throw its recovery back (its shards are elsewhere already; its writes are fenced).
     */
    const cutAt = new Map<string, number>()
    const rejoined = new Map<string, number>()
    /**
     * When each runner whose heartbeat stands still last answered a ping on its runner port. A runner that answers
     * pings runs: its heartbeat is late for another reason (its database connections reconnecting after an outage,
     * a slow database), and it is not cut. A paused one's kernel accepts the connection, but nobody answers.
     */
    const answered = new Map<string, number>()
    /** The ping in flight to each runner, since when: one answered late still counts (a starved runner is slow). */
    const pinging = new Map<string, number>()
    const ping = (runner: string) =>
      Effect.suspend(() => {
        if (pinging.has(runner)) return Effect.void
        pinging.set(runner, Date.now())
        const [host, port] = [runner.slice(0, runner.lastIndexOf(":")), Number(runner.slice(runner.lastIndexOf(":") + 1))]
        return runners.ping(RunnerAddress.make(host, port)).pipe(
          Effect.timeout(PING_TIMEOUT),
          Effect.tap(() => Effect.sync(() => answered.set(runner, Date.now()))),
          Effect.ignore,
          Effect.ensuring(Effect.sync(() => pinging.delete(runner))),
          Effect.forkScoped,
          Effect.asVoid
        )
      })
    let lastWatch = Date.now()
    const watch = Effect.gen(function*() {
      const now = Date.now()
      if (now - lastWatch > STALL_MS) seen.clear()
      lastWatch = now
      const rows = yield* repo.heartbeats(self, SILENT_MS / 2000)
      for (const row of rows) {
        const before = seen.get(row.address)
        if (before === undefined || before.beat !== row.beat || !row.selfFresh) {
          // Judged only once it was seen to beat (not a runner still starting).
          seen.set(row.address, { beat: row.beat, since: now, moved: before !== undefined && before.beat !== row.beat })
          answered.set(row.address, now)
          if (before !== undefined && before.beat !== row.beat && cutAt.has(row.address)) {
            cutAt.delete(row.address)
            rejoined.set(row.address, now)
          }
          continue
        }
        if (!before.moved || now - (rejoined.get(row.address) ?? -Infinity) < REJOIN_GRACE_MS) continue
        // Still for a second: ask it whether it runs, every watch, until it beats again. Early enough that a ping has
        // been out for `pingSilent` by the time it is `silent`: a paused runner is cut at `silent`, not later.
        if (now - before.since >= SILENT_MS - PING_SILENT_MS) yield* ping(row.address)
        if (now - before.since < SILENT_MS) continue
        // It answered since it fell still, or its ping has not been out for `pingSilent` yet: not judged now.
        if ((answered.get(row.address) ?? -Infinity) > before.since) continue
        if (now - (pinging.get(row.address) ?? now) < PING_SILENT_MS) continue
        noticeStall()
        if (now - laggedAt < SILENT_MS) continue
        // A silent runner filed under this process's own name is an earlier runner of this process (a test that
        // restarts its platform in place): its sessions ended with it, and ending "its" sessions would end ours.
        const own = row.applicationName === processApplicationName()
        const ended = own ? 0 : yield* repo.cut(row.applicationName)
        seen.delete(row.address)
        answered.delete(row.address)
        cutAt.set(row.address, now)
        // Its locks go when its sessions have ended (asynchronous): then it leaves the assignment, and the others
        // acquire its shards at their next assignment refresh.
        for (let i = 0; i < 10 && !own && (yield* repo.remaining(row.applicationName)) > 0; i++) yield* Effect.sleep("100 millis")
        yield* repo.markUnhealthy(row.address)
        yield* Effect.logWarning(`runner ${row.address} silent for ${SILENT_MS / 1000} s: ended its ${ended} database sessions and took it out of the assignment`)
      }
    }).pipe(Effect.catchAllCause(() => Effect.sync(() => seen.clear())))
    yield* watch.pipe(Effect.delay(failoverBudget.beat), Effect.forever, Effect.forkScoped)
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
  return Layer.merge(watchRunners(address).pipe(Layer.provide(Runners.layerRpc)), SocketRunner.layer).pipe(
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
  /**
   * A call still cut after its resends (or not resendable) is an outage the caller is told of (`EntityCut`: 503 with
   * `Retry-After`), not an interruption of the caller's own fiber: that reached the HTTP server as a request
   * interrupted by the server, which answers 503 without `Retry-After` (issue 33 item 5).
   */
  const settle = <A, E>(exit: Exit.Exit<A, E>): Effect.Effect<A, E> =>
    isCut(exit) ? Effect.die(new EntityCut({ message: "The entity changed runners during the call; retry shortly." })) : exit
  return <A, E>(call: Effect.Effect<A, E>, options?: { readonly resendWhenCut?: boolean }): Effect.Effect<A, E> =>
    Effect.flatMap(options?.resendWhenCut === true ? resent(call, 0) : once(call), settle).pipe(
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
const RESEND_PAUSE = failoverBudget.resendPause
const RESENDS_WHEN_CUT = Math.ceil(Duration.toMillis(failoverBudget.entityDeadline) / Duration.toMillis(failoverBudget.resendPause))

/**
 * The most an entity call may take, resends included: longer than a failover (`failoverBudget.failover`, and the
 * lock expiry's 9 s for a runner whose connection lingers), shorter than the 15 s within which every request is
 * answered.
 */
export const ENTITY_DEADLINE = failoverBudget.entityDeadline
