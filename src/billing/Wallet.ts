import { ClusterError, Entity, type Envelope } from "@effect/cluster"
import * as Rpc from "@effect/rpc/Rpc"
import { Cause, Chunk, Clock, Effect, Either, Exit, FiberSet, Layer, Metric, Option, Schedule } from "effect"
import type { Micros } from "../platform/Money.js"
import { makeEntityCaller } from "../platform/Cluster.js"
import { ShardFences } from "../platform/cluster/Fences.js"
import { timed, walletBatchSize, walletCommitDuration } from "../platform/telemetry/Metrics.js"
import { BillingConfig } from "./Config.js"
import {
  DAY_MS,
  type Decision,
  decideItems,
  type Item,
  Movement,
  WalletFailure
} from "./Decide.js"
import { type ChargeError, type ChargeRequest, Wallet } from "./WalletRpc.js"
import {
  type CommitOutcome,
  entryKey,
  type EntryInfo,
  type KeyedEntry,
  LedgerRepo,
  type WalletCommit,
  type WalletState
} from "./Repo.js"

export { Wallet } from "./WalletRpc.js"

type WalletRequest = Envelope.Request<
  | Rpc.Rpc<"Charge", any, any, any>
  | Rpc.Rpc<"Charges", any, any, any>
  | Rpc.Rpc<"Credit", any, any, any>
  | Rpc.Rpc<"Balance", any, any, any>
>

const itemsOf = (request: WalletRequest): ReadonlyArray<Item> => {
  const payload = request.payload as any
  switch (request.tag) {
    case "Charge":
      return [{ tag: "Charge", amount: payload.amount, entry: payload.entry, dailyCap: payload.dailyCap }]
    case "Charges":
      return (payload.charges as ReadonlyArray<ChargeRequest>).map((c): Item => ({
        tag: "Charge",
        amount: c.amount,
        entry: c.entry,
        dailyCap: c.dailyCap
      }))
    case "Credit":
      return [{ tag: "Credit", amount: payload.amount, entry: payload.entry }]
    default:
      return [{ tag: "Balance" }]
  }
}

const walletFailure = new WalletFailure({ message: "The wallet could not commit this request." })

/** How a wallet that could not be read is read again: 0.1 s doubling to 2 s apart, for as long as it takes. */
const RELOAD = Schedule.exponential("100 millis", 2).pipe(Schedule.union(Schedule.spaced("2 seconds")))


/** At most this many wallets, and about this many entries, in one shared statement. */
const MAX_WALLETS_PER_COMMIT = 512
const MAX_ENTRIES_PER_COMMIT = 4096

interface PendingCommit {
  readonly commit: WalletCommit
  readonly resume: (effect: Effect.Effect<CommitOutcome, unknown>) => void
  taken: boolean
}

/**
 * Group commit across wallets. Every wallet entity of this process hands its decided batch here; one fiber writes
 * whatever is waiting in ONE statement (`LedgerRepo.commitWallets`), one statement at a time, and hands each wallet
 * its own outcome. While a statement is in flight the next one fills up, so under load a statement carries the
 * batches of every busy wallet, and at rest a lone charge goes out at once.
 *
 * If the shared statement fails (the database refused something: a key another process took a moment earlier, a
 * balance past what a bigint holds), nothing of it was written; each wallet's batch is then tried alone, so the refusal fails
 * only the wallet it belongs to.
 */
export class WalletCommitter extends Effect.Service<WalletCommitter>()("atrium/billing/WalletCommitter", {
  scoped: Effect.gen(function*() {
    const repo = yield* LedgerRepo
    let queue: Array<PendingCommit> = []
    const ready = yield* Effect.makeLatch(false)

    /** The next statement's batches: at most one per wallet (a wallet waits for its outcome before it sends again). */
    const take = (): Array<PendingCommit> => {
      const taken: Array<PendingCommit> = []
      const rest: Array<PendingCommit> = []
      const wallets = new Set<string>()
      let entries = 0
      for (const pending of queue) {
        const fits = taken.length < MAX_WALLETS_PER_COMMIT &&
          (taken.length === 0 || entries + pending.commit.entries.length <= MAX_ENTRIES_PER_COMMIT)
        if (fits && !wallets.has(pending.commit.userId)) {
          pending.taken = true
          taken.push(pending)
          wallets.add(pending.commit.userId)
          entries += pending.commit.entries.length
        } else {
          rest.push(pending)
        }
      }
      queue = rest
      return taken
    }

    const write = (batch: ReadonlyArray<PendingCommit>) =>
      Effect.gen(function*() {
        yield* Metric.update(walletBatchSize, batch.length)
        const shared = yield* Effect.exit(repo.commitWallets(batch.map((p) => p.commit)).pipe(timed(walletCommitDuration)))
        if (Exit.isSuccess(shared)) {
          batch.forEach((p, i) => p.resume(Effect.succeed(shared.value[i]!)))
          return
        }
        if (batch.length === 1) {
          batch[0]!.resume(Effect.failCause(shared.cause))
          return
        }
        yield* Effect.logWarning("shared wallet commit failed; committing its wallets one by one", Cause.squash(shared.cause))
        for (const pending of batch) {
          const alone = yield* Effect.exit(repo.commitWallets([pending.commit]))
          pending.resume(Exit.isSuccess(alone) ? Effect.succeed(alone.value[0]!) : Effect.failCause(alone.cause))
        }
      })

    yield* Effect.gen(function*() {
      while (true) {
        yield* ready.await
        const batch = take()
        if (queue.length === 0) ready.unsafeClose()
        if (batch.length === 0) continue
        // Whatever happens to the statement, every wallet in it gets an answer.
        yield* write(batch).pipe(
          Effect.catchAllCause((cause) => Effect.sync(() => batch.forEach((p) => p.resume(Effect.failCause(cause))))),
          Effect.uninterruptible
        )
      }
    }).pipe(Effect.interruptible, Effect.forkScoped)

    return {
      /** Writes `commit` (with the batches of other wallets ready at the same time) and tells what became of it. */
      commit: (commit: WalletCommit): Effect.Effect<CommitOutcome, unknown> =>
        Effect.async<CommitOutcome, unknown>((resume) => {
          const pending: PendingCommit = { commit, resume, taken: false }
          queue.push(pending)
          ready.unsafeOpen()
          // A wallet interrupted before its batch was taken withdraws it; once taken, the outcome is the database's.
          return Effect.sync(() => {
            if (!pending.taken) queue = queue.filter((p) => p !== pending)
          })
        })
    } as const
  }),
  dependencies: [LedgerRepo.Default]
}) {}

export const WalletLive = Wallet.toLayerMailbox(
  Effect.gen(function*() {
    const address = yield* Entity.CurrentAddress
    const userId = address.entityId
    /**
     * The generation under which this runner holds the wallet's shard (fencing, migration 0017): every commit
     * carries it, and the database refuses it once another runner acquired the shard, so an owner that lost the
     * wallet (paused past its locks) cannot charge it.
     */
    const fences = yield* ShardFences
    let fence = yield* fences.takeFence(address.shardId)
    const repo = yield* LedgerRepo
    const committer = yield* WalletCommitter
    const config = yield* BillingConfig
    /**
     * The wallet as the ledger holds it. An SQL error here (the database restarting or stopped) is not the end of the
     * entity (issue 33: `orDie` killed it, and the requests it had taken were never answered): the load is tried
     * again with backoff, and while it fails no request is decided (those waiting are answered `WalletFailure`,
     * which the HTTP edge answers 503 with `Retry-After`).
     */
    const load = Effect.suspend(() => repo.load(userId, config.signupCredits)).pipe(
      Effect.catchAllDefect((defect) => Effect.fail(defect)),
      Effect.tapError((error) => Effect.logWarning(`wallet ${userId} could not be loaded; trying again`, error)),
      Effect.retry(RELOAD),
      // The schedule never ends: this is never reached.
      Effect.orDie
    )
    let state: WalletState = yield* load
    /** A failed batch left the state unknown: it is read again before anything else is decided. */
    let stale = false
    const reload = Effect.gen(function*() {
      state = yield* load
      stale = false
    })
    /** What each capped app charged today (UTC), loaded from the ledger the first time it charges with a cap each day. */
    let spentDay = -1
    const spentToday = new Map<string, Micros>()

    /**
     * Decides `items` in order against the state, with `prior` as the entries already in the ledger under their
     * keys (those replay). Pure apart from loading an app's spending of the day the first time it is capped.
     */
    const decide = (items: ReadonlyArray<Item>, prior: ReadonlyMap<string, KeyedEntry>) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const day = Math.floor(now / DAY_MS)
        if (day !== spentDay) {
          spentDay = day
          spentToday.clear()
        }
        for (const item of items) {
          if (item.tag === "Charge" && item.entry.appId !== null && item.dailyCap !== null && !spentToday.has(item.entry.appId)) {
            spentToday.set(item.entry.appId, yield* repo.spentWithApp(userId, item.entry.appId, new Date(day * DAY_MS)))
          }
        }

        return decideItems({ userId, state, items, prior, spentToday, now })
      })

    /**
     * Decides and commits `items` together; nothing is answered before the commit. The batch is decided as if none
     * of its keys had been used, and the commit looks them up in the same statement: when some were used, it writes
     * nothing for this wallet and names them, and the batch is decided again with them as replays. A charge refused
     * for the balance or the cap writes nothing, so its key is looked up on its own (a repeat of a charge made
     * earlier replays whatever the balance now). Each round knows strictly more keys, so this ends.
     */
    const settle = (items: ReadonlyArray<Item>) =>
      Effect.gen(function*() {
        const prior = new Map<string, KeyedEntry>()
        const looked = new Set<string>()
        while (true) {
          const { decisions, entries, next, refused, spent } = yield* decide(items, prior)
          const unseen = refused.filter((k) => !looked.has(entryKey(k.scope, k.key)))
          if (unseen.length > 0) {
            for (const k of unseen) looked.add(entryKey(k.scope, k.key))
            const found = yield* repo.findByKeys(unseen)
            if (found.size > 0) {
              for (const [id, entry] of found) prior.set(id, entry)
              continue
            }
          }
          if (entries.length > 0) {
            const outcome = yield* committer.commit({ userId, fence, fromSeq: state.seq, entries, next })
            if (outcome._tag === "Fenced") {
              // The shard has a newer generation. This runner's own, when it lost and re-acquired the shard (the
              // wallet is read again under it); else another runner owns it now: nothing of this batch is written,
              // and each request is answered as retryable (the client's retry with its key reaches the new owner).
              const now = fences.fenceOf(address.shardId)
              if (!fences.fenceCurrent(fence) && now !== null && now.generation !== "0" && now.generation !== fence?.generation) {
                yield* Effect.logWarning(`wallet ${userId}: its shard was acquired again (generation ${now.generation}); reloading`)
                fence = now
                state = yield* load
                spentToday.clear()
                spentDay = -1
                continue
              }
              yield* Effect.logWarning(`wallet ${userId}: this runner no longer owns its shard; the batch was refused`)
              return items.map((): Decision => ({ ok: false, error: walletFailure }))
            }
            if (outcome._tag === "Moved") {
              // Another runner wrote this wallet since it was loaded here: a shard hand-over in which the old owner
              // still committed. Its entries stand; this batch is decided again against them.
              yield* Effect.logWarning(`wallet ${userId} moved under its entity; reloading`)
              state = yield* load
              spentToday.clear()
              spentDay = -1
              continue
            }
            if (outcome._tag === "KeysUsed") {
              const before = prior.size
              for (const entry of outcome.known) prior.set(entryKey(entry.scope, entry.key), entry)
              if (prior.size === before) return yield* Effect.dieMessage(`wallet ${userId}: used keys reported twice`)
              continue
            }
          }
          state = next
          for (const [app, total] of spent) spentToday.set(app, total)
          return decisions
        }
      })

    /** Settles one item alone, after a failed batch: its own failure fails only itself. */
    const settleAlone = (item: Item) =>
      Effect.gen(function*() {
        const single = yield* Effect.exit(settle([item]))
        if (Exit.isSuccess(single)) return single.value[0]!
        // What the failed commit left is unknown until the wallet is read again (before its next decision).
        stale = true
        spentToday.clear()
        yield* Effect.logError("wallet request failed", single.cause)
        return { ok: false, error: walletFailure } satisfies Decision
      })

    return (mailbox, replier) =>
      Effect.gen(function*() {
        /** Answers `request` with the decisions of its items. */
        const reply = (request: WalletRequest, decisions: ReadonlyArray<Decision>) => {
          if (request.tag === "Charges") {
            return replier.succeed(
              request as any,
              decisions.map((d) => d.ok ? Either.right(d.value) : Either.left(d.error)) as any
            )
          }
          const decision = decisions[0]!
          return decision.ok ? replier.succeed(request as any, decision.value as any) : replier.fail(request as any, decision.error as any)
        }
        while (true) {
          if (stale) yield* reload
          const [chunk] = yield* mailbox.takeAll
          const requests = Chunk.toReadonlyArray(chunk) as ReadonlyArray<WalletRequest>
          if (requests.length === 0) continue
          const perRequest = requests.map(itemsOf)
          const items = perRequest.flat()
          const batch = yield* Effect.exit(settle(items))
          if (Exit.isSuccess(batch)) {
            let at = 0
            for (let i = 0; i < requests.length; i++) {
              const count = perRequest[i]!.length
              yield* reply(requests[i]!, batch.value.slice(at, at + count))
              at += count
            }
            continue
          }
          // The batch's transaction failed and rolled back. Start again from the database, and settle each item on
          // its own, so one item's failure (e.g. a key another user's wallet just took) fails only itself.
          yield* Effect.logWarning("wallet batch failed; settling one by one", Cause.squash(batch.cause))
          spentToday.clear()
          const fresh = yield* Effect.exit(Effect.orDie(repo.load(userId, config.signupCredits)))
          if (Exit.isFailure(fresh)) {
            // The database does not answer: every request of the batch is answered now (retryable), and the wallet
            // is read again, with backoff, before the next batch.
            stale = true
            for (let i = 0; i < requests.length; i++) {
              yield* reply(requests[i]!, perRequest[i]!.map((): Decision => ({ ok: false, error: walletFailure })))
            }
            continue
          }
          state = fresh.value
          for (let i = 0; i < requests.length; i++) {
            const decisions: Array<Decision> = []
            for (const item of perRequest[i]!) decisions.push(yield* settleAlone(item))
            yield* reply(requests[i]!, decisions)
          }
        }
      }) as Effect.Effect<never>
  }),
  { maxIdleTime: "5 minutes", mailboxCapacity: 10_000 }
).pipe(Layer.provide(WalletCommitter.Default), Layer.provide([LedgerRepo.Default, BillingConfig.Default]))

type ClusterFailure =
  | ClusterError.MailboxFull
  | ClusterError.AlreadyProcessingMessage
  | ClusterError.PersistenceError
  | WalletFailure

const isClusterFailure = (error: unknown): error is ClusterFailure =>
  error instanceof ClusterError.MailboxFull || error instanceof ClusterError.AlreadyProcessingMessage ||
  error instanceof ClusterError.PersistenceError || error instanceof WalletFailure

/** The cluster's own failures (a full mailbox, storage) and a commit that failed are not the caller's: defects, a 500. */
const orDieOnCluster = <A, E, R>(effect: Effect.Effect<A, E | ClusterFailure, R>): Effect.Effect<A, Exclude<E, ClusterFailure>, R> =>
  Effect.catchIf(effect, isClusterFailure, Effect.die) as Effect.Effect<A, Exclude<E, ClusterFailure>, R>

/** A charge waiting in its wallet's lane for the next `Charges` message. */
interface Waiting {
  readonly request: ChargeRequest
  readonly resume: (effect: Effect.Effect<Movement, ChargeError | ClusterFailure>) => void
  cancelled: boolean
}

/** The charges this process has for one wallet: at most one `Charges` message on its way, the rest waiting. */
interface Lane {
  inFlight: boolean
  waiting: Array<Waiting>
}

/**
 * What the rest of the platform calls: the wallet of a user, wherever in the cluster it lives.
 *
 * Charges go out as `Charges` messages, one at a time per wallet from this process: a charge for a wallet with no
 * message on its way leaves at once (alone), and the charges that arrive meanwhile leave together when the answer
 * comes back. The entity decides them in order, as if each had been sent alone; each caller gets its own answer, and
 * only after the commit. A hot wallet thus costs one cluster message per batch instead of one per charge.
 */
export class Wallets extends Effect.Service<Wallets>()("atrium/billing/Wallets", {
  scoped: Effect.gen(function*() {
    const makeClient = yield* Wallet.client
    const clients = new Map<string, ReturnType<typeof makeClient>>()
    /** The client of one wallet (an address and a proxy): made once per wallet, not per call. */
    const client = (userId: string) => {
      let c = clients.get(userId)
      if (c === undefined) {
        if (clients.size >= 10_000) clients.clear()
        c = makeClient(userId)
        clients.set(userId, c)
      }
      return c
    }
    // Every message goes through `toEntity` (charges from a lane's own fiber, `runFork`): never from the caller's
    // fiber, so an active wallet does not keep the request that woke it alive (see makeEntityCaller).
    const runFork = yield* FiberSet.makeRuntime<never>()
    const toEntity = yield* makeEntityCaller
    const lanes = new Map<string, Lane>()

    /**
     * Sends what waits in `lane` as one message; when it is answered, sends what arrived meanwhile. A message cut by
     * a hand-over (the wallet's shard moved, or its runner lost its shard locks) is sent again with the same charges
     * (`resendWhenCut`): each carries its key, so one the wallet did commit is answered from the ledger, not charged
     * twice.
     */
    const send = (userId: string, lane: Lane) => {
      const batch = lane.waiting.filter((w) => !w.cancelled)
      lane.waiting = []
      if (batch.length === 0) {
        lanes.delete(userId)
        return
      }
      lane.inFlight = true
      runFork(
        toEntity(client(userId).Charges({ charges: batch.map((w) => w.request) }), { resendWhenCut: true }).pipe(
          // On any exit, interruption included: every charge of the batch gets an answer and the lane moves on.
          Effect.onExit((exit) =>
            Effect.sync(() => {
              if (Exit.isSuccess(exit)) {
                batch.forEach((w, i) => {
                  const result = exit.value[i]
                  w.resume(
                    result === undefined
                      ? Effect.dieMessage("the wallet answered fewer charges than it was sent")
                      : Either.isRight(result)
                      ? Effect.succeed(result.right)
                      : Effect.fail(result.left)
                  )
                })
              } else {
                const failure = Cause.failureOption(exit.cause)
                for (const w of batch) {
                  w.resume(Option.isSome(failure) ? Effect.fail(failure.value) : Effect.failCause(exit.cause as Cause.Cause<never>))
                }
              }
              lane.inFlight = false
              send(userId, lane)
            })
          )
        )
      )
    }

    const noEvent = { appId: null, event: null, metadata: null, description: null }
    return {
      charge: (userId: string, amount: Micros, entry: Partial<EntryInfo> & Pick<EntryInfo, "kind" | "scope" | "key">, dailyCap: Micros | null = null) =>
        Effect.async<Movement, ChargeError | ClusterFailure>((resume) => {
          const waiting: Waiting = { request: { amount, entry: { ...noEvent, ...entry }, dailyCap }, resume, cancelled: false }
          let lane = lanes.get(userId)
          if (lane === undefined) {
            lane = { inFlight: false, waiting: [] }
            lanes.set(userId, lane)
          }
          lane.waiting.push(waiting)
          if (!lane.inFlight) send(userId, lane)
          // A caller that gives up before its charge left takes it back; once sent, the wallet decides it.
          return Effect.sync(() => {
            waiting.cancelled = true
          })
        }).pipe(orDieOnCluster),
      credit: (userId: string, amount: Micros, entry: Partial<EntryInfo> & Pick<EntryInfo, "kind" | "scope" | "key">) =>
        toEntity(client(userId).Credit({ amount, entry: { ...noEvent, ...entry } }), { resendWhenCut: true }).pipe(
          orDieOnCluster,
          Effect.withSpan("Wallets.credit")
        ),
      balance: (userId: string) =>
        toEntity(client(userId).Balance(), { resendWhenCut: true }).pipe(
          Effect.map((reply) => reply.balance),
          orDieOnCluster
        )
    } as const
  })
}) {}
