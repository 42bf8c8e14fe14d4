import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { PlatformAuthentication } from "../../identity/Domain.js"
import { NotFound } from "../../platform/Errors.js"
import { ListParams } from "../../platform/http/Lists.js"

export const Model = Schema.Struct({
  id: Schema.String,
  object: Schema.Literal("model"),
  owned_by: Schema.String,
  /** The provider's id from the providers setting (`builtin` for the platform's own model). */
  provider: Schema.String,
  /** The provider's kind: `builtin`, `openai-chat`, `openai-responses`, `anthropic`, `google`, `openrouter`. */
  provider_kind: Schema.String,
  description: Schema.String,
  context_window: Schema.Int,
  capabilities: Schema.Array(Schema.String),
  pricing: Schema.Struct({
    unit: Schema.Literal("1k_tokens"),
    input: Schema.Number,
    output: Schema.Number,
    /** An input token read from the provider's prompt cache. */
    cached_input: Schema.Number
  })
})

export class ModelsApi extends HttpApiGroup.make("models")
  .add(
    HttpApiEndpoint.get("list", "/v1/models")
      .setUrlParams(ListParams)
      .addError(NotFound)
      .addSuccess(Schema.Struct({ object: Schema.Literal("list"), data: Schema.Array(Model), has_more: Schema.Boolean }))
      .annotate(OpenApi.Description, "Models an agent can run on, with their credit rates.")
  )
  .add(
    HttpApiEndpoint.get("retrieve", "/v1/models/:id")
      .setPath(Schema.Struct({ id: Schema.String }))
      .addSuccess(Model)
      .addError(NotFound)
      .annotate(OpenApi.Summary, "Retrieve a model")
      .annotate(OpenApi.Description, "One model of GET /v1/models by its id (OpenAI's models.retrieve).")
  )
  .add(
    HttpApiEndpoint.get("retrieveQualified", "/v1/models/:provider/:model")
      .setPath(Schema.Struct({ provider: Schema.String, model: Schema.String }))
      .addSuccess(Model)
      .addError(NotFound)
      .annotate(OpenApi.Summary, "Retrieve a provider's model")
      .annotate(OpenApi.Description, "One model by its `<provider>/<model>` id, which has a slash.")
  )
  .middleware(PlatformAuthentication)
  .annotate(OpenApi.Title, "Models")
  .annotate(OpenApi.Description, "The models experts can run on, OpenAI-compatible (`GET /v1/models`).")
{}
