import { Entity, type Envelope } from "@effect/cluster"
import { Cause, Chunk, Clock, Duration, Effect, Either, Exit, Layer, Option, Queue, Schedule } from "effect"
import { ENTITY_DEADLINE } from "../platform/Cluster.js"
import { ShardFences } from "../platform/cluster/Fences.js"
import type { Micros } from "../platform/Money.js"
import { EntityDeadline } from "../platform/Outage.js"
import { WalletCommitter } from "./Committer.js"
import { BillingConfig } from "./Config.js"
import { DAY_MS, type Decision, decideItems, type Item, type Refusal } from "./Decide.js"
import { entryKey, type KeyedEntry, LedgerRepo, type WalletState } from "./Repo.js"
import { type LocalWallet, LocalWallets } from "./LocalWallets.js"
import { type ChargeError, type ChargeRequest, Wallet, type WalletRpcs } from "./WalletRpc.js"
import type { Movement } from "./Domain.js"
import { WalletFailure } from "./Domain.js"

type WalletRequest = Envelope.Request<WalletRpcs>

const chargeItem = (c: ChargeRequest): Item => ({ tag: "Charge", amount: c.amount, entry: c.entry, dailyCap: c.dailyCap, fence: c.fence ?? null })

/**
 * The items a request asks for, told apart by its payload (the envelope's `tag` does not narrow it). A hold lives
 * `ttlMs` from when it was last asked for.
 */
const itemsOf = (request: WalletRequest, ttlMs: number): ReadonlyArray<Item> => {
  const payload = request.payload
  if (payload === undefined || payload === null) return [{ tag: "Balance" }]
  // A settle voids the hold first, then posts its charges: they may use what the hold reserved.
  if ("hold" in payload && "charges" in payload) return [{ tag: "Release", hold: payload.hold }, ...payload.charges.map(chargeItem)]
  if ("hold" in payload) return [{ tag: "Hold", hold: payload.hold, amount: payload.amount, ttlMs }]
  if ("charges" in payload) return payload.charges.map(chargeItem)
  return [{ tag: "Credit", amount: payload.amount, entry: payload.entry }]
}

const walletFailure = new WalletFailure({ message: "The wallet could not commit this request." })

/**
 * The answers on the wire. `decideItems` answers each item by its kind: a charge or a credit with a movement or a
 * refusal, a balance with the balance. The narrowings below state that; their other branches are never taken.
 */
const movement = (d: Decision): Either.Either<Movement, Refusal | WalletFailure> =>
  !d.ok ? Either.left(d.error) : "replay" in d.value ? Either.right(d.value) : Either.left(walletFailure)
/** Only a credit is refused as invalid input. */
const chargeError = (error: Refusal | WalletFailure): ChargeError => error._tag === "InvalidRequest" ? walletFailure : error
/** Only a charge is refused for the balance or a cap. */
const creditError = (error: Refusal | WalletFailure) =>
  error._tag === "InsufficientCredits" || error._tag === "DailyCapExceeded" || error._tag === "StaleOwner" ? walletFailure : error

const chargeAnswer = (d: Decision) => Either.mapLeft(movement(d), chargeError)

/** A balance's decision carries the balance; a failed one, the wallet's failure. */
const balanceAnswer = (d: Decision): Either.Either<bigint, WalletFailure> =>
  d.ok && "balance" in d.value ? Either.right(d.value.balance) : Either.left(walletFailure)
/** A balance's or a hold's decision, with what the wallet holds (and, for a hold, when it expires). */
const heldAnswer = (d: Decision): Either.Either<{ balance: bigint; held: bigint; hold: bigint; expiresAt: number }, WalletFailure> =>
  d.ok && "held" in d.value
    ? Either.right({
      balance: d.value.balance,
      held: d.value.held,
      hold: "hold" in d.value ? d.value.hold : 0n,
      expiresAt: "expiresAt" in d.value ? d.value.expiresAt : 0
    })
    : Either.left(walletFailure)

/** A request waiting for the wallet: its items, and how their decisions reach the asker. */
interface Job {
  readonly items: ReadonlyArray<Item>
  readonly answer: (decisions: ReadonlyArray<Decision>) => Effect.Effect<void>
}

/** How long a local caller waits at most: as long as a message (`makeEntityCaller`). */
const DEADLINE_MS = Duration.toMillis(ENTITY_DEADLINE)
const DEADLINE_TEXT = Duration.format(ENTITY_DEADLINE)

/** At most this many requests decided (and committed) together. */
const MAX_JOBS_PER_BATCH = 4096

/** How often a wallet charged only by local callers gets a charge as a cluster message (its `maxIdleTime` is 5 min). */
const MESSAGE_EVERY = 60_000

/** How a wallet that could not be read is read again: 0.1 s doubling to 2 s apart, for as long as it takes. */
const RELOAD = Schedule.exponential("100 millis", 2).pipe(Schedule.union(Schedule.spaced("2 seconds")))

/**
 * The wallet entity's behaviour (its contract is `WalletRpc.ts`). It takes its requests in batches: every request
 * that arrived while the previous batch committed is decided in order against the in-memory state (`decideItems`),
 * then the batch is written by the group commit (`WalletCommitter`), and only then answered. The requests are the
 * mailbox's messages and the charges this runner's own callers bring directly (`LocalWallets`, issue 28 item 4):
 * both are decided and committed the same way, under the same fence and keys.
 */
export const WalletLive = Wallet.toLayerMailbox(
  Effect.gen(function*() {
    const address = yield* Entity.CurrentAddress
    const userId = address.entityId
    /**
     * This runner's fences (migration 0017), the one place the wallet touches them. The generation under which this
     * runner holds the wallet's shard: every commit carries it, and the database refuses it once another runner
     * acquired the shard, so an owner that lost the wallet (paused past its locks) cannot charge it.
     */
    const fences = yield* ShardFences
    let fence = yield* fences.takeFence(address.shardId)
    /** The fence to take after a `Fenced` commit: this runner's newer one when it re-acquired the shard, else none. */
    const reacquired = () => {
      const now = fences.fenceOf(address.shardId)
      return !fences.fenceCurrent(fence) && now !== null && now.generation !== "0" && now.generation !== fence?.generation
        ? now
        : undefined
    }
    /** Whether this runner still holds the shard under the generation the wallet was read with. */
    const current = () => fences.fenceCurrent(fence)

    const repo = yield* LedgerRepo
    const committer = yield* WalletCommitter
    const config = yield* BillingConfig
    const holdTtlMs = config.holdTtlSeconds * 1000
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
    /** What each capped app charged today (UTC), loaded from the ledger the first time it charges with a cap each day. */
    let spentDay = -1
    const spentToday = new Map<string, Micros>()
    const reload = Effect.gen(function*() {
      state = yield* load
      stale = false
      spentToday.clear()
      spentDay = -1
    })

    /**
     * Decides `items` in order against the state, with `prior` as the entries already in the ledger under their
     * keys (those replay). Pure apart from loading an app's spending of the day the first time it is capped.
     */
    const decide = (items: ReadonlyArray<Item>, prior: ReadonlyMap<string, KeyedEntry>, staleCallers: ReadonlySet<string>) =>
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
        return decideItems({ userId, state, items, prior, spentToday, now, staleCallers })
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
        /** Charges whose caller's fence the commit refused: decided again as refused (`StaleOwner`). */
        const staleCallers = new Set<string>()
        while (true) {
          const { decisions, entries, holds, next, refused, spent } = yield* decide(items, prior, staleCallers)
          const unseen = refused.filter((k) => !looked.has(entryKey(k.scope, k.key)))
          if (unseen.length > 0) {
            for (const k of unseen) looked.add(entryKey(k.scope, k.key))
            const found = yield* repo.findByKeys(unseen)
            if (found.size > 0) {
              for (const [id, entry] of found) prior.set(id, entry)
              continue
            }
          }
          // A batch that only placed, changed or voided holds is written too: a hold is answered only once durable.
          if (entries.length > 0 || holds.length > 0) {
            const outcome = yield* committer.commit({ userId, fence, fromSeq: state.seq, entries, next, holds })
            if (outcome._tag === "Fenced") {
              // The shard has a newer generation. This runner's own, when it lost and re-acquired the shard (the
              // wallet is read again under it); else another runner owns it now: nothing of this batch is written,
              // and each request is answered as retryable (the client's retry with its key reaches the new owner).
              const newer = reacquired()
              if (newer !== undefined) {
                yield* Effect.logWarning(`wallet ${userId}: its shard was acquired again (generation ${newer.generation}); reloading`)
                fence = newer
                yield* reload
                continue
              }
              yield* Effect.logWarning(`wallet ${userId}: this runner no longer owns its shard; the batch was refused`)
              return items.map((): Decision => ({ ok: false, error: walletFailure }))
            }
            if (outcome._tag === "Moved") {
              // Another runner wrote this wallet since it was loaded here: a shard hand-over in which the old owner
              // still committed. Its entries stand; this batch is decided again against them.
              yield* Effect.logWarning(`wallet ${userId} moved under its entity; reloading`)
              yield* reload
              continue
            }
            if (outcome._tag === "StaleCallers") {
              // The sessions these charges were made for have a newer owner (issue 42 item 7): a stale runner's turn
              // bills nothing. The rest of the batch is decided again without them.
              const before = staleCallers.size
              for (const k of outcome.keys) staleCallers.add(entryKey(k.scope, k.key))
              if (staleCallers.size === before) return yield* Effect.dieMessage(`wallet ${userId}: stale callers reported twice`)
              yield* Effect.logWarning(`wallet ${userId}: refused ${outcome.keys.length} charge(s) from a runner that lost their session`)
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

    /**
     * The decisions on a batch of requests (the items of each), one list per request. A batch whose commit failed
     * (and rolled back) is settled again from the database, item by item, so one item's failure (e.g. a key another
     * user's wallet just took) fails only itself.
     */
    const handle = (requests: ReadonlyArray<ReadonlyArray<Item>>) =>
      Effect.gen(function*() {
        if (stale) yield* reload
        const batch = yield* Effect.exit(settle(requests.flat()))
        if (Exit.isSuccess(batch)) {
          let at = 0
          return requests.map((items) => batch.value.slice(at, at += items.length))
        }
        yield* Effect.logWarning("wallet batch failed; settling one by one", Cause.squash(batch.cause))
        spentToday.clear()
        const fresh = yield* Effect.exit(Effect.orDie(repo.load(userId, config.signupCredits)))
        if (Exit.isFailure(fresh)) {
          // The database does not answer: every request of the batch is answered now (retryable), and the wallet
          // is read again, with backoff, before the next batch.
          stale = true
          return requests.map((items) => items.map((): Decision => ({ ok: false, error: walletFailure })))
        }
        state = fresh.value
        return yield* Effect.forEach(requests, (items) => Effect.forEach(items, settleAlone))
      })

    /**
     * The requests waiting for the wallet, in arrival order: the mailbox's (cluster messages) and the charges of this
     * runner's own callers (`LocalWallets`), decided together by one loop.
     */
    const jobs = yield* Queue.unbounded<Job>()
    /** The local callers not answered yet, each with how to tell it: answered `None` (send again) if the entity stops. */
    const unanswered = new Map<Job, (answer: Effect.Effect<Option.Option<ReadonlyArray<Decision>>>) => void>()
    let open = true
    /** When the mailbox last brought a message (the cluster's clock for passivating an idle entity). */
    let lastMessageAt = Date.now()

    /**
     * A local caller's request costs a queue slot and a callback: no fiber, no message. Its wait is bounded like a
     * message's (`ENTITY_DEADLINE`, then `EntityDeadline`: 503), by one timer.
     */
    const ask = (items: ReadonlyArray<Item>) =>
      Effect.async<Option.Option<ReadonlyArray<Decision>>>((resume) => {
        // The cluster passivates an entity that got no message for `maxIdleTime`, however busy its local callers
        // keep it; so now and then a request goes as a message instead, which tells the cluster it is in use.
        if (!open || !current() || Date.now() - lastMessageAt > MESSAGE_EVERY) return resume(Effect.succeedNone)
        const job: Job = {
          items,
          answer: (decisions) =>
            Effect.sync(() => {
              if (!unanswered.delete(job)) return
              clearTimeout(timer)
              resume(Effect.succeed(Option.some(decisions)))
            })
        }
        const timer = setTimeout(() => {
          if (unanswered.delete(job)) resume(Effect.die(new EntityDeadline({ message: `No answer from the wallet within ${DEADLINE_TEXT}.` })))
        }, DEADLINE_MS)
        unanswered.set(job, resume)
        jobs.unsafeOffer(job)
      })
    const local: LocalWallet = {
      charge: (charges) => Effect.map(ask(charges.map(chargeItem)), Option.map((decisions) => decisions.map(chargeAnswer))),
      balance: Effect.map(ask([{ tag: "Balance" }]), Option.map(([decision]) => balanceAnswer(decision!)))
    }
    const localWallets = yield* LocalWallets
    localWallets.byUser.set(userId, local)
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        open = false
        if (localWallets.byUser.get(userId) === local) localWallets.byUser.delete(userId)
        for (const resume of unanswered.values()) resume(Effect.succeedNone)
        unanswered.clear()
      })
    )

    return (mailbox, replier) => {
      /** Answers `request` with the decisions on its items. */
      const reply = (request: WalletRequest) => (decisions: ReadonlyArray<Decision>) => {
        const first = decisions[0]!
        switch (request.tag) {
          case "Charges":
            return replier.succeed(request, decisions.map(chargeAnswer))
          case "Credit":
            return Either.match(movement(first), {
              onLeft: (error) => replier.fail(request, creditError(error)),
              onRight: (value) => replier.succeed(request, value)
            })
          case "Balance":
            return Either.match(heldAnswer(first), {
              onLeft: (error) => replier.fail(request, error),
              onRight: ({ balance, held }) => replier.succeed(request, { balance, held })
            })
          case "Hold":
            return Either.match(heldAnswer(first), {
              onLeft: (error) => replier.fail(request, error),
              onRight: (value) => replier.succeed(request, value)
            })
          case "Settle":
            // The first decision is the release; the rest answer the charges, in order.
            return replier.succeed(request, decisions.slice(1).map(chargeAnswer))
        }
      }
      return Effect.gen(function*() {
        // The mailbox's requests join the local callers' in the one queue the wallet decides from.
        yield* Effect.fork(Effect.gen(function*() {
          while (true) {
            const [chunk, done] = yield* mailbox.takeAll
            lastMessageAt = Date.now()
            yield* Queue.offerAll(jobs, Chunk.map(chunk, (request): Job => ({ items: itemsOf(request, holdTtlMs), answer: reply(request) })))
            if (done) return
          }
        }))
        while (true) {
          const batch = Chunk.toReadonlyArray(yield* Queue.takeBetween(jobs, 1, MAX_JOBS_PER_BATCH))
          const decisions = yield* handle(batch.map((job) => job.items))
          for (let i = 0; i < batch.length; i++) yield* batch[i]!.answer(decisions[i]!)
        }
      })
    }
  }),
  { maxIdleTime: "5 minutes", mailboxCapacity: 10_000 }
).pipe(Layer.provide([WalletCommitter.Default, LocalWallets.Default]), Layer.provide([LedgerRepo.Default, BillingConfig.Default]))
