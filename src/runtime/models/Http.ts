import { HttpApiBuilder } from "@effect/platform"
import { Effect, Layer } from "effect"
import { AtriumApi } from "../../Api.js"
import { AuthenticationLive } from "../../identity/Authentication.js"
import { ModelCatalog } from "./Catalog.js"

export const ModelsHttp = HttpApiBuilder.group(AtriumApi, "models", (handlers) =>
  Effect.gen(function*() {
    const catalog = yield* ModelCatalog
    return handlers.handle("list", () =>
      Effect.map(catalog.list, (models) => ({
        object: "list" as const,
        has_more: false,
        data: models.map((model) => ({
          id: model.id,
          object: "model" as const,
          owned_by: "atrium",
          provider: model.provider,
          description: model.description,
          context_window: model.contextWindow,
          pricing: { unit: "1k_tokens" as const, input: Number(model.inputPer1k), output: Number(model.outputPer1k) }
        }))
      })))
  })).pipe(Layer.provide([ModelCatalog.Default, AuthenticationLive]))
