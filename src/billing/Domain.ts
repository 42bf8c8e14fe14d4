import { Schema } from "effect"
import { prefixedId } from "../platform/Ids.js"
import { IdempotencyConflict, WireError } from "../platform/Errors.js"

export { IdempotencyConflict }

/**
 * The billing domain's contract (docs/architecture.md, "Contracts"): the wallet's errors on the wire and what a
 * movement of credits answers. Imports only `effect` and `@effect/platform` contract modules.
 */

/** An OAuth app's id: identity's (its apps are), named here too, where the wallet's contract always had it. */

export class InsufficientCredits extends WireError<InsufficientCredits>()(
  "InsufficientCredits",
  { message: Schema.String },
  { status: 402 }
) {}

export class DailyCapExceeded extends WireError<DailyCapExceeded>()(
  "DailyCapExceeded",
  { message: Schema.String, retry_after: Schema.optional(Schema.Int) },
  { status: 429 }
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

/**
 * The charge came from an entity whose runner no longer owns it (its fence is stale: a session's shard was acquired
 * by another runner since the session started there). Nothing was charged; the new owner closes the turn.
 */
export class StaleOwner extends Schema.TaggedError<StaleOwner>()(
  "StaleOwner",
  { message: Schema.String }
) {}

/** The outcome of a charge or a credit: `replay` when the key had been used before and nothing moved. */
export const Movement = Schema.Struct({ amount: Schema.BigInt, balance: Schema.BigInt, replay: Schema.Boolean })
export type Movement = typeof Movement.Type

/** A top-up order (`ord_…`). */
export const OrderId = prefixedId("ord", "OrderId")
export type OrderId = typeof OrderId.Type

/** A usage meter of an OAuth app (`mtr_…`). */
export const MeterId = prefixedId("mtr", "MeterId")
export type MeterId = typeof MeterId.Type
