import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"

/** One metering unit of the platform: model usage per 1k tokens (later also per-use prices). */
export const PlatformMeter = Schema.Struct({
  id: Schema.String,
  kind: Schema.Literal("model_usage"),
  model: Schema.String,
  unit: Schema.Literal("1k_tokens"),
  input_credits: Schema.Number,
  output_credits: Schema.Number
})

/** Spec 4.6: the only unauthenticated /v1 endpoint. */
export class MetersApi extends HttpApiGroup.make("meters")
  .add(
    HttpApiEndpoint.get("list", "/v1/meters")
      .addSuccess(Schema.Struct({ data: Schema.Array(PlatformMeter), has_more: Schema.Boolean }))
      .annotate(OpenApi.Description, "Metering units and rates: what a run costs in credits.")
  )
  .annotate(OpenApi.Title, "Meters")
{}
