import { Schema } from "effect"
import { WireError } from "../platform/Errors.js"

/**
 * The market domain's contract (docs/architecture.md, "Contracts"): its errors on the wire. Imports only `effect`,
 * `@effect/platform` contract modules and other contracts.
 */

export class AlreadyApplied extends WireError<AlreadyApplied>()(
  "AlreadyApplied",
  { message: Schema.String },
  { status: 409 }
) {}

/** A review of an expert the person has not run yet: allowed once they have (a state, hence 409 rather than 403). */
export class NotUsedYet extends WireError<NotUsedYet>()(
  "NotUsedYet",
  { message: Schema.String },
  { status: 409 }
) {}
