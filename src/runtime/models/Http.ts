import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect, Layer } from "effect"
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
      owned_by: "atrium",
      provider: model.provider,
      description: model.description,
      context_window: model.contextWindow,
      pricing: { unit: "1k_tokens" as const, input: Number(model.inputPer1k), output: Number(model.outputPer1k) }
    })
    return handlers
      .handle("list", ({ urlParams }) =>
        Effect.flatMap(catalog.list, (models) =>
          Effect.map(pageOf(models.map(view), urlParams, (model) => model.id), (page) => ({ object: "list" as const, ...page }))))
      .handle("retrieve", ({ path }) =>
        Effect.flatMap(catalog.list, (models) => {
          const model = models.find((entry) => entry.id === path.id)
          return model === undefined ? Effect.fail(new NotFound({ message: `No model ${path.id} (see GET /v1/models).` })) : Effect.succeed(view(model))
        }))
  })).pipe(Layer.provide([ModelCatalog.Default, AuthenticationLive]))
