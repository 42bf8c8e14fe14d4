import { Effect, Option } from "effect"
import type { Capability, ProviderKind } from "./Providers.js"
import { ModelProviderSettings } from "./ProviderConfig.js"

/**
 * The models the platform can run, with their credit rates. Rates are exact decimal strings (credits per 1,000
 * tokens) so no price ever passes through a float; `GET /v1/models` and `GET /v1/meters` both read them here.
 */
export interface ModelEntry {
  /** `<provider>/<model>`, or `builtin` for the platform's own model. */
  readonly id: string
  /** The provider's id (`builtin` for the builtin model). */
  readonly provider: string
  readonly kind: ProviderKind | "builtin"
  /** The model's id at its provider. */
  readonly model: string
  readonly description: string
  readonly contextWindow: number
  readonly inputPer1k: string
  readonly outputPer1k: string
  /** What an input token read from the provider's prompt cache costs. */
  readonly cachedInputPer1k: string
  readonly capabilities: ReadonlyArray<Capability>
}

export const BUILTIN_MODEL: ModelEntry = {
  id: "builtin",
  provider: "builtin",
  kind: "builtin",
  model: "builtin",
  description: "Deterministic offline model for development and tests; echoes the message and obeys directives.",
  contextWindow: 32_768,
  inputPer1k: "0.01",
  outputPer1k: "0.02",
  cachedInputPer1k: "0.01",
  capabilities: ["tools", "reasoning"]
}

/**
 * Finds a model by its id. A bare model id (`gpt-4o-mini`, as experts stored it before providers had ids) names the
 * one model of that id when exactly one provider offers it; when two do, only `<provider>/<model>` is accepted.
 */
export const findModel = (all: ReadonlyArray<ModelEntry>, modelId: string): Option.Option<ModelEntry> => {
  const exact = all.find((model) => model.id === modelId)
  if (exact !== undefined) return Option.some(exact)
  const bare = all.filter((model) => model.model === modelId)
  return bare.length === 1 ? Option.some(bare[0]!) : Option.none()
}

/** The builtin model always, then every model of every configured provider (docs/models.md). */
export class ModelCatalog extends Effect.Service<ModelCatalog>()("atrium/runtime/ModelCatalog", {
  effect: Effect.gen(function*() {
    const settings = yield* ModelProviderSettings
    const upstream = settings.upstreamModels.map((model): ModelEntry => ({
      id: model.id,
      provider: model.provider.id,
      kind: model.provider.kind,
      model: model.model,
      description: `${model.model} at ${model.provider.baseUrl.replace(/\/\/[^/@]*@/, "//")}`,
      contextWindow: model.contextWindow,
      inputPer1k: model.inputPer1k,
      outputPer1k: model.outputPer1k,
      cachedInputPer1k: model.cachedInputPer1k,
      capabilities: model.capabilities
    }))
    const all: ReadonlyArray<ModelEntry> = [BUILTIN_MODEL, ...upstream]
    return {
      list: Effect.succeed(all),
      find: (modelId: string) => Effect.succeed(findModel(all, modelId))
    }
  }),
  dependencies: [ModelProviderSettings.Default]
}) {}
