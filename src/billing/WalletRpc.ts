import { AppId } from "../platform/Ids.js"
import * as ClusterSchema from "@effect/cluster/ClusterSchema"
import * as Entity from "@effect/cluster/Entity"
import * as Rpc from "@effect/rpc/Rpc"
import { Schema } from "effect"
import { InvalidRequest } from "../platform/Errors.js"
import { DailyCapExceeded, IdempotencyConflict, InsufficientCredits, Movement, StaleOwner, WalletFailure } from "./Domain.js"

/**
 * The wallet entity's contract (docs/architecture.md, "Contracts"): its RPCs and their schemas, apart from the
 * entity's implementation (`WalletEntity.ts`), as Effect-TS/discord-bot keeps entity contracts apart from their runners.
 */

const Entry = Schema.Struct({
  kind: Schema.String,
  scope: Schema.String,
  key: Schema.String,
  appId: Schema.NullOr(AppId.unchecked),
  event: Schema.NullOr(Schema.String),
  metadata: Schema.NullOr(Schema.Record({ key: Schema.String, value: Schema.String })),
  description: Schema.NullOr(Schema.String),
  /** The call that sends it (`Wallets`), the same on each resend: optional on the wire for an earlier release. */
  origin: Schema.optional(Schema.String)
})

/** Why a charge was refused (or, `WalletFailure`, could not be committed). */
export const ChargeError = Schema.Union(InsufficientCredits.tagged, DailyCapExceeded.tagged, IdempotencyConflict.tagged, WalletFailure, StaleOwner)
export type ChargeError = typeof ChargeError.Type

/**
 * A fencing token (`platform/cluster/Fences.ts`) of the entity a charge is made for, when that is not the wallet: a
 * session's turn charges under its session's shard generation, and the wallet's commit refuses the charge in the
 * same statement once that generation moved on (issue 42 item 7), wherever the wallet lives.
 */
const CallerFence = Schema.Struct({ shard: Schema.String, generation: Schema.String })

export const ChargeRequest = Schema.Struct({
  amount: Schema.BigInt,
  entry: Entry,
  dailyCap: Schema.NullOr(Schema.BigInt),
  fence: Schema.optional(Schema.NullOr(CallerFence))
})
export type ChargeRequest = typeof ChargeRequest.Type

/**
 * A payload schema without `make`. The RPC client calls a Struct payload's `make` on every request, which validates
 * it against a type AST it derives anew each time (so nothing is memoized): for a `Charges` message that is most of
 * the cost of sending it. Payloads are built here from typed values, so the compiler has checked them already; the
 * schema still says how they travel to another runner.
 */
const unvalidated = <S extends Schema.Schema.AnyNoContext>(schema: S): Schema.Schema<S["Type"], S["Encoded"]> =>
  Schema.make<S["Type"], S["Encoded"], never>(schema.ast)

/**
 * Charges of one wallet in one message, each answered on its own (in order): exactly as if each had been sent
 * alone, arriving in this order. The only way to charge: a lone charge is a message of one. `Wallets.charge` sends
 * these: the charges a process has for one wallet while its previous message is on its way travel together, so a hot
 * wallet costs one message per batch.
 */
const Charges = Rpc.make("Charges", {
  payload: unvalidated(Schema.Struct({ charges: Schema.Array(ChargeRequest) })),
  success: Schema.Array(Schema.Either({ right: Movement, left: ChargeError }))
})

/** Adds `amount`: grants, top-ups, earnings. */
const Credit = Rpc.make("Credit", {
  payload: unvalidated(Schema.Struct({ amount: Schema.BigInt, entry: Entry })),
  success: Movement,
  error: Schema.Union(IdempotencyConflict.tagged, WalletFailure, InvalidRequest.tagged)
})

/** The balance; `WalletFailure` while the wallet cannot be read (the database is away). */
const Balance = Rpc.make("Balance", {
  success: Schema.Struct({ balance: Schema.BigInt, held: Schema.optional(Schema.BigInt) }),
  error: WalletFailure
})

/**
 * Places, extends or resumes the hold `hold` (a run's or turn's key) at `amount` in all, as far as the available
 * credits (balance - held) allow: answers the hold's amount now (0 when nothing is available). Asked again with the
 * same id (the run's next owner, or a run whose cost passed its hold), it is the same hold, kept alive longer.
 */
const Hold = Rpc.make("Hold", {
  payload: unvalidated(Schema.Struct({ hold: Schema.String, amount: Schema.BigInt })),
  // `expiresAt`: when the wallet voids the hold unless asked again (ms since the epoch); optional on the wire, so a
  // runner of the previous release (which did not say) is understood during a rolling upgrade.
  success: Schema.Struct({ hold: Schema.BigInt, balance: Schema.BigInt, held: Schema.BigInt, expiresAt: Schema.optional(Schema.Number) }),
  error: WalletFailure
})

/**
 * Ends the hold `hold`: voids what is left of it and posts `charges` (the run's steps, each its own ledger entry
 * under its own key), in order, each answered as in `Charges`. A settle sent again (or by the run's next owner)
 * replays the charges already posted by their keys; a hold already gone (expired, settled) voids nothing.
 *
 * `final` (the next owner of a cut session turn, voiding its hold): the run does not go on, so for as long as a hold
 * lives the wallet refuses any later settle's new charges of this hold (`StaleOwner`) and holds nothing under its
 * id again; the next owner counts the run's cost from the ledger once this is answered (docs/billing.md, "Holds").
 * Optional on the wire: a runner of the previous release sends none.
 */
const Settle = Rpc.make("Settle", {
  payload: unvalidated(Schema.Struct({
    hold: Schema.String,
    charges: Schema.Array(ChargeRequest),
    final: Schema.optional(Schema.Boolean)
  })),
  success: Schema.Array(Schema.Either({ right: Movement, left: ChargeError }))
})

/**
 * One user's wallet as an `@effect/cluster` entity (entity id = user id): exactly one instance in the cluster owns
 * the balance and is the only writer, which is what makes strong consistency cheap. It takes its mailbox in batches:
 * every request that arrived while the previous batch committed is decided in order against the in-memory balance,
 * then all of them are written together (group commit), and only then answered. A hot wallet therefore pays one
 * commit per batch, not per charge; and the batches of all wallets of this process that are ready at the same
 * moment share one statement (`WalletCommitter`), so many wallets do not pay one commit each either.
 *
 * Client tracing is off: a span per charge on the caller's side costs more than the charge's share of the commit.
 */
export const Wallet = Entity.make("Wallet", [Charges, Credit, Balance, Hold, Settle])
  .annotate(ClusterSchema.ClientTracingEnabled, false)

/** The wallet's RPCs, as its entity's mailbox carries them. */
export type WalletRpcs = typeof Charges | typeof Credit | typeof Balance | typeof Hold | typeof Settle

/** Charges of one wallet, as a `Relay` carries them. */
const RelayedCharges = Schema.Struct({ userId: Schema.String, charges: Schema.Array(ChargeRequest) })

/**
 * The charges a runner has for several wallets of another runner, in one message (issue 45 item 4: one round trip on
 * the runner socket per batch, not one per wallet). It goes to the relay of the first wallet's id, which lives on that
 * wallet's shard, so on the runner that holds it; the relay hands each wallet its own charges as one `Charges`
 * message into its mailbox (a local send, not encoded), so every wallet's charges are still decided and committed by
 * its own entity, in order. A wallet the relay's runner does not hold (its shard moved), or whose message was cut
 * there, is answered `null`: the sender sends it `Charges` itself. `runner`: the runner that answered, so the sender
 * learns where the wallets it answered live.
 */
const Relay = Rpc.make("Relay", {
  payload: unvalidated(Schema.Struct({ wallets: Schema.Array(RelayedCharges) })),
  success: Schema.Struct({
    runner: Schema.String,
    wallets: Schema.Array(Schema.NullOr(Schema.Array(Schema.Either({ right: Movement, left: ChargeError }))))
  })
})

/** The wallets' relay (`Relay`): one per wallet id, on that wallet's shard, stateless. */
export const WalletRelay = Entity.make("WalletRelay", [Relay]).annotate(ClusterSchema.ClientTracingEnabled, false)
