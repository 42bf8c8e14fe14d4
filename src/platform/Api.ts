import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { ServiceUnavailable } from "./Errors.js"

/** What a capability of this process says of itself (`Capabilities.ts` keeps them). */
export const CapabilityStatus = Schema.Struct({
  status: Schema.Literal("available", "unavailable", "checking"),
  detail: Schema.String,
  /** The layers seen in force, where the capability checked them (run_code: in a live guest at start). */
  layers: Schema.optional(Schema.Array(Schema.String))
})
export type CapabilityStatus = typeof CapabilityStatus.Type

export class HealthApi extends HttpApiGroup.make("health")
  .add(
    HttpApiEndpoint.get("health", "/api/health")
      .addSuccess(Schema.Struct({
        status: Schema.Literal("ok"),
        database: Schema.Literal("ok"),
        store: Schema.Literal("ok"),
        capabilities: Schema.Record({ key: Schema.String, value: CapabilityStatus }).annotations({
          description: "What this process can offer beyond answering (run_code: its sandbox), and why not when not."
        })
      }))
      .addError(ServiceUnavailable)
      .annotate(OpenApi.Description, "200 when the database and the key-value store answer; 503 naming what does not.")
  )
  .annotate(OpenApi.Title, "Health")
  .annotate(OpenApi.Description, "Whether this process, its database and its key-value store answer.")
{}
