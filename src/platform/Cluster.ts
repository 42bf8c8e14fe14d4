import {
  ClusterError,
  Entity,
  EntityId,
  RunnerAddress,
  RunnerHealth,
  Runners,
  RunnerServer,
  RunnerStorage,
  Sharding,
  ShardingConfig,
  type ShardId,
  SqlMessageStorage,
  SqlRunnerStorage
} from "@effect/cluster"
import * as NodeClusterSocket from "@effect/platform-node/NodeClusterSocket"
import * as RpcSerialization from "@effect/rpc/RpcSerialization"
import * as RpcServer from "@effect/rpc/RpcServer"
import { Cause, type Context, Duration, Effect, Exit, Fiber, FiberId, FiberSet, Layer, Option, Schedule, type Scope } from "effect"
import * as Net from "node:net"
import { AppConfig } from "./Config.js"
import { clusterTimings, failoverBudget } from "./cluster/Budget.js"
import { type Refresh, ShardFences } from "./cluster/Fences.js"
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
 * is in PostgreSQL (`SqlRunnerStorage`: a row per runner with a heartbeat, an advisory lock per shard on a connection
 * of its own, so a runner that dies releases its shards the moment PostgreSQL sees its connection close); runners
 * reach each other over the socket transport on `RUNNER_HOST:RUNNER_PORT`; a singleton pings the others and marks
 * the silent ones unhealthy; the runners also watch each other's heartbeats and cut a silent one off (`watchRunners`).
 * Every acquisition of a shard raises its generation in the database (fencing tokens: `cluster/Fences.ts`, one
 * `ShardFences` per runner, which this layer provides to the entities). The timings are one budget, `failoverBudget`
 * (`cluster/Budget.ts`; docs/sessions.md, docs/operations.md).
 *
 * `ShardingConfig` is always given explicitly: `layerFromEnv` would read our `HOST`/`PORT`.
 */

const shared = {
  entityMailboxCapacity: 10_000,
  entityMaxIdleTime: "5 minutes"
} as const

/** How an instance on this runner takes a request of a local path (`serveLocally`). */
type LocalAsk = (request: unknown) => Effect.Effect<Option.Option<unknown>>

/** How often an instance with local requests waiting looks for those past their deadline (`serveLocally`). */
const DEADLINE_SWEEP = "1 second"

/**
 * The instances that serve a local path on this runner, by path type and entity id (`serveLocally`): one per runner,
 * provided by `ClusterLive` to the entities and the clients alike.
 */
export class LocalEntities extends Effect.Service<LocalEntities>()("atrium/platform/LocalEntities", {
  sync: () => ({ byKey: new Map<string, LocalAsk>() })
}) {}

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
    const releasing = yield* Effect.makeSemaphore(1)
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
      // One at a time: they all go through the one lock connection, and the cluster starts one per shard at once
      // (about 150 when a runner joins), which queued a refresh behind 300-odd statements; under load it missed its
      // deadline and the runner gave every shard up, cutting the turns a hand-over is meant to let finish.
      release: (address, shardId) =>
        Effect.zipRight(Effect.sync(() => fences.release(shardId)), releasing.withPermits(1)(storage.release(address, shardId))),
      releaseAll: (address) => Effect.zipRight(Effect.sync(fences.releaseAll), storage.releaseAll(address))
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
 * The cluster's `Runners` (how this runner sends to the others), cutting what is in flight to a runner the cluster
 * has seen go (issue 42 item 7). A paused runner's kernel keeps its socket open, so a message sent to it before the
 * pause waits for an answer that does not come (the socket's own ping notices after 10 to 20 s, the caller's deadline
 * after 12 s); the charges of its wallets stalled for as long. The cluster's assignment refresh calls
 * `onRunnerUnavailable` for a runner that left the healthy set (the runners' watch takes a paused one out within
 * about 3 s: `cluster/Watch.ts`), after it has moved that runner's shards: every send and notification still waiting on
 * that runner is then cut, a send with `RunnerUnavailable`, which `Sharding` answers by sending the same message again,
 * by the new assignment, every `sendRetryInterval` until the new owner takes it. Only idempotent messages may be
 * resent this way, and the ones we send are (a charge carries its key; a read; a session message the session
 * dedupes by its log): the old owner may have taken it before the pause, and then its commit is refused by its fence.
 *
 * Each send to another runner runs in a fiber of this layer, observed, so that it can be cut without interrupting the
 * caller; a message to this runner's own entities does not go through `send` (`Runners.sendLocal`).
 */
export const cutInFlightWhenUnavailable = <E, R>(runners: Layer.Layer<Runners.Runners, E, R>) =>
  Layer.scoped(
    Runners.Runners,
    Effect.gen(function*() {
      const inner = yield* Runners.Runners
      const runFork = yield* FiberSet.makeRuntime<never>()
      /** What waits on each runner now, by address, each with how to cut it. */
      const inFlight = new Map<string, Set<() => void>>()
      const keyOf = (address: RunnerAddress.RunnerAddress) => `${address.host}:${address.port}`
      const tracked = <A, Err>(address: RunnerAddress.RunnerAddress, call: Effect.Effect<A, Err>, whenCut: Effect.Effect<A, Err>) =>
        Effect.async<A, Err>((resume) => {
          const key = keyOf(address)
          let waiting = inFlight.get(key)
          if (waiting === undefined) inFlight.set(key, waiting = new Set())
          const set = waiting
          let settled = false
          const fiber = runFork(call)
          const leave = () => {
            settled = true
            set.delete(cut)
            if (set.size === 0 && inFlight.get(key) === set) inFlight.delete(key)
          }
          const cut = () => {
            if (settled) return
            leave()
            fiber.unsafeInterruptAsFork(FiberId.none)
            resume(whenCut)
          }
          set.add(cut)
          fiber.addObserver((exit) => {
            if (settled) return
            leave()
            resume(exit)
          })
          return Effect.suspend(() => {
            if (!settled) leave()
            return Fiber.interrupt(fiber)
          })
        })
      return Runners.Runners.of({
        ...inner,
        send: (options) =>
          tracked(options.address, inner.send(options), Effect.fail(new ClusterError.RunnerUnavailable({ address: options.address }))),
        // A notification is of a stored message: cut, it is read from storage by whoever owns its shard next.
        notify: (options) =>
          Option.isNone(options.address) ? inner.notify(options) : tracked(options.address.value, inner.notify(options), Effect.void),
        onRunnerUnavailable: (address) =>
          Effect.suspend(() => {
            const waiting = inFlight.get(keyOf(address))
            inFlight.delete(keyOf(address))
            if (waiting !== undefined) for (const cut of Array.from(waiting)) cut()
            return inner.onRunnerUnavailable(address)
          })
      })
    })
  ).pipe(Layer.provide(runners))

/**
 * `SocketRunner.layer` (the runner's server and its clients) with `cutInFlightWhenUnavailable` around the clients'
 * `Runners`: the same layers, composed here so that `Sharding` sends through the cutting `Runners`.
 */
const SocketRunnerLive = RunnerServer.layer.pipe(
  Layer.provideMerge(Sharding.layer),
  Layer.provideMerge(cutInFlightWhenUnavailable(Runners.layerRpc)),
  Layer.provide(RpcServer.layerProtocolSocketServer)
)

const embedded = Sharding.layer.pipe(
  Layer.provideMerge(Runners.layerNoop),
  Layer.provideMerge(SqlMessageStorage.layerWith({ prefix: "cluster" })),
  Layer.provide([RunnerStorage.layerMemory, RunnerHealth.layerNoop]),
  Layer.provide(ShardingConfig.layer({
    ...shared,
    // A message to an entity of this process is handed over as it is, not encoded and decoded with its schemas first.
    simulateRemoteSerialization: false
  })),
  // Untracked: the one runner holds every shard, and nothing is fenced.
  Layer.provideMerge(ShardFences.Default),
  Layer.provideMerge(LocalEntities.Default)
)

const clustered = Layer.unwrapEffect(Effect.gen(function*() {
  const app = yield* AppConfig
  const runner = app.runner
  const port = Option.isSome(runner.port) ? runner.port.value + runner.worker : yield* runnerPortOf(app.port, runner.worker)
  const address = RunnerAddress.make(runner.host, port)
  // Listen where the others dial, on every interface when the advertised host is not a loopback one.
  const listen = RunnerAddress.make(runner.host === "127.0.0.1" || runner.host === "localhost" ? runner.host : "0.0.0.0", port)
  yield* Effect.logDebug(`cluster runner at ${address.host}:${address.port}`)
  return Layer.merge(watchRunners(address).pipe(Layer.provide(Runners.layerRpc)), SocketRunnerLive).pipe(
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
    Layer.provide(RpcSerialization.layerMsgPack),
    // This runner's fences: told by its runner storage, read by its watch and its entities.
    Layer.provideMerge(ShardFences.Default),
    Layer.provideMerge(LocalEntities.Default)
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
   * The call, its pauses before a resend and its deadline are fibers of the service whose ends are observed, not a
   * race and a scope in the caller's fiber: a call costs two fibers of ours, not three (issue 28). A caller
   * interrupted waits for the call's fiber to end; a call past its deadline is interrupted without waiting, as a
   * timeout's loser is.
   */
  return <A, E>(call: Effect.Effect<A, E>, options?: { readonly resendWhenCut?: boolean }): Effect.Effect<A, E> =>
    Effect.async<A, E>((resume) => {
      let settled = false
      let current: Fiber.RuntimeFiber<unknown, unknown> | undefined
      const timer = runFork(Effect.sleep(deadline))
      const finish = (answer: Effect.Effect<A, E>) => {
        if (settled) return
        settled = true
        timer.unsafeInterruptAsFork(FiberId.none)
        resume(answer)
      }
      const send = (attempt: number) => {
        const fiber = runFork(call)
        current = fiber
        fiber.addObserver((exit) => {
          if (settled) return
          if (isCut(exit) && options?.resendWhenCut === true && attempt < RESENDS_WHEN_CUT) {
            const pause = runFork(Effect.sleep(RESEND_PAUSE))
            current = pause
            // A pause cut short (the service stopping) sends nothing more: the call stays cut.
            pause.addObserver((paused) => {
              if (!Exit.isSuccess(paused)) finish(settle(exit))
              else if (!settled) send(attempt + 1)
            })
            return
          }
          finish(settle(exit))
        })
      }
      timer.addObserver((exit) => {
        if (settled || !Exit.isSuccess(exit)) return
        current?.unsafeInterruptAsFork(FiberId.none)
        finish(overdue)
      })
      send(0)
      return Effect.suspend(() => {
        settled = true
        timer.unsafeInterruptAsFork(FiberId.none)
        return current === undefined ? Effect.void : Fiber.interrupt(current)
      })
    })
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

/**
 * A local road into an entity instance active on this runner (issue 45 item 1: a local send fast once, here, for
 * every entity client). The instance's behaviour registers, with `serveLocally`, how it takes one request of a kind
 * (`LocalPath`) into its own ordering (for the wallet: the queue its mailbox loop decides from, beside the mailbox's
 * messages); a client made with `localFirst` asks it first and sends a cluster message only when it answers `None`.
 * No message, no serialization, no fiber of the client's: a queue slot and a callback per request.
 *
 * It is the same actor behind the same fence: a local request is taken only while the instance runs and its shard's
 * fence (`cluster/Fences.ts`) is the one it started with, is decided by the same loop as the messages, in order with
 * them, and is answered within `ENTITY_DEADLINE` like a message (then `EntityDeadline`, a 503, within one
 * `DEADLINE_SWEEP` more). `None` means "send it
 * as a message": the instance is stopping or gone, its fence moved, or it stopped before answering; in that last case
 * whether the request took effect is unknown, as for a message cut by a hand-over, so only idempotent requests (a
 * charge with its key, a read) may take this road: the message re-sends it with the same key.
 *
 * Liveness is the cluster's: the reaper passivates an instance with no message for its `maxIdleTime` (it reads the
 * time its last message ended, `lastActiveCheck` in `@effect/cluster`'s entity manager, which only messages set), so
 * an instance used only locally asks `Entity.keepAlive(true)` once it has been used for `maxIdleTime / 5`, and
 * `keepAlive(false)` once it has had no local request for `maxIdleTime`: one persisted message each way per period
 * of use, not one per request.
 */
export interface LocalPath<Req, A> {
  readonly type: string
  /** Type witnesses only. */
  readonly _Req?: (req: Req) => void
  readonly _A?: () => A
}

export const localPath = <Req, A>(type: string): LocalPath<Req, A> => ({ type })



const localKey = (type: string, id: string) => `${type}\u0000${id}`

/**
 * Registers, for the life of the calling entity instance (its build effect, in its scope), how it takes a request of
 * `path`: `take(request, answer)` puts the request in the instance's own order and calls `answer` once decided. Without
 * `LocalEntities` in context (an entity tested alone) it registers nothing.
 */
export const serveLocally = <Req, A>(
  path: LocalPath<Req, A>,
  options: { readonly maxIdleTime: Duration.DurationInput },
  take: (request: Req, answer: (value: A) => void) => void
): Effect.Effect<void, never, Scope.Scope | Sharding.Sharding | Entity.CurrentAddress | ShardFences> =>
  Effect.gen(function*() {
    const registry = yield* Effect.serviceOption(LocalEntities)
    if (Option.isNone(registry)) return
    const address = yield* Entity.CurrentAddress
    const fences = yield* ShardFences
    const fence = yield* fences.takeFence(address.shardId)
    const key = localKey(path.type, address.entityId)
    const idleMs = Duration.toMillis(options.maxIdleTime)
    /**
     * The local requests not answered yet, each with when its deadline passes and how to end it: told `None` if the
     * instance stops first, `EntityDeadline` past `ENTITY_DEADLINE`.
     */
    const waiting = new Map<(answer: Effect.Effect<Option.Option<A>>) => void, number>()
    let open = true
    let lastLocalAt = 0
    let alive = false
    const wake = yield* Effect.makeLatch(false)
    // Keeps the instance active while its local road is in use (the reaper sees no message for it): forked in the
    // instance's scope, so it runs with the instance's context (the keep-alive latch, its address).
    yield* Effect.forkScoped(Effect.forever(Effect.gen(function*() {
      yield* wake.await
      yield* Effect.sleep(idleMs / 5)
      yield* Entity.keepAlive(true)
      while (Date.now() - lastLocalAt < idleMs) yield* Effect.sleep(Math.max(1, lastLocalAt + idleMs - Date.now()))
      // Closed before the message: a request meanwhile opens it again, and the loop asks again.
      alive = false
      yield* wake.close
      yield* Entity.keepAlive(false)
    })))
    // The deadline of every local request, by one fiber of the instance that looks every `DEADLINE_SWEEP` while any
    // waits: a timeout per request (`Effect.timeout`: a race of two fibers) doubled the CPU of a local charge
    // (indicative, loaded machine). So a request is answered `EntityDeadline` between `ENTITY_DEADLINE` and one
    // sweep later.
    const pending = yield* Effect.makeLatch(false)
    const overdue = Effect.failCause(Cause.die(new EntityDeadline({ message: `No answer from the entity within ${Duration.format(ENTITY_DEADLINE)}.` })))
    yield* Effect.forkScoped(Effect.forever(Effect.gen(function*() {
      yield* pending.await
      yield* Effect.sleep(DEADLINE_SWEEP)
      const now = Date.now()
      for (const [end, until] of Array.from(waiting)) if (until <= now) end(overdue)
      if (waiting.size === 0) pending.unsafeClose()
    })))
    const deadlineMs = Duration.toMillis(ENTITY_DEADLINE)
    const ask = (request: Req) =>
      Effect.async<Option.Option<A>>((resume) => {
        if (!open || !fences.fenceCurrent(fence)) return resume(Effect.succeedNone)
        const now = Date.now()
        lastLocalAt = now
        if (!alive) {
          alive = true
          wake.unsafeOpen()
        }
        const end = (answer: Effect.Effect<Option.Option<A>>) => {
          if (waiting.delete(end)) resume(answer)
        }
        waiting.set(end, now + deadlineMs)
        pending.unsafeOpen()
        take(request, (value) => end(Effect.succeed(Option.some(value))))
        return Effect.sync(() => void waiting.delete(end))
      })
    registry.value.byKey.set(key, ask as LocalAsk)
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        open = false
        if (registry.value.byKey.get(key) === (ask as LocalAsk)) registry.value.byKey.delete(key)
        for (const end of Array.from(waiting.keys())) end(Effect.succeedNone)
      })
    )
  })

/**
 * The client side of a local path: `ask(id, request)` is the instance's answer when instance `id` of the path's entity
 * is active on this runner and takes it (`serveLocally`), else `None`, and the caller sends the request as a message
 * (with the same idempotency key). Every entity client with a local road uses this (`billing/Wallets.ts`).
 */
export const localFirst = <Req, A>(path: LocalPath<Req, A>) =>
  Effect.map(LocalEntities, (registry) => {
    const none = Effect.succeedNone
    return (id: string, request: Req): Effect.Effect<Option.Option<A>> => {
      const ask = registry.byKey.get(localKey(path.type, id))
      return ask === undefined ? none : (ask(request) as Effect.Effect<Option.Option<A>>)
    }
  })
