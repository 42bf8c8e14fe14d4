import { Schema } from "effect"
import { WireError } from "../platform/Errors.js"
import { prefixedId } from "../platform/Ids.js"

/**
 * The agents domain's contract (docs/architecture.md, "Contracts"): its errors on the wire. Imports only `effect`,
 * `@effect/platform` contract modules and other contracts.
 */

/** A submission of an agent's version for review (`sub_…`): the market's evolution resubmits with its own. */
export const SubmissionId = prefixedId("sub", "SubmissionId")
export type SubmissionId = typeof SubmissionId.Type

export class IdentifierTaken extends WireError<IdentifierTaken>()(
  "IdentifierTaken",
  { message: Schema.String },
  { status: 409 }
) {}

/**
 * A new version refused by its expert's eval gate (docs/evals.md, "Publish gate"): its pass rate on the gate's
 * dataset is below the live version's by more than the threshold, or one of the two has no finished eval run yet.
 * `details` carries both pass rates (null where there is no run) and the runs they come from.
 */
export class EvalGateFailed extends WireError<EvalGateFailed>()(
  "EvalGateFailed",
  {
    message: Schema.String,
    details: Schema.optional(Schema.Struct({
      dataset: Schema.String,
      threshold: Schema.Number,
      pass_rate: Schema.NullOr(Schema.Number),
      live_pass_rate: Schema.NullOr(Schema.Number),
      live_version: Schema.NullOr(Schema.Number),
      eval_run: Schema.NullOr(Schema.String),
      live_eval_run: Schema.NullOr(Schema.String)
    }))
  },
  { status: 409 }
) {}
