import {
  ClusterError,
  EntityId,
  RunnerAddress,
  RunnerHealth,
  Runners,
  RunnerStorage,
  Sharding,
  ShardingConfig,
  type ShardId,
  SocketRunner,
  SqlMessageStorage
} from "@effect/cluster"
import * as NodeClusterSocket from "@effect/platform-node/NodeClusterSocket"
import * as RpcSerialization from "@effect/rpc/RpcSerialization"
import { Cause, type Context, Duration, Effect, Exit, Fiber, FiberId, FiberSet, Layer, Option, Schedule } from "effect"
import * as Net from "node:net"
import { AppConfig } from "./Config.js"
import { clusterTimings, failoverBudget } from "./cluster/Budget.js"
import { type Refresh, ShardFences } from "./cluster/Fences.js"
import * as Locks from "./cluster/Locks.js"
import { type MovedShard, ShardMoves, watchMoves } from "./cluster/Moves.js"
import { RunnersRepo } from "./cluster/Repo.js"
import { watchRunners } from "./cluster/Watch.js"
import { withStartupLock } from "./Database.js"
import { EntityCut, EntityDeadline } from "./Outage.js"

/**
 * The cluster this process belongs to.
 *
 * Embedded (no `DATABASE_URL`): one runner in this process, every shard here, runner storage in memory (PGlite is
 * one backend, and `SqlRunnerStorage` would hold one of its connections for its advisory locks).
 *
 * Cluster mode (`DATABASE_URL` set): every process is a runner of one cluster over that database. Shard ownership
 * is in PostgreSQL (`cluster/Locks.ts`: a row per runner with a heartbeat, an advisory lock per shard on a connection
 * of its own, so a runner that dies releases its shards the moment PostgreSQL sees its connection close); runners
 * reach each other over the socket transport on `RUNNER_HOST:RUNNER_PORT`; a singleton pings the others and marks
 * the silent ones unhealthy; the runners also watch each other's heartbeats and cut a silent one off (`watchRunners`).
 * Every acquisition of a shard raises its generation in the database (fencing tokens: `cluster/Fences.ts`, one
 * `ShardFences` per runner, which this layer provides to the entities). The timings are one budget, `failoverBudget`
 * (`cluster/Budget.ts`; docs/sessions.md, docs/operations.md).
 *
 * `ShardingConfig` is always given explicitly: `layerFromEnv` would read our `HOST`/`PORT`.
 */

/** What every runner of ours is configured with, embedded or clustered (tested on an in-memory cluster). */
export const shared = {
  entityMailboxCapacity: 10_000,
  entityMaxIdleTime: "5 minutes",
  /**
   * The local-first path every entity client takes (issue 45 item 1): a message to an entity whose shard this runner
   * holds goes into that entity's mailbox as it is, through the cluster's own `sendLocal` (its mailbox, its capacity,
   * its replies, its interruption), not encoded and decoded with its schemas first. Only a message to another runner
   * is serialised, once, onto the runner socket. The encoding is exercised by the multi-runner tests
   * (test/cluster/wallet-remote.test.ts, cluster.test.ts), where messages do cross runners. This replaced the
   * wallet's second entrance (`LocalWallets`), which had made a local charge cheap by skipping the cluster.
   */
  simulateRemoteSerialization: false
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

/** The runner storage, telling this runner's fences what each of its answers confirms about its shard locks. */
const TrackedRunnerStorage = Layer.scoped(
  RunnerStorage.RunnerStorage,
  Effect.gen(function*() {
    const storage = yield* RunnerStorage.RunnerStorage
    const repo = yield* RunnersRepo
    const fences = yield* ShardFences
    fences.track()
    yield* Effect.acquireRelease(
      Effect.sync(() => setInterval(fences.tick, 250).unref()),
      (timer) => Effect.sync(() => clearInterval(timer))
    )
    const record = (
      address: RunnerAddress.RunnerAddress,
      asked: Iterable<ShardId.ShardId> | undefined,
      acquired: ReadonlyArray<ShardId.ShardId>,
      refresh?: Refresh
    ) =>
      fences.record(asked, acquired, (fresh) => repo.raiseGenerations(`${address.host}:${address.port}`, fresh), refresh).pipe(
        Effect.catchAllCause((cause) =>
          Effect.zipRight(
            Effect.logWarning("could not raise the generation of acquired shards", cause),
            Effect.fail(new ClusterError.PersistenceError({ cause: Cause.squash(cause) }))
          )
        )
      )
    return RunnerStorage.RunnerStorage.of({
      ...storage,
      acquire: (address, shardIds) => Effect.tap(storage.acquire(address, shardIds), (acquired) => record(address, undefined, acquired)),
      refresh: (address, shardIds) =>
        Effect.suspend(() => {
          const refresh = fences.refreshStarting()
          // Confirmed once recorded: a re-locked shard has its new generation before anything counts it as held.
          return storage.refresh(address, shardIds).pipe(
            Effect.tap((acquired) => record(address, shardIds, acquired, refresh)),
            Effect.tap(() => fences.refreshConfirmed(refresh))
          )
        }).pipe(Effect.onError(() => Effect.sync(fences.refreshFailed))),
      // Effects, not calls: the cluster builds a release before it lets the shard's entities finish (hand-over).
      // Forgotten by the fences first, then unlocked: the runner storage sends the releases asked meanwhile as one
      // batch, one batch at a time (`cluster/Locks.ts`), so a refresh never queues behind one statement per shard.
      release: (address, shardId) =>
        Effect.zipRight(Effect.sync(() => fences.release(shardId)), storage.release(address, shardId)),
      releaseAll: (address) => Effect.zipRight(Effect.sync(fences.releaseAll), storage.releaseAll(address)),
      unregister: (address) => Effect.zipRight(Effect.sync(fences.leave), storage.unregister(address))
    })
  })
).pipe(Layer.provide(RunnersRepo.Default))

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

/**
 * How long a stopping runner waits for its entities, embedded or clustered: its sessions may finish their running
 * turns within SHUTDOWN_GRACE (Session.ts). Not the library's 15 s, which held every stop whose entity waits (a durable
 * workflow asleep in its debounce) 15 s, whatever SHUTDOWN_GRACE said.
 */
const terminationTimeout = (app: { readonly shutdownGrace: Duration.Duration }) => Duration.sum(app.shutdownGrace, "5 seconds")

/** The embedded runner's sharding settings (exported for test/platform/cluster-local.test.ts). */
export const embeddedSharding = (app: { readonly shutdownGrace: Duration.Duration }) => ({
  ...shared,
  // The storage poll that delivers a message whose time has come (a durable clock: an approval's timeout, a run
  // resting out a provider's Retry-After, extraction's debounce): the library's default is 10 s, which made every
  // such wake-up of the embedded platform up to 10 s late (a 2 s approval timeout answered after 8.9 s, session 30).
  // The same second as a cluster's.
  entityMessagePollInterval: clusterTimings.entityMessagePollInterval,
  entityTerminationTimeout: terminationTimeout(app)
})

const embedded = Sharding.layer.pipe(
  Layer.provideMerge(Runners.layerNoop),
  Layer.provideMerge(SqlMessageStorage.layerWith({ prefix: "cluster" })),
  Layer.provide([RunnerStorage.layerMemory, RunnerHealth.layerNoop]),
  Layer.provide(Layer.unwrapEffect(Effect.map(AppConfig, (app) =>
    ShardingConfig.layer(embeddedSharding(app))))),
  // Untracked: the one runner holds every shard, and nothing is fenced or moves.
  Layer.provideMerge(ShardFences.Default),
  Layer.provideMerge(ShardMoves.Default)
)

const clustered = Layer.unwrapEffect(Effect.gen(function*() {
  const app = yield* AppConfig
  const runner = app.runner
  const port = Option.isSome(runner.port) ? runner.port.value + runner.worker : yield* runnerPortOf(app.port, runner.worker)
  const address = RunnerAddress.make(runner.host, port)
  // Listen where the others dial, on every interface when the advertised host is not a loopback one.
  const listen = RunnerAddress.make(runner.host === "127.0.0.1" || runner.host === "localhost" ? runner.host : "0.0.0.0", port)
  yield* Effect.logDebug(`cluster runner at ${address.host}:${address.port}`)
  return Layer.mergeAll(watchRunners(address).pipe(Layer.provide([Runners.layerRpc, RunnersRepo.Default])), watchMoves, SocketRunner.layer).pipe(
    Layer.provide([NodeClusterSocket.layerSocketServer, NodeClusterSocket.layerClientProtocol]),
    Layer.provide(PingHealth),
    Layer.provideMerge(Layer.orDie(withStartupLock(SqlMessageStorage.layerWith({ prefix: "cluster" })))),
    Layer.provide(TrackedRunnerStorage.pipe(Layer.provide(Layer.orDie(withStartupLock(Locks.layer({ prefix: "cluster" })))))),
    Layer.provide(ShardingConfig.layer({
      ...shared,
      ...clusterTimings,
      entityTerminationTimeout: terminationTimeout(app),
      runnerAddress: Option.some(address),
      runnerListenAddress: Option.some(listen)
    })),
    Layer.provide(RpcSerialization.layerMsgPack),
    // This runner's fences: told by its runner storage, read by its watch and its entities.
    Layer.provideMerge(ShardFences.Default),
    // This runner's calls in flight, cut when their shard moves (`watchMoves`).
    Layer.provideMerge(ShardMoves.Default)
  )
})).pipe(Layer.orDie)

/** The cluster: one in-process runner (embedded) or a runner of the deployment's cluster (`DATABASE_URL`). */
export const ClusterLive = Layer.unwrapEffect(Effect.map(AppConfig, (config) => Option.isSome(config.databaseUrl) ? clustered : embedded))

/**
 * The shard the entity `id` of `entity` lives on: fixed for the id (who holds the shard moves), so a caller that asks
 * often computes it once and asks `sharding.hasShardId` each time.
 */
export const shardOf = (
  sharding: Context.Tag.Service<Sharding.Sharding>,
  entity: { readonly getShardGroup: (id: EntityId.EntityId) => string },
  id: string
): ShardId.ShardId => {
  const entityId = EntityId.make(id)
  return sharding.getShardId(entityId, entity.getShardGroup(entityId))
}

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
  const after = yield* makeTimers
  const moves = Option.getOrUndefined(yield* Effect.serviceOption(ShardMoves))
  /**
   * A call still cut after its resends (or not resendable) is an outage the caller is told of (`EntityCut`: 503 with
   * `Retry-After`), not an interruption of the caller's own fiber: that reached the HTTP server as a request
   * interrupted by the server, which answers 503 without `Retry-After` (issue 33 item 5).
   */
  const settle = <A, E>(exit: Exit.Exit<A, E>): Effect.Effect<A, E> =>
    isCut(exit) ? Effect.die(new EntityCut({ message: "The entity changed runners during the call; retry shortly." })) : exit
  const overdue = Effect.failCause(Cause.die(new EntityDeadline({ message: `No answer from the entity within ${Duration.format(deadline)}.` })))
  /**
   * `resendWhenCut`: only for idempotent messages (a charge or grant with its key, a read). Every call has a deadline
   * (`ENTITY_DEADLINE`): past it the caller gets `EntityDeadline` (a defect: the HTTP edge answers 503 with
   * `Retry-After`), never a wait without end on an owner that is not there (issue 33).
   *
   * The call and its pauses before a resend are fibers of the service whose ends are observed, not a race and a
   * scope in the caller's fiber (issue 28); its deadline waits in the caller's line of timers (`makeTimers`), so a
   * call costs one fiber of ours. A caller interrupted waits for the call's fiber to end; a call past its deadline is
   * interrupted without waiting, as a timeout's loser is.
   *
   * `shard` (with `resendWhenCut`): the entity's shard. The call is followed while in flight (`ShardMoves`): sent to a
   * runner that lost that shard since (a paused owner whose shards the others took), it is cut and sent again at
   * once, to the new owner, instead of waiting for its last try (issue 42 item 7).
   */
  return <A, E>(
    call: Effect.Effect<A, E>,
    options?: { readonly resendWhenCut?: boolean; readonly shard?: MovedShard }
  ): Effect.Effect<A, E> =>
    Effect.async<A, E>((resume) => {
      let settled = false
      /** The call's fiber now, or the pause before its resend. */
      let current: Fiber.RuntimeFiber<unknown, unknown> | undefined
      /** Whether `current` is a call (not a pause). */
      let calling = false
      let attempts = 0
      const resendable = options?.resendWhenCut === true
      const finish = (answer: Effect.Effect<A, E>) => {
        if (settled) return
        settled = true
        moved.done()
        cancelTimer()
        resume(answer)
      }
      /** The attempt in flight given up and the call sent again at once (its shard moved, or its last try). */
      const sendAgain = () => {
        const stuck = current
        send()
        stuck?.unsafeInterruptAsFork(FiberId.none)
      }
      const send = () => {
        moved.sent()
        const fiber = runFork(call)
        current = fiber
        calling = true
        fiber.addObserver((exit) => {
          // A call given up for a last try (below) answers nothing: the last try does.
          if (settled || current !== fiber) return
          if (isCut(exit) && resendable && attempts < RESENDS_WHEN_CUT) {
            attempts++
            const pause = runFork(Effect.sleep(RESEND_PAUSE))
            current = pause
            calling = false
            // A pause cut short (the service stopping) sends nothing more: the call stays cut.
            pause.addObserver((paused) => {
              if (settled || current !== pause) return
              if (!Exit.isSuccess(paused)) finish(settle(exit))
              else send()
            })
            return
          }
          finish(settle(exit))
        })
      }
      /**
       * A resendable call still unanswered `lastTry` before its deadline is sent once more, and the first left
       * without waiting (its keys make a second delivery a replay). Its owner may be a runner that stopped (SIGSTOP, a
       * split brain): the cluster does not cut a message in flight to it, and another runner holds its shard by now.
       * One timer all along: the deadline's, which then runs on for the last try.
       */
      const lastTry = resendable ? lastTryOf(deadline) : undefined
      const onDeadline = () => {
        if (settled) return
        current?.unsafeInterruptAsFork(FiberId.none)
        finish(overdue)
      }
      let cancelTimer = after(lastTry === undefined ? deadline : Duration.subtract(deadline, lastTry), lastTry === undefined ? onDeadline : () => {
        if (settled) return
        cancelTimer = after(lastTry, onDeadline)
        // During a pause the resend is on its way already.
        if (!calling) return
        sendAgain()
      })
      // Its shard moved while an attempt was in flight: that attempt went to the runner that lost it.
      const moved = resendable && options?.shard !== undefined && moves !== undefined
        ? moves.track(options.shard, () => {
          if (!settled && calling) sendAgain()
        })
        : untracked
      send()
      return Effect.suspend(() => {
        settled = true
        moved.done()
        cancelTimer()
        return current === undefined ? Effect.void : Fiber.interrupt(current)
      })
    })
})

/** A call no watch follows (not resendable, or no shard given). */
const untracked = { sent: () => {}, done: () => {} } as const

/**
 * The deadlines of one caller's calls (`makeEntityCaller`): `after(duration, fire)` calls `fire` once `duration` has
 * passed on the Clock, unless the returned function is called first. A timer was a fiber of its own, one of a call's
 * three; now the timers of one duration wait in the order they were set, which is the order they fall due, and one
 * fiber per duration serves them while any waits (a cancelled timer is skipped when its turn comes).
 */
const makeTimers = Effect.gen(function*() {
  const runFork = yield* FiberSet.makeRuntime<never>()
  const clock = yield* Effect.clock
  type Timer = { readonly at: number; fire: (() => void) | undefined }
  const lines = new Map<number, { timers: Array<Timer>; next: number; serving: boolean }>()
  const serve = (line: { timers: Array<Timer>; next: number; serving: boolean }): Effect.Effect<void> =>
    Effect.suspend(() => {
      const now = clock.unsafeCurrentTimeMillis()
      while (line.next < line.timers.length) {
        const timer = line.timers[line.next]!
        if (timer.fire !== undefined && timer.at > now) {
          // What was served is let go of now and then, not on every wake.
          if (line.next >= 1024) {
            line.timers.splice(0, line.next)
            line.next = 0
          }
          return Effect.zipRight(clock.sleep(Duration.millis(timer.at - now)), serve(line))
        }
        line.next++
        const fire = timer.fire
        timer.fire = undefined
        fire?.()
      }
      line.timers = []
      line.next = 0
      line.serving = false
      return Effect.void
    })
  return (duration: Duration.Duration, fire: () => void): (() => void) => {
    const millis = Duration.toMillis(duration)
    let line = lines.get(millis)
    if (line === undefined) {
      line = { timers: [], next: 0, serving: false }
      lines.set(millis, line)
    }
    const timer: Timer = { at: clock.unsafeCurrentTimeMillis() + millis, fire }
    line.timers.push(timer)
    if (!line.serving) {
      line.serving = true
      runFork(serve(line))
    }
    return () => {
      timer.fire = undefined
    }
  }
})

/** How long before its deadline a resendable call is sent once more: a sixth of the deadline, at most 2 s. */
const lastTryOf = (deadline: Duration.Duration): Duration.Duration => Duration.min(Duration.unsafeDivide(deadline, 6), Duration.seconds(2))

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

/**
 * Caller-side batching for an entity client (issue 45 item 1): `send` sends the requests of one batch for one `key`
 * (an entity) in one message and answers each, in order. Requests for one key go one batch at a time from this
 * process: the first leaves at once, alone; those that arrive while it is on its way leave together when it is
 * answered. So a lone request waits for nothing, and a hot entity costs one message per round trip instead of one per
 * request, to this runner (the entity client's path) as to another (one frame on the runner socket). A window
 * (`@effect/experimental`'s `dataLoader`) would delay every lone request and, at a round trip's rate, gather few.
 *
 * `send` is the function a `RequestResolver.makeBatched` takes, called directly: going through `Effect.request`
 * (a request block, a deferred and a blocked fiber per request) cost 55-60 µs of CPU per charge more on this machine
 * under load than this (`bench/local-send.ts`; 37-47 µs against 93-157 µs per charge with a 5 ms commit).
 *
 * A caller that gives up before its request left takes it back; once sent, its batch runs to its end in this
 * service's fiber (never the caller's: see `makeEntityCaller`).
 */
export const makeEntityBatcher = <A, B, E>(
  send: (batch: ReadonlyArray<A>) => Effect.Effect<ReadonlyArray<Exit.Exit<B, E>>>,
  keyOf: (request: A) => string
) =>
  Effect.gen(function*() {
    const runFork = yield* FiberSet.makeRuntime<never>()
    type Waiting = { readonly request: A; readonly resume: (effect: Effect.Effect<B, E>) => void; cancelled: boolean }
    type Pending = { inFlight: boolean; waiting: Array<Waiting> }
    const pending = new Map<string, Pending>()
    const next = (key: string, entry: Pending) => {
      const batch = entry.waiting.filter((w) => !w.cancelled)
      entry.waiting = []
      if (batch.length === 0) {
        pending.delete(key)
        return
      }
      entry.inFlight = true
      runFork(
        Effect.suspend(() => send(batch.map((w) => w.request))).pipe(
          // On any exit, interruption included: every request of the batch is answered and the next batch leaves.
          Effect.onExit((exit) =>
            Effect.sync(() => {
              batch.forEach((w, i) => {
                if (Exit.isFailure(exit)) return w.resume(Effect.failCause(exit.cause))
                const answer = exit.value[i]
                w.resume(answer === undefined ? Effect.dieMessage("the entity answered fewer requests than it was sent") : answer)
              })
              entry.inFlight = false
              next(key, entry)
            })
          )
        )
      )
    }
    return (request: A): Effect.Effect<B, E> =>
      Effect.async((resume) => {
        const waiting: Waiting = { request, resume, cancelled: false }
        const key = keyOf(request)
        let entry = pending.get(key)
        if (entry === undefined) {
          entry = { inFlight: false, waiting: [] }
          pending.set(key, entry)
        }
        entry.waiting.push(waiting)
        if (!entry.inFlight) next(key, entry)
        return Effect.sync(() => {
          waiting.cancelled = true
        })
      })
  })
