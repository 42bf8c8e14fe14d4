import { Schema } from "effect"
import { WireError } from "../platform/Errors.js"
import { newId } from "../platform/Ids.js"

/**
 * The agents domain's contract (docs/architecture.md, "Contracts"): its errors on the wire. Imports only `effect`,
 * `@effect/platform` contract modules and other contracts.
 */

/**
 * An agent's id (`agt_…`, DESIGN.md §6). The brand is a compile-time name only: the wire carries the same string, and a
 * path or body that names a wrong id still answers "not found", as before.
 */
export const AgentId = Schema.String.pipe(Schema.brand("AgentId"))
export type AgentId = typeof AgentId.Type
export const newAgentId = (): AgentId => AgentId.make(newId("agt"))

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
