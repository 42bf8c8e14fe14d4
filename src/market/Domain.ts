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
