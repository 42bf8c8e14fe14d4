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
