import { ClusterError, Entity, type Envelope } from "@effect/cluster"
import { HttpApiSchema } from "@effect/platform"
import { Rpc } from "@effect/rpc"
import { Cause, Chunk, Clock, Effect, Exit, Layer, Schema } from "effect"
import type { Micros } from "../platform/Money.js"
import { BillingConfig } from "./Config.js"
import { entryKey, type EntryInfo, type KeyedEntry, LedgerRepo, type NewEntry, type WalletState } from "./Repo.js"

export class InsufficientCredits extends Schema.TaggedError<InsufficientCredits>()(
  "InsufficientCredits",
  { message: Schema.String },
  HttpApiSchema.annotations({ status: 402 })
) {}

export class DailyCapExceeded extends Schema.TaggedError<DailyCapExceeded>()(
  "DailyCapExceeded",
  { message: Schema.String, retry_after: Schema.Int },
  HttpApiSchema.annotations({ status: 429 })
) {}

/** The key was already used for another user's entry: replaying it would show them someone else's balance. */
export class IdempotencyConflict extends Schema.TaggedError<IdempotencyConflict>()(
  "IdempotencyConflict",
  { message: Schema.String },
  HttpApiSchema.annotations({ status: 409 })
) {}

/**
 * The wallet could not commit this request (the database refused or failed it). Answered as a failure, not a
 * defect: the cluster treats a defect as the entity's crash, restarts it and delivers the same request again, so one
 * request the database always refuses would restart the wallet forever and never be answered. The caller turns it
 * into a 500.
 */
export class WalletFailure extends Schema.TaggedError<WalletFailure>()(
  "WalletFailure",
  { message: Schema.String }
) {}

const Entry = Schema.Struct({
  kind: Schema.String,
  scope: Schema.String,
  key: Schema.String,
  appId: Schema.NullOr(Schema.String),
  event: Schema.NullOr(Schema.String),
  metadata: Schema.NullOr(Schema.Record({ key: Schema.String, value: Schema.String })),
  description: Schema.NullOr(Schema.String)
})

/** The outcome of a charge or a credit: `replay` when the key had been used before and nothing moved. */
export const Movement = Schema.Struct({ amount: Schema.BigInt, balance: Schema.BigInt, replay: Schema.Boolean })
export type Movement = typeof Movement.Type

/** Takes `amount` from the wallet, unless the balance (or the app's daily cap) cannot cover it. */
const Charge = Rpc.make("Charge", {
  payload: { amount: Schema.BigInt, entry: Entry, dailyCap: Schema.NullOr(Schema.BigInt) },
  success: Movement,
  error: Schema.Union(InsufficientCredits, DailyCapExceeded, IdempotencyConflict, WalletFailure)
})

/** Adds `amount`: grants, top-ups, earnings. */
const Credit = Rpc.make("Credit", {
  payload: { amount: Schema.BigInt, entry: Entry },
  success: Movement,
  error: Schema.Union(IdempotencyConflict, WalletFailure)
})

const Balance = Rpc.make("Balance", { success: Schema.Struct({ balance: Schema.BigInt }) })

/**
 * One user's wallet as an `@effect/cluster` entity (entity id = user id): exactly one instance in the cluster owns
 * the balance and is the only writer, which is what makes strong consistency cheap. It takes its mailbox in batches:
 * every request that arrived while the previous batch committed is decided in order against the in-memory balance,
 * then all of them are written in ONE transaction (group commit), and only then answered. A hot wallet therefore
 * pays one commit per batch, not per charge.
 */
export const Wallet = Entity.make("Wallet", [Charge, Credit, Balance])

type WalletRequest = Envelope.Request<Rpc.Rpc<"Charge", any, any, any> | Rpc.Rpc<"Credit", any, any, any> | Rpc.Rpc<"Balance", any, any, any>>
type Decision = Exit.Exit<Movement | { readonly balance: Micros }, InsufficientCredits | DailyCapExceeded | IdempotencyConflict>

const DAY_MS = 86_400_000

export const WalletLive = Wallet.toLayerMailbox(
  Effect.gen(function*() {
    const address = yield* Entity.CurrentAddress
    const userId = address.entityId
    const repo = yield* LedgerRepo
    const config = yield* BillingConfig
    let state: WalletState = yield* repo.load(userId, config.signupCredits)
    /** What each capped app charged today (UTC), loaded from the ledger the first time it charges with a cap each day. */
    let spentDay = -1
    const spentToday = new Map<string, Micros>()

    const decide = Effect.fn("Wallet.decide")(function*(requests: ReadonlyArray<WalletRequest>) {
      const now = yield* Clock.currentTimeMillis
      const day = Math.floor(now / DAY_MS)
      if (day !== spentDay) {
        spentDay = day
        spentToday.clear()
      }
      const keyed = requests.filter((r) => r.tag !== "Balance").map((r) => (r.payload as { entry: EntryInfo }).entry)
      const known = yield* repo.findByKeys(keyed)
      for (const request of requests) {
        const appId = request.tag === "Charge" ? (request.payload.entry as EntryInfo).appId : null
        if (appId !== null && request.payload.dailyCap !== null && !spentToday.has(appId)) {
          spentToday.set(appId, yield* repo.spentWithApp(userId, appId, new Date(day * DAY_MS)))
        }
      }

      let balance = state.balance
      let seq = state.seq
      const spent = new Map(spentToday)
      const entries: Array<NewEntry> = []
      const decisions: Array<Decision> = []
      const createdAt = new Date(now)

      const replayOf = (prior: KeyedEntry): Decision =>
        prior.userId !== userId
          ? Exit.fail(new IdempotencyConflict({ message: `The idempotency key "${prior.key}" was already used for another user.` }))
          : Exit.succeed({ amount: prior.amount < 0n ? -prior.amount : prior.amount, balance: prior.balanceAfter, replay: true })

      for (const request of requests) {
        if (request.tag === "Balance") {
          decisions.push(Exit.succeed({ balance }))
          continue
        }
        const { amount, entry } = request.payload as { amount: Micros; entry: EntryInfo }
        const id = entryKey(entry.scope, entry.key)
        const prior = known.get(id)
        if (prior !== undefined) {
          decisions.push(replayOf(prior))
          continue
        }
        let signed = amount
        if (request.tag === "Charge") {
          const cap = request.payload.dailyCap as Micros | null
          const appSpent = entry.appId === null ? 0n : (spent.get(entry.appId) ?? 0n)
          if (cap !== null && appSpent + amount > cap) {
            decisions.push(Exit.fail(new DailyCapExceeded({
              message: "This app reached its daily spending cap for you; it resets at 00:00 UTC.",
              retry_after: Math.ceil(((day + 1) * DAY_MS - now) / 1000)
            })))
            continue
          }
          if (balance < amount) {
            decisions.push(Exit.fail(new InsufficientCredits({ message: "Not enough credits for this charge." })))
            continue
          }
          // Only an app whose day was loaded from the ledger is counted on here: starting an untracked app at 0
          // would forget what it charged before this entity woke, and a cap set later would be overshot. An
          // untracked app's total is read from the ledger (which holds this charge by then) when a cap appears.
          if (entry.appId !== null && spent.has(entry.appId)) spent.set(entry.appId, appSpent + amount)
          signed = -amount
        }
        balance += signed
        seq += 1n
        entries.push({ ...entry, seq, amount: signed, balanceAfter: balance, createdAt })
        // A second request with the same key in this batch replays the first.
        known.set(id, { userId, scope: entry.scope, key: entry.key, amount: signed, balanceAfter: balance })
        decisions.push(Exit.succeed({ amount, balance, replay: false }))
      }
      return { entries, decisions, next: { balance, seq } satisfies WalletState, spent }
    })

    /** Decides and commits `requests` together; nothing is answered before the commit. */
    const settle = (requests: ReadonlyArray<WalletRequest>) =>
      Effect.gen(function*() {
        const { decisions, entries, next, spent } = yield* decide(requests)
        if (entries.length > 0) yield* repo.commit(userId, state.seq, entries, next)
        state = next
        for (const [app, total] of spent) spentToday.set(app, total)
        return decisions
      })

    return (mailbox, replier) =>
      Effect.gen(function*() {
        const reply = (request: WalletRequest, decision: Decision) =>
          replier.complete(request as any, decision as any)
        while (true) {
          const [chunk] = yield* mailbox.takeAll
          const requests = Chunk.toReadonlyArray(chunk) as ReadonlyArray<WalletRequest>
          if (requests.length === 0) continue
          const batch = yield* Effect.exit(settle(requests))
          if (Exit.isSuccess(batch)) {
            yield* Effect.forEach(requests, (request, i) => reply(request, batch.value[i]!), { discard: true })
            continue
          }
          // The batch's transaction failed and rolled back. Start again from the database, and settle each request
          // on its own, so one request's failure (e.g. a key another user's wallet just took) fails only itself.
          yield* Effect.logWarning("wallet batch failed; settling one by one", Cause.squash(batch.cause))
          state = yield* repo.load(userId, config.signupCredits)
          spentToday.clear()
          for (const request of requests) {
            const single = yield* Effect.exit(settle([request]))
            if (Exit.isSuccess(single)) {
              yield* reply(request, single.value[0]!)
            } else {
              state = yield* repo.load(userId, config.signupCredits)
              spentToday.clear()
              yield* Effect.logError("wallet request failed", single.cause)
              yield* replier.fail(request as any, new WalletFailure({ message: "The wallet could not commit this request." }))
            }
          }
        }
      }) as Effect.Effect<never>
  }),
  { maxIdleTime: "5 minutes", mailboxCapacity: 10_000 }
).pipe(Layer.provide([LedgerRepo.Default, BillingConfig.Default]))

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

/** What the rest of the platform calls: the wallet of a user, wherever in the cluster it lives. */
export class Wallets extends Effect.Service<Wallets>()("atrium/billing/Wallets", {
  effect: Effect.gen(function*() {
    const client = yield* Wallet.client
    const noEvent = { appId: null, event: null, metadata: null, description: null }
    return {
      charge: (userId: string, amount: Micros, entry: Partial<EntryInfo> & Pick<EntryInfo, "kind" | "scope" | "key">, dailyCap: Micros | null = null) =>
        client(userId).Charge({ amount, entry: { ...noEvent, ...entry }, dailyCap }).pipe(
          orDieOnCluster,
          Effect.withSpan("Wallets.charge")
        ),
      credit: (userId: string, amount: Micros, entry: Partial<EntryInfo> & Pick<EntryInfo, "kind" | "scope" | "key">) =>
        client(userId).Credit({ amount, entry: { ...noEvent, ...entry } }).pipe(
          orDieOnCluster,
          Effect.withSpan("Wallets.credit")
        ),
      balance: (userId: string) =>
        client(userId).Balance().pipe(
          Effect.map((reply) => reply.balance),
          orDieOnCluster
        )
    } as const
  })
}) {}
