import type * as LanguageModel from "@effect/ai/LanguageModel"
import { Effect, Option } from "effect"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as Builtin from "./Builtin.js"
import { type ModelEntry, ModelCatalog } from "./Catalog.js"
import { ModelProviderSettings, upstreamLanguageModel } from "./ProviderConfig.js"

export interface ResolvedModel {
  readonly entry: ModelEntry
  readonly model: LanguageModel.Service
  /** The builtin model's answers that need no stream (`Builtin.plainAnswer`); none for an upstream model. */
  readonly plain?: typeof Builtin.plainAnswer
}

/**
 * The port between the run engine and the models: a model id from the catalog to its `@effect/ai` language model.
 * Every model of every provider is built at start-up (building one makes no request).
 */
export class Models extends Effect.Service<Models>()("atrium/runtime/Models", {
  effect: Effect.gen(function*() {
    const catalog = yield* ModelCatalog
    const settings = yield* ModelProviderSettings
    const builtin = yield* Builtin.make
    const built = new Map<string, LanguageModel.Service>([[Builtin.BUILTIN_MODEL_ID, builtin]])
    for (const model of settings.upstreamModels) {
      built.set(model.id, yield* upstreamLanguageModel(settings, model))
    }

    const resolve = Effect.fn("Models.resolve")(function*(modelId: string) {
      const entry = yield* catalog.find(modelId)
      if (Option.isNone(entry)) return Option.none<ResolvedModel>()
      const model = built.get(entry.value.id)
      if (model === undefined) return Option.none<ResolvedModel>()
      return Option.some<ResolvedModel>(
        entry.value.id === Builtin.BUILTIN_MODEL_ID ? { entry: entry.value, model, plain: Builtin.plainAnswer } : { entry: entry.value, model }
      )
    })

    return { resolve } as const
  }),
  dependencies: [ModelCatalog.Default, ModelProviderSettings.Default, NodeHttpClient.layerUndici]
}) {}
