import { Schema } from "effect"
import { WireError } from "../platform/Errors.js"

/**
 * The environments domain's contract (docs/architecture.md, "Contracts"): its errors on the wire. Imports only `effect`,
 * `@effect/platform` contract modules and other contracts.
 */

export class EnvironmentInUse extends WireError<EnvironmentInUse>()(
  "EnvironmentInUse",
  { message: Schema.String },
  { status: 409 }
) {}
