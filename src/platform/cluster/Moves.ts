import { Duration, Effect, Layer } from "effect"
import { failoverBudget } from "./Budget.js"
import { RunnersRepo } from "./Repo.js"

/**
 * Keyed calls in flight, and the shards they went to (issue 42 item 7: "a charge in flight to a runner that lost its
 * shard is cut and re-sent to the new owner").
 *
 * Wallet messages are not `Persisted`: `@effect/cluster` keeps the caller's request in memory and never fails it when
 * the target's shard is reassigned. A message on its way to a runner that stopped (SIGSTOP, a stuck host) is not cut
 * when the others take its shards: the socket to it stays open (its kernel answers), and the caller waited out its
 * deadline (`makeEntityCaller`: its last try, 2 s before 12 s), and every later charge of that wallet from the same
 * runner queued behind it (the batcher's lane). `@effect/cluster` does not say where a shard is assigned; our own
 * `shard_generations` (migration 0017, `ShardFences`) does: every acquisition of a shard writes its runner and time.
 *
 * A call made with `resendWhenCut` and its shard (`makeEntityCaller`) is tracked while it is in flight. The watch
 * (`watchMoves`) looks only at calls unanswered for `SUSPECT` (an answer takes milliseconds; nothing moves a stopped
 * runner's shards within 2 s), and asks the database when their shards were last acquired and by whom. A call whose
 * shard was acquired after it was sent, by a runner other than the one that held it when it was sent (when known), is
 * cut and sent again at once: the cluster routes the new one to the new owner. Only keyed or read-only messages are
 * tracked, so the first delivery, should it ever be processed (the stopped runner wakes), is a replay: its writes are
 * fenced, and the charge's key makes a second delivery answer from the ledger.
 *
 * Each call is cut once per acquisition of its shard, not on a clock: a slow owner (a loaded database after a restart)
 * is not sent the same message again and again (resending every second overloaded the storage after a PostgreSQL
 * restart, issue 42).
 */

/** A shard as `shard_generations` names it (`group:id`, as `ShardFences`). */
export interface MovedShard {
  readonly group: string
  readonly id: number
}

/** The latest acquisition of a shard, as the database says: by whom, which (its time as text) and how long ago. */
export interface Acquisition {
  readonly shard: string
  readonly runner: string
  readonly acquiredAt: string
  readonly ageMs: number
}

/** A call in flight, as the watch follows it. */
interface Tracked {
  readonly shard: string
  /** When its current attempt was sent (this process's clock). */
  sentAt: number
  /** The acquisition it is known to have been sent under, or has been cut for already. */
  known: Acquisition | undefined
  readonly resend: () => void
}

/** What a tracked call tells the watch: each (re)send, and its end. */
export interface TrackedCall {
  readonly sent: () => void
  readonly done: () => void
}

/** A call unanswered this long is looked at. */
export const SUSPECT = Duration.seconds(1)
/** How often the watch looks, while any call is suspect. */
export const MOVES_POLL = Duration.millis(250)
const SUSPECT_MS = Duration.toMillis(SUSPECT)
/**
 * How long after a shard's acquisition a runner may still route to its former owner: each runner recomputes the
 * assignment every `assignments` (0.5 s), on its own clock, and a loaded one late. A call sent within this of the
 * acquisition may have gone to the former owner.
 */
const ROUTING_LAG_MS = 2 * Duration.toMillis(failoverBudget.assignments)

/**
 * Whether the call sent at `sentAt` (under `known`, the acquisition of its shard the watch saw last) is to be cut: its
 * shard was acquired after it was sent, or so shortly before (`ROUTING_LAG_MS`) that it may have been routed to the
 * former owner, and not again by the runner it was known to go to. When is the database's own age of the acquisition
 * (`asOf` - `ageMs`), so the clocks of the database and this process need not agree; `asOf` is when the answer came, which errs towards a cut, harmless for a keyed message.
 *
 * A call is cut at most twice for one acquisition: once when it is seen, and once more if the resend, sent within
 * `ROUTING_LAG_MS` of it, is unanswered for `SUSPECT` too; after that its `sentAt` is past the lag.
 */
export const movedSince = (
  call: { readonly sentAt: number; readonly known: Acquisition | undefined },
  latest: Acquisition,
  asOf: number
): "cut" | "known" => {
  if (asOf - latest.ageMs <= call.sentAt - ROUTING_LAG_MS) return "known"
  // Acquired again by the runner it went to: not moved. (A database restart that gives a runner its own locks back keeps
  // the acquisition's time since session 29, `RunnersRepo.raiseGenerations`, and is "known" above already.)
  if (call.known !== undefined && call.known.acquiredAt !== latest.acquiredAt && call.known.runner === latest.runner) return "known"
  return "cut"
}

export class ShardMoves extends Effect.Service<ShardMoves>()("atrium/platform/ShardMoves", {
  sync: () => {
    const inFlight = new Set<Tracked>()
    /** Whether a watch runs (cluster mode): with none, nothing is tracked. */
    let watched = false
    const untracked: TrackedCall = { sent: () => {}, done: () => {} }
    return {
      /** From now on calls are tracked: a watch looks at them (`watchMoves`). */
      watch: () => void (watched = true),
      /** Follows a call to an entity on `shard` until `done`; `resend` cuts its attempt in flight and sends it again. */
      track: (shard: MovedShard, resend: () => void): TrackedCall => {
        if (!watched) return untracked
        const entry: Tracked = { shard: `${shard.group}:${shard.id}`, sentAt: Date.now(), known: undefined, resend }
        inFlight.add(entry)
        return {
          sent: () => void (entry.sentAt = Date.now()),
          done: () => void inFlight.delete(entry)
        }
      },
      /** The shards of the calls unanswered for `SUSPECT` at `now` (none: nothing to ask). */
      suspectShards: (now: number): ReadonlyArray<string> => {
        const shards = new Set<string>()
        for (const entry of inFlight) if (now - entry.sentAt >= SUSPECT_MS) shards.add(entry.shard)
        return Array.from(shards)
      },
      /** Cuts and sends again every suspect call whose shard moved since it was sent (`movedSince`): how many. */
      judge: (latest: ReadonlyArray<Acquisition>, asOf: number): number => {
        const byShard = new Map(latest.map((a) => [a.shard, a]))
        const cut: Array<Tracked> = []
        for (const entry of inFlight) {
          if (asOf - entry.sentAt < SUSPECT_MS) continue
          const acquisition = byShard.get(entry.shard)
          if (acquisition === undefined) continue
          const verdict = movedSince(entry, acquisition, asOf)
          entry.known = acquisition
          if (verdict === "cut") cut.push(entry)
        }
        // After the loop: a resend changes `sentAt` (and a call answered at once leaves the set).
        for (const entry of cut) entry.resend()
        return cut.length
      }
    }
  }
}) {}

/**
 * The watch over the tracked calls (cluster mode): every `MOVES_POLL` while any call is suspect, one statement for
 * the suspect calls' shards. A failed statement (the database away) waits for the next round.
 */
export const watchMoves = Layer.scopedDiscard(Effect.gen(function*() {
  const moves = yield* ShardMoves
  const repo = yield* RunnersRepo
  moves.watch()
  const round = Effect.gen(function*() {
    const shards = moves.suspectShards(Date.now())
    if (shards.length === 0) return
    const latest = yield* repo.acquisitions(shards).pipe(Effect.timeout("1 second"))
    const cut = moves.judge(latest, Date.now())
    // Rare (a runner lost its shards), and what an operator reading a failover wants to see.
    if (cut > 0) yield* Effect.logInfo(`${cut} calls in flight to moved shards sent again to their new owners`)
  }).pipe(Effect.catchAllCause(() => Effect.void))
  yield* round.pipe(Effect.delay(MOVES_POLL), Effect.forever, Effect.forkScoped)
})).pipe(Layer.provide(RunnersRepo.Default))
