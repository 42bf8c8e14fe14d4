import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import { Schema } from "effect"

/**
 * The agents domain's contract (docs/architecture.md, "Contracts"): its errors on the wire. Imports only `effect`,
 * `@effect/platform` contract modules and other contracts.
 */

export class IdentifierTaken extends Schema.TaggedError<IdentifierTaken>()(
  "IdentifierTaken",
  { message: Schema.String },
  HttpApiSchema.annotations({ status: 409 })
) {}
