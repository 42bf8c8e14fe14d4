import { Schema } from "effect"
import { WireError } from "../platform/Errors.js"
import { prefixedId } from "../platform/Ids.js"

/**
 * The distillation domain's contract (docs/architecture.md, "Contracts"): its errors on the wire. Imports only `effect`,
 * `@effect/platform` contract modules and other contracts.
 */

/** A distillation's id (`dst_…`), its `sessionId` on the wire. */
export const DistillationId = prefixedId("dst", "DistillationId")
export type DistillationId = typeof DistillationId.Type

/** The distiller's run failed (its model failed, the caller's credits ran out, ...); `code` is the run's. */
export class DistillationFailed extends WireError<DistillationFailed>()(
  "DistillationFailed",
  // `code`: the distiller's `run.failed` code, kept for the logs; the envelope carries `type` and `message` (the message names it).
  { message: Schema.String, code: Schema.optional(Schema.String) },
  { status: 502 }
) {}

export class DistillationTimedOut extends WireError<DistillationTimedOut>()(
  "DistillationTimedOut",
  { message: Schema.String },
  { status: 504 }
) {}

/** Another message of the same distillation is being answered. */
export class DistillationBusy extends WireError<DistillationBusy>()(
  "DistillationBusy",
  { message: Schema.String },
  { status: 409 }
) {}
