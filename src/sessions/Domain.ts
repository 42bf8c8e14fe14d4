import { Schema } from "effect"
import { WireError } from "../platform/Errors.js"

/**
 * The sessions domain's contract (docs/architecture.md, "Contracts"): its errors on the wire. Imports only `effect`,
 * `@effect/platform` contract modules and other contracts.
 */

export class SessionBusy extends WireError<SessionBusy>()(
  "SessionBusy",
  { message: Schema.String },
  { status: 409 }
) {}
