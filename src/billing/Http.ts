import { HttpApiBuilder } from "@effect/platform"
import { Effect, Layer } from "effect"
import { AtriumApi } from "../Api.js"
import { ModelCatalog } from "../runtime/models/Catalog.js"

export const MetersHttp = HttpApiBuilder.group(AtriumApi, "meters", (handlers) =>
  Effect.gen(function*() {
    const catalog = yield* ModelCatalog
    return handlers.handle("list", () =>
      Effect.map(catalog.list, (models) => ({
        has_more: false,
        data: models.map((model) => ({
          id: `model.${model.id}`,
          kind: "model_usage" as const,
          model: model.id,
          unit: "1k_tokens" as const,
          input_credits: Number(model.inputPer1k),
          output_credits: Number(model.outputPer1k)
        }))
      })))
  })).pipe(Layer.provide(ModelCatalog.Default))
