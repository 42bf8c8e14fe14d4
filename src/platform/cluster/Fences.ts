import { Duration, Effect } from "effect"
import { failoverBudget } from "./Budget.js"

/**
 * What this runner knows of the shards it holds, and the fences its entities write under (issues 26 and 33).
 *
 * One per runner, not per process: the test suites run several platforms (each a runner over its own database) in one
 * process, and one runner's shard generations must never fence another's entities. `ClusterLive` provides it; the
 * Wallet and Session entities read it. A runner whose shard locks are not tracked (embedded mode: one runner owns
 * every shard) holds everything and fences nothing.
 *
 * **Held shards.** The runner storage's own answers tell which shards this runner holds (`group:id`): every `acquire`
 * and `refresh` names the shards whose advisory locks it holds; a refresh that leaves one out and a release forget
 * them. A shard is `held` while that evidence stands and is verified since any stall of this process (below). A runner
 * that was paused (SIGSTOP, a stuck host, a long GC) and woke holds nothing verified: its sessions stop starting
 * turns, billing and writing until a refresh confirms the shard again, or the shard has moved. Not a clock on the last
 * refresh: a runner handing its shards over (SIGTERM, a runner joining) refreshes them less while its turns finish,
 * and still holds them.
 *
 * **The stall clock.** A timer ticks every 250 ms (`tick`, run by the runner storage). A gap of over `stall` between
 * ticks means the process did not run: what it holds is unverified from then until a lock refresh that started after
 * the gap confirms it. `stall` is under the `silent` time after which the other runners end a silent runner's
 * database sessions, so a runner they cut always finds itself unverified when it wakes.
 *
 * **Fencing tokens** (migration 0017): the generation under which this runner holds each shard, raised in the
 * database by every acquisition. An entity takes its shard's fence when it starts and every write it makes carries
 * it; the statement refuses it once the generation moved on (another runner acquired the shard, or this one lost and
 * re-acquired it: an entity started before that holds state that may be stale).
 */
export interface Fence {
  readonly shard: string
  readonly generation: string
}

export interface ShardRef {
  readonly group: string
  readonly id: number
}

/** A lock refresh as the fences follow it (`refreshStarting`). */
export interface Refresh {
  readonly started: number
  /** What this runner held was unverified when it began: its answer may name locks it took again. */
  readonly suspect: boolean
}

/** A write refused by its fence: this runner no longer owns the entity under the generation it started with. */
export class Fenced extends Error {
  readonly _tag = "Fenced"
  constructor(readonly sessionOrWallet: string) {
    super(`stale owner: ${sessionOrWallet} belongs to a newer generation of its shard`)
    this.name = "Fenced"
  }
}

/** A shard as the fences name it. */
const shardKey = (shardId: ShardRef) => `${shardId.group}:${shardId.id}`

const STALL_MS = Duration.toMillis(failoverBudget.stall)
const WATCHER_LAG_MS = Duration.toMillis(failoverBudget.watcherLag)
/** How long a shard may stay unverified (a stall) before a turn waiting on it gives up (`awaitShard`). */
const UNVERIFIED_WAIT_MS = 8_000

export class ShardFences extends Effect.Service<ShardFences>()("atrium/platform/ShardFences", {
  effect: Effect.gen(function*() {
    let tracked = false
    const held = new Set<string>()
    const generations = new Map<string, string>()
    let lastTick = Date.now()
    let unverifiedSince: number | undefined
    let laggedAt = -Infinity
    /** The runner left the cluster (its `unregister`): its shards are still locked until its entities have ended. */
    let leaving = false
    /** Other runners registered at the last watch; -1 before the first (unknown: they may be there). */
    let othersRegistered = -1
    /** One answer of the runner storage at a time is recorded, so a shard new to two answers at once is raised once. */
    const recording = yield* Effect.makeSemaphore(1)

    /** The process's own clock of liveness: a gap between calls past `stall` makes everything held unverified. */
    const tick = () => {
      const now = Date.now()
      if (now - lastTick > STALL_MS) unverifiedSince = now
      if (now - lastTick > WATCHER_LAG_MS) laggedAt = now
      lastTick = now
    }

    /** `held` by the runner storage's last word and verified since any stall; `unverified` after a stall; else `lost`. */
    const shardState = (shardId: ShardRef): "held" | "unverified" | "lost" => {
      if (!tracked) return "held"
      tick()
      if (!held.has(shardKey(shardId))) return "lost"
      return unverifiedSince === undefined ? "held" : "unverified"
    }

    /**
     * The fence of `shardId` for an entity starting now: `null` when untracked (nothing to fence); generation "0",
     * which no shard has, when this runner does not hold it.
     */
    const fenceOf = (shardId: ShardRef): Fence | null => {
      if (!tracked) return null
      const shard = shardKey(shardId)
      return { shard, generation: held.has(shard) ? generations.get(shard) ?? "0" : "0" }
    }

    return {
      shardState,
      /** Whether this runner holds the shard by the runner storage's last word on it, verified since any stall. */
      shardConfirmed: (shardId: ShardRef): boolean => shardState(shardId) === "held",
      fenceOf,
      /**
       * The fence of `shardId` for an entity starting now (its constructor, before it reads its state). The cluster
       * starts an entity only on a shard it acquired, and the acquisition is recorded with its generation first, so
       * the fence is there at once; the wait covers the moment a refresh is being retried (`unverified`) or recorded.
       * A runner that does not hold the shard after `failoverBudget.failover` gets generation "0": none of its writes
       * is taken.
       */
      takeFence: (shardId: ShardRef): Effect.Effect<Fence | null> =>
        Effect.gen(function*() {
          if (!tracked) return null
          const shard = shardKey(shardId)
          const until = Date.now() + Duration.toMillis(failoverBudget.failover)
          while (!(held.has(shard) && generations.has(shard)) && Date.now() < until) yield* Effect.sleep("100 millis")
          return fenceOf(shardId)
        }),
      /** Whether `fence` is still this runner's (it could have been re-acquired under a newer generation since). */
      fenceCurrent: (fence: Fence | null): boolean =>
        fence === null || (held.has(fence.shard) && generations.get(fence.shard) === fence.generation),
      /**
       * Waits while the shard is unverified (a stall): true once a refresh confirms it (a healthy runner that was only
       * slow goes on after at most one refresh interval), false when it is lost or still unverified after a while.
       */
      awaitShard: (shardId: ShardRef): Effect.Effect<boolean> =>
        Effect.gen(function*() {
          const until = Date.now() + UNVERIFIED_WAIT_MS
          for (;;) {
            const state = shardState(shardId)
            if (state !== "unverified") return state === "held"
            if (Date.now() > until) return false
            yield* Effect.sleep("100 millis")
          }
        }),

      // What the runner storage and the runners' watch tell and ask (Cluster.ts).

      /** From now on this runner's shards are tracked: it is one runner of several over the database. */
      track: () => void (tracked = true),
      tick,
      /** Whether this process's timer ran late by over `watcherLag` within `withinMs` (the host is starved). */
      laggedWithin: (withinMs: number) => Date.now() - laggedAt < withinMs,
      /**
       * Records what an answer of the runner storage confirms (`asked`: the shards a refresh renewed; none for an
       * acquisition): the shards of `asked` it left out are no longer held, those it names are, and each acquired or
       * not held before gets a new generation first (`raise`: fencing, raised before anything of this runner can
       * start an entity on it). A raise that fails fails the answer: those shards stay unheld.
       */
      record: <E>(
        asked: Iterable<ShardRef> | undefined,
        acquired: ReadonlyArray<ShardRef>,
        raise: (fresh: ReadonlyArray<{ shard: string; known: string | null }>) => Effect.Effect<ReadonlyArray<{ shard: string; generation: string }>, E>,
        refresh?: Refresh
      ) =>
        recording.withPermits(1)(Effect.gen(function*() {
          if (asked !== undefined) {
            const kept = new Set(acquired.map(shardKey))
            for (const shardId of asked) if (!kept.has(shardKey(shardId))) held.delete(shardKey(shardId))
          }
          // Every shard of an acquisition is raised, also one this runner still counts as held: the cluster acquires
          // only what it does not hold, and after it gave its shards up on an unhealthy lock storage (a database
          // outage: no release reaches the fences) another runner may have owned the shard meanwhile. Had nobody,
          // the raise keeps the generation this runner knew (`raiseGenerations`).
          //
          // A refresh that began unverified (after a stall, or after a refresh that failed) is an acquisition too: the
          // runner storage's refresh takes again every lock its connection does not hold, so a shard it names may have
          // been lost (the others cut this runner's sessions), owned elsewhere, handed back and re-locked, all while
          // `held` still counted it (issue 42 item 8: a woken runner kept the old generation and billed a turn the new
          // owner had closed). Raised with the generation it knew, it keeps it only if nobody else acquired it since.
          const relocked = asked === undefined || refresh?.suspect === true
          const fresh = relocked ? acquired.map(shardKey) : acquired.map(shardKey).filter((shard) => !held.has(shard))
          if (fresh.length > 0) {
            const rows = yield* raise(fresh.map((shard) => ({ shard, known: generations.get(shard) ?? null })))
            for (const row of rows) generations.set(row.shard, row.generation)
          }
          for (const shardId of acquired) held.add(shardKey(shardId))
        })),
      /**
       * A refresh starts: when (only one that began after a stall speaks for now), and whether what was held is
       * unverified as it starts (`suspect`: its answer may name locks taken again, `record`).
       */
      refreshStarting: (): Refresh => {
        tick()
        return { started: Date.now(), suspect: unverifiedSince !== undefined }
      },
      /** A refresh that began at `refresh.started` went through (and was recorded). */
      refreshConfirmed: (refresh: Refresh) => {
        if (unverifiedSince !== undefined && refresh.started > unverifiedSince) unverifiedSince = undefined
      },
      /**
       * A refresh that failed or timed out leaves every lock it was to renew unverified, not lost: the cluster tries
       * again at once (a connection reset, a slow statement), and the attempt that goes through says what is held; if
       * none does, the cluster gives every shard up (`releaseAll`). Forgetting them here made an entity that started
       * in between take no fence at all (generation "0": refused forever), and stopped running turns as "owner lost"
       * on a refresh that was only retried.
       */
      refreshFailed: () => void (unverifiedSince = Date.now()),
      /** The runner storage was told this runner leaves (`Sharding`'s shutdown, the first thing a stop does). */
      leave: () => void (leaving = true),
      /**
       * Whether an entity of `shardId` cannot answer a new request now: this runner is leaving and still holds the
       * shard, or has let it go with no other runner to take it. `@effect/cluster` refuses new requests to the
       * entities of a stopping runner, which lets its shards go as its first entity stops; such a message waited out
       * its caller's whole deadline (12 s more on every stop whose turn settled its hold; session 29). Untracked
       * (embedded) never: the one runner answers to the end.
       */
      unreachableWhileLeaving: (shardId: ShardRef): boolean =>
        tracked && leaving && (held.has(shardKey(shardId)) || othersRegistered === 0),
      /** How many other runners the last watch saw registered (`watchRunners`): none, and nobody takes a shard let go. */
      noteOthers: (count: number) => void (othersRegistered = count),
      release: (shardId: ShardRef) => void held.delete(shardKey(shardId)),
      releaseAll: () => held.clear()
    } as const
  })
}) {}
