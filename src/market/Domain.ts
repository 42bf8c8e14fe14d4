import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import { Schema } from "effect"

/**
 * The market domain's contract (docs/architecture.md, "Contracts"): its errors on the wire. Imports only `effect`,
 * `@effect/platform` contract modules and other contracts.
 */

export class AlreadyApplied extends Schema.TaggedError<AlreadyApplied>()(
  "AlreadyApplied",
  { message: Schema.String },
  HttpApiSchema.annotations({ status: 409 })
) {}
