import { Effect } from "effect"

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

export class ModelCatalog extends Effect.Service<ModelCatalog>()("atrium/runtime/ModelCatalog", {
  succeed: {
    list: Effect.succeed<ReadonlyArray<ModelEntry>>([BUILTIN_MODEL])
  }
}) {}
