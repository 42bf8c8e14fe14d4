import { UserId } from "../platform/Ids.js"
import { Entity, type Envelope } from "@effect/cluster"
import { Cause, Chunk, Clock, Effect, Either, Exit, Layer, Schedule } from "effect"
import { ShardFences } from "../platform/cluster/Fences.js"
import type { Micros } from "../platform/Money.js"
import { WalletCommitter } from "./Committer.js"
import { BillingConfig } from "./Config.js"
import { DAY_MS, type Decision, decideItems, type Item, type Refusal } from "./Decide.js"
import { entryKey, type KeyedEntry, LedgerRepo, type WalletState } from "./Repo.js"
import { type ChargeError, type ChargeRequest, Wallet, type WalletRpcs } from "./WalletRpc.js"
import type { Movement } from "./Domain.js"
import { WalletFailure } from "./Domain.js"

type WalletRequest = Envelope.Request<WalletRpcs>

const chargeItem = (c: ChargeRequest, hold?: string): Item => ({
  tag: "Charge",
  amount: c.amount,
  entry: c.entry,
  dailyCap: c.dailyCap,
  fence: c.fence ?? null,
  ...(hold === undefined ? {} : { hold })
})

/**
 * The items a request asks for, told apart by its payload (the envelope's `tag` does not narrow it). A hold lives
 * `ttlMs` from when it was last asked for.
 */
const itemsOf = (request: WalletRequest, ttlMs: number): ReadonlyArray<Item> => {
  const payload = request.payload
  if (payload === undefined || payload === null) return [{ tag: "Balance" }]
  // A settle voids the hold first, then posts its charges: they may use what the hold reserved. A final one (the cut
  // run's next owner) keeps its run's late settles from posting for as long as a hold lives.
  if ("hold" in payload && "charges" in payload) {
    return [
      { tag: "Release", hold: payload.hold, final: payload.final === true, ttlMs },
      ...payload.charges.map((c) => chargeItem(c, payload.hold))
    ]
  }
  if ("hold" in payload) return [{ tag: "Hold", hold: payload.hold, amount: payload.amount, ttlMs }]
  if ("charges" in payload) return payload.charges.map((c) => chargeItem(c))
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

/** At most this many requests decided (and committed) together. */
const MAX_REQUESTS_PER_BATCH = 4096

/** How a wallet that could not be read is read again: 0.1 s doubling to 2 s apart, for as long as it takes. */
const RELOAD = Schedule.exponential("100 millis", 2).pipe(Schedule.union(Schedule.spaced("2 seconds")))

/**
 * The wallet entity's behaviour (its contract is `WalletRpc.ts`). It takes its requests in batches: every request
 * that arrived while the previous batch committed is decided in order against the in-memory state (`decideItems`),
 * then the batch is written by the group commit (`WalletCommitter`), and only then answered. Every request is a
 * cluster message, the same way in from this runner and from another (issue 45 item 1: the wallet has one entrance;
 * a message to an entity of this runner is delivered into its mailbox without encoding, `platform/Cluster.ts`).
 */
export const WalletLive = Wallet.toLayerMailbox(
  Effect.gen(function*() {
    const address = yield* Entity.CurrentAddress
    const userId = UserId.unchecked.make(address.entityId)
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
    /** Holds their run's next owner voided (`Settle.final`), until when: in memory only (`DecideInput.voided`). */
    let voided: ReadonlyMap<string, number> = new Map()
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
        return decideItems({ userId, state, items, prior, spentToday, now, staleCallers, voided })
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
          const { decisions, entries, holds, next, refused, spent, voided: closed } = yield* decide(items, prior, staleCallers)
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
          if (closed !== undefined) voided = closed
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
        // Every request that arrived while the previous batch was decided and committed is taken at once.
        while (true) {
          const [chunk, done] = yield* mailbox.takeAll
          const requests = Chunk.toReadonlyArray(chunk)
          for (let from = 0; from < requests.length; from += MAX_REQUESTS_PER_BATCH) {
            const batch = requests.slice(from, from + MAX_REQUESTS_PER_BATCH)
            const decisions = yield* handle(batch.map((request) => itemsOf(request, holdTtlMs)))
            for (let i = 0; i < batch.length; i++) yield* reply(batch[i]!)(decisions[i]!)
          }
          // An ended mailbox brings nothing more (the entity is stopping): wait to be interrupted, do not spin.
          if (done) return yield* Effect.never
        }
      })
    }
  }),
  { maxIdleTime: "5 minutes", mailboxCapacity: 10_000 }
).pipe(Layer.provide(WalletCommitter.Default), Layer.provide([LedgerRepo.Default, BillingConfig.Default]))
