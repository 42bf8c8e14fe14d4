import type { LanguageModel } from "@effect/ai"
import { Effect, Option } from "effect"
import * as Builtin from "./Builtin.js"
import { type ModelEntry, ModelCatalog } from "./Catalog.js"

export interface ResolvedModel {
  readonly entry: ModelEntry
  readonly model: LanguageModel.Service
}

/**
 * The port between the run engine and the models: a model id from the catalog to its `@effect/ai` language model.
 * Each model is built once, on first use.
 */
export class Models extends Effect.Service<Models>()("atrium/runtime/Models", {
  effect: Effect.gen(function*() {
    const catalog = yield* ModelCatalog
    const builtin = yield* Builtin.make
    const built = new Map<string, LanguageModel.Service>([[Builtin.BUILTIN_MODEL_ID, builtin]])

    const resolve = Effect.fn("Models.resolve")(function*(id: string) {
      const entry = (yield* catalog.list).find((model) => model.id === id)
      if (entry === undefined) return Option.none<ResolvedModel>()
      const model = built.get(id)
      if (model === undefined) return Option.none<ResolvedModel>()
      return Option.some<ResolvedModel>({ entry, model })
    })

    return { resolve } as const
  }),
  dependencies: [ModelCatalog.Default]
}) {}
