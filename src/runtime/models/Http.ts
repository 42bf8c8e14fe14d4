import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect, Layer, Option } from "effect"
import { AtriumApi } from "../../Api.js"
import { AuthenticationLive } from "../../identity/Authentication.js"
import { ModelCatalog } from "./Catalog.js"
import { NotFound } from "../../platform/Errors.js"
import { pageOf } from "../../platform/http/Lists.js"

export const ModelsHttp = HttpApiBuilder.group(AtriumApi, "models", (handlers) =>
  Effect.gen(function*() {
    const catalog = yield* ModelCatalog
    const view = (model: Effect.Effect.Success<typeof catalog.list>[number]) => ({
      id: model.id,
      object: "model" as const,
      owned_by: model.provider === "builtin" ? "atrium" : model.provider,
      provider: model.provider,
      provider_kind: model.kind,
      description: model.description,
      context_window: model.contextWindow,
      capabilities: model.capabilities,
      pricing: {
        unit: "1k_tokens" as const,
        input: Number(model.inputPer1k),
        output: Number(model.outputPer1k),
        cached_input: Number(model.cachedInputPer1k)
      }
    })
    const retrieve = (id: string) =>
      Effect.flatMap(catalog.find(id), (model) =>
        Option.isNone(model)
          ? Effect.fail(new NotFound({ message: `No model ${id} (see GET /v1/models).` }))
          : Effect.succeed(view(model.value)))
    return handlers
      .handle("list", ({ urlParams }) =>
        Effect.flatMap(catalog.list, (models) =>
          Effect.map(pageOf(models.map(view), urlParams, (model) => model.id), (page) => ({ object: "list" as const, ...page }))))
      .handle("retrieve", ({ path }) => retrieve(path.id))
      .handle("retrieveQualified", ({ path }) => retrieve(`${path.provider}/${path.model}`))
  })).pipe(Layer.provide([ModelCatalog.Default, AuthenticationLive]))
