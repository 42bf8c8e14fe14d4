import { Schema } from "effect"
import { WireError } from "../platform/Errors.js"
import { newId } from "../platform/Ids.js"

/**
 * The environments domain's contract (docs/architecture.md, "Contracts"): its errors on the wire. Imports only `effect`,
 * `@effect/platform` contract modules and other contracts.
 */

/**
 * An environment's id (`env_…`, DESIGN.md §6). The brand is a compile-time name only: the wire carries the same string, and a
 * path or body that names a wrong id still answers "not found", as before.
 */
export const EnvironmentId = Schema.String.pipe(Schema.brand("EnvironmentId"))
export type EnvironmentId = typeof EnvironmentId.Type
export const newEnvironmentId = (): EnvironmentId => EnvironmentId.make(newId("env"))

export class EnvironmentInUse extends WireError<EnvironmentInUse>()(
  "EnvironmentInUse",
  { message: Schema.String },
  { status: 409 }
) {}
