import { Effect } from "effect"
import { ModelProviderSettings } from "./ProviderConfig.js"

/**
 * The models the platform can run, with their credit rates. Rates are exact decimal strings (credits per 1,000
 * tokens) so no price ever passes through a float; `GET /v1/models` and `GET /v1/meters` both read them here.
 */
export interface ModelEntry {
  readonly id: string
  readonly provider: "builtin" | "openai-chat" | "openai-responses"
  readonly description: string
  readonly contextWindow: number
  readonly inputPer1k: string
  readonly outputPer1k: string
}

export const BUILTIN_MODEL: ModelEntry = {
  id: "builtin",
  provider: "builtin",
  description: "Deterministic offline model for development and tests; echoes the message and obeys directives.",
  contextWindow: 32_768,
  inputPer1k: "0.01",
  outputPer1k: "0.02"
}

/**
 * The builtin model always; with `MODEL_PROVIDER` set to an upstream, the models of `OPENAI_MODELS` at their
 * `OPENAI_MODEL_RATES` (docs/models.md).
 */
export class ModelCatalog extends Effect.Service<ModelCatalog>()("atrium/runtime/ModelCatalog", {
  effect: Effect.gen(function*() {
    const settings = yield* ModelProviderSettings
    const upstream = settings.upstreamModels.map((model): ModelEntry => ({
      id: model.id,
      provider: model.provider,
      description: `${model.id} at ${settings.baseUrl.replace(/\/\/[^/@]*@/, "//")}`,
      contextWindow: 128_000,
      inputPer1k: model.inputPer1k,
      outputPer1k: model.outputPer1k
    }))
    const all: ReadonlyArray<ModelEntry> = [BUILTIN_MODEL, ...upstream.filter((model) => model.id !== BUILTIN_MODEL.id)]
    return { list: Effect.succeed(all) }
  }),
  dependencies: [ModelProviderSettings.Default]
}) {}
