import { Schema } from "effect"
import { WireError } from "../platform/Errors.js"

/**
 * The agents domain's contract (docs/architecture.md, "Contracts"): its errors on the wire. Imports only `effect`,
 * `@effect/platform` contract modules and other contracts.
 */

export class IdentifierTaken extends WireError<IdentifierTaken>()(
  "IdentifierTaken",
  { message: Schema.String },
  { status: 409 }
) {}
