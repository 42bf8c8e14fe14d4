import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import { Schema } from "effect"

/**
 * The distillation domain's contract (docs/architecture.md, "Contracts"): its errors on the wire. Imports only `effect`,
 * `@effect/platform` contract modules and other contracts.
 */

/** The distiller's run failed (its model failed, the caller's credits ran out, ...); `code` is the run's. */
export class DistillationFailed extends Schema.TaggedError<DistillationFailed>()(
  "DistillationFailed",
  { message: Schema.String, code: Schema.String },
  HttpApiSchema.annotations({ status: 502 })
) {}

export class DistillationTimedOut extends Schema.TaggedError<DistillationTimedOut>()(
  "DistillationTimedOut",
  { message: Schema.String },
  HttpApiSchema.annotations({ status: 504 })
) {}

/** Another message of the same distillation is being answered. */
export class DistillationBusy extends Schema.TaggedError<DistillationBusy>()(
  "DistillationBusy",
  { message: Schema.String },
  HttpApiSchema.annotations({ status: 409 })
) {}
