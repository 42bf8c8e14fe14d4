import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import { Schema } from "effect"

/**
 * The sessions domain's contract (docs/architecture.md, "Contracts"): its errors on the wire. Imports only `effect`,
 * `@effect/platform` contract modules and other contracts.
 */

export class SessionBusy extends Schema.TaggedError<SessionBusy>()(
  "SessionBusy",
  { message: Schema.String },
  HttpApiSchema.annotations({ status: 409 })
) {}
