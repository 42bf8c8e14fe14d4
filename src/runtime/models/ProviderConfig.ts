import type * as LanguageModel from "@effect/ai/LanguageModel"
import type * as HttpClient from "@effect/platform/HttpClient"
import { Config, ConfigError, Duration, Effect, Either, Option } from "effect"
import { readFileSync } from "node:fs"
import { optionalRedacted, optionalString } from "../../platform/Config.js"
import * as Anthropic from "./Anthropic.js"
import * as Bedrock from "./Bedrock.js"
import * as ChatCompletions from "./ChatCompletions.js"
import * as Gemini from "./Gemini.js"
import {
  CACHED_INPUT_PERCENT,
  discounted,
  parseProviders,
  type ProviderKind,
  type ProviderModel,
  type ProviderSpec
} from "./Providers.js"
import * as Responses from "./Responses.js"

/**
 * Which models the platform talks to and how. Read through `Config` like every other setting, so tests hand the
 * program a `ConfigProvider` instead of touching the environment. An empty value counts as unset everywhere here,
 * because that is what `OPENAI_API_KEY=` in an env file or `${OPENAI_API_KEY}` in a compose file means.
 */

export type ModelProvider = "builtin" | "openai-chat" | "openai-responses"

/** Credits per 1,000 tokens, as exact decimal strings: a price never passes through a float. */
export interface ModelRate {
  readonly inputPer1k: string
  readonly outputPer1k: string
}

/**
 * What an upstream model costs when `OPENAI_MODEL_RATES` does not name it. Deliberately above the builtin model's
 * rate, so that forgetting to price a paid upstream errs towards charging rather than giving it away.
 */
export const DEFAULT_UPSTREAM_RATE: ModelRate = { inputPer1k: "0.01", outputPer1k: "0.03" }

export const DEFAULT_BASE_URL = "https://api.openai.com/v1"

/** Credits carry at most 6 decimal places (they are stored as integer micro-credits). */
const DECIMAL = /^\d{1,12}(\.\d{1,6})?$/

const nonEmpty = (name: string, fallback: string) =>
  optionalString(name).pipe(Config.map(Option.getOrElse(() => fallback)))

/** A duration such as `60 seconds`; empty means the default, a value that is not a positive duration is an error. */
const durationSetting = (name: string, fallback: Duration.DurationInput) =>
  optionalString(name).pipe(
    Config.mapOrFail(
      Option.match({
        onNone: () => Either.right(Duration.decode(fallback)),
        onSome: (raw) => {
          const parsed = Duration.decodeUnknown(raw.trim())
          return Option.isSome(parsed) && Duration.greaterThan(parsed.value, Duration.zero)
            ? Either.right(parsed.value)
            : Either.left(
              ConfigError.InvalidData([name], `expected a positive duration such as "60 seconds", got "${raw}"`)
            )
        }
      })
    )
  )

const provider = optionalString("MODEL_PROVIDER").pipe(
  Config.mapOrFail(
    Option.match({
      onNone: () => Either.right<ModelProvider>("builtin"),
      onSome: (raw) => {
        const value = raw.trim()
        return value === "builtin" || value === "openai-chat" || value === "openai-responses"
          ? Either.right<ModelProvider>(value)
          : Either.left(
            ConfigError.InvalidData(
              ["MODEL_PROVIDER"],
              `expected one of builtin, openai-chat, openai-responses, got "${raw}"`
            )
          )
      }
    })
  )
)

/** `gpt-4o-mini,deepseek-chat`: the upstream model ids offered, in order, without duplicates. */
const models = nonEmpty("OPENAI_MODELS", "").pipe(
  Config.map((raw) => [...new Set(raw.split(",").map((s) => s.trim()).filter((s) => s.length > 0))])
)

/** `gpt-4o-mini=0.0015:0.006,deepseek-chat=0.002:0.003`: model=inputPer1k:outputPer1k. */
export const parseRates = (raw: string): Either.Either<ReadonlyMap<string, ModelRate>, string> => {
  const rates = new Map<string, ModelRate>()
  for (const entry of raw.split(",").map((s) => s.trim()).filter((s) => s.length > 0)) {
    // The id is what precedes the last `=`, so Ollama-style ids such as `llama3:8b` keep their `:`.
    const eq = entry.lastIndexOf("=")
    const model = eq > 0 ? entry.slice(0, eq).trim() : ""
    const [input, output, ...rest] = (eq > 0 ? entry.slice(eq + 1) : "").split(":").map((s) => s.trim())
    if (model.length === 0 || input === undefined || output === undefined || rest.length > 0) {
      return Either.left(`expected "model=inputPer1k:outputPer1k", got "${entry}"`)
    }
    if (!DECIMAL.test(input) || !DECIMAL.test(output)) {
      return Either.left(`rates of "${model}" must be decimals with at most 6 places, got "${input}:${output}"`)
    }
    rates.set(model, { inputPer1k: input, outputPer1k: output })
  }
  return Either.right(rates)
}

const rates = nonEmpty("OPENAI_MODEL_RATES", "").pipe(
  Config.mapOrFail((raw) =>
    Either.mapLeft(parseRates(raw), (message) => ConfigError.InvalidData(["OPENAI_MODEL_RATES"], message))
  )
)

/**
 * The providers setting: a file named by `MODEL_PROVIDERS_FILE`, or the JSON itself in `MODEL_PROVIDERS` (one of the
 * two). Read here, once, with the rest of the model settings; a bad document is a `ConfigError` naming the setting,
 * the provider and the field, which stops start-up.
 */
const providersDocument = Config.all({
  file: optionalString("MODEL_PROVIDERS_FILE"),
  inline: optionalString("MODEL_PROVIDERS")
}).pipe(
  Config.mapOrFail(({ file, inline }): Either.Either<ReadonlyArray<ProviderSpec>, ConfigError.ConfigError> => {
    if (Option.isSome(file) && Option.isSome(inline)) {
      return Either.left(
        ConfigError.InvalidData(["MODEL_PROVIDERS_FILE"], "set MODEL_PROVIDERS_FILE or MODEL_PROVIDERS, not both")
      )
    }
    if (Option.isSome(file)) {
      let text: string
      try {
        text = readFileSync(file.value.trim(), "utf8")
      } catch (error) {
        return Either.left(
          ConfigError.InvalidData(["MODEL_PROVIDERS_FILE"], `cannot read ${file.value}: ${(error as Error).message}`)
        )
      }
      return Either.mapLeft(
        parseProviders(text),
        (message) => ConfigError.InvalidData(["MODEL_PROVIDERS_FILE"], `${file.value}: ${message}`)
      )
    }
    if (Option.isSome(inline)) {
      return Either.mapLeft(parseProviders(inline.value), (message) => ConfigError.InvalidData(["MODEL_PROVIDERS"], message))
    }
    return Either.right([])
  })
)

/** The id the `OPENAI_*` shorthand's provider gets: its models are `openai/<model>`. */
export const SHORTHAND_PROVIDER_ID = "openai"

export const ModelProviderConfig = Config.all({
  provider,
  /** Without a trailing slash, so `${baseUrl}/chat/completions` is always one slash. */
  baseUrl: nonEmpty("OPENAI_BASE_URL", DEFAULT_BASE_URL).pipe(Config.map((url) => url.trim().replace(/\/+$/, ""))),
  apiKey: optionalRedacted("OPENAI_API_KEY"),
  models,
  rates,
  providersFile: providersDocument,
  /** No byte from the upstream for this long means it is stuck: the call fails instead of hanging the run. */
  idleTimeout: durationSetting("OPENAI_STREAM_IDLE_TIMEOUT", "60 seconds"),
  /** The most one model call may take from request to last byte, however steadily it streams. */
  requestTimeout: durationSetting("OPENAI_REQUEST_TIMEOUT", "10 minutes")
}).pipe(
  Config.mapOrFail((config) => {
    // The `OPENAI_*` settings are a one-provider shorthand: provider `openai`, beside whatever the file lists.
    const shorthand: Array<ProviderSpec> = config.provider === "builtin" || config.models.length === 0
      ? []
      : [{
        id: SHORTHAND_PROVIDER_ID,
        kind: config.provider,
        baseUrl: config.baseUrl,
        apiKey: config.apiKey,
        models: config.models.map((id) => {
          const rate = config.rates.get(id) ?? DEFAULT_UPSTREAM_RATE
          return {
            id,
            ...rate,
            cachedInputPer1k: discounted(rate.inputPer1k, CACHED_INPUT_PERCENT[config.provider as ProviderKind]),
            contextWindow: 128_000,
            capabilities: ["tools", "vision", "reasoning"]
          }
        })
      }]
    if (shorthand.length > 0 && config.providersFile.some((p) => p.id === SHORTHAND_PROVIDER_ID)) {
      return Either.left(
        ConfigError.InvalidData(
          ["MODEL_PROVIDER"],
          `the OPENAI_* settings define provider "${SHORTHAND_PROVIDER_ID}", which the providers file defines too`
        )
      )
    }
    return Either.right({ ...config, providers: [...shorthand, ...config.providersFile] })
  })
)

export type ModelProviderConfig = Config.Config.Success<typeof ModelProviderConfig>

/** An upstream model as the catalog lists it: `id` is `<provider>/<model>`. */
export interface UpstreamModel extends ProviderModel {
  readonly id: string
  /** The model's own id at its provider. */
  readonly model: string
  readonly provider: ProviderSpec
}

export class ModelProviderSettings extends Effect.Service<ModelProviderSettings>()(
  "atrium/runtime/models/ModelProviderSettings",
  {
    effect: Effect.map(ModelProviderConfig, (config) => {
      const rateOf = (model: string): ModelRate => config.rates.get(model) ?? DEFAULT_UPSTREAM_RATE
      /** Every upstream model of every provider, in the order given. */
      const upstreamModels: ReadonlyArray<UpstreamModel> = config.providers.flatMap((provider) =>
        provider.models.map((model) => ({ ...model, id: `${provider.id}/${model.id}`, model: model.id, provider }))
      )
      return { ...config, rateOf, upstreamModels }
    })
  }
) {}

/** How long a call may stall or last, shared by every provider. */
export interface Timeouts {
  readonly idleTimeout: Duration.Duration
  readonly requestTimeout: Duration.Duration
}

/** The `LanguageModel` for one upstream model, by its provider's kind. */
export const upstreamLanguageModel = (
  timeouts: Timeouts,
  upstream: UpstreamModel
): Effect.Effect<LanguageModel.Service, never, HttpClient.HttpClient> => {
  const options = {
    baseUrl: upstream.provider.baseUrl,
    apiKey: upstream.provider.apiKey,
    model: upstream.model,
    idleTimeout: timeouts.idleTimeout,
    requestTimeout: timeouts.requestTimeout
  }
  switch (upstream.provider.kind) {
    case "openai-responses":
      return Responses.make(options)
    case "anthropic":
      return Anthropic.make({ ...options, reasoning: upstream.capabilities.includes("reasoning") })
    case "google":
      return Gemini.make({ ...options, reasoning: upstream.capabilities.includes("reasoning") })
    case "bedrock":
      return Bedrock.make({
        ...options,
        reasoning: upstream.capabilities.includes("reasoning"),
        aws: upstream.provider.aws ?? Option.none()
      })
    default:
      // OpenRouter speaks Chat Completions (with `delta.reasoning` and cached-token usage), as do vLLM, Ollama, ...
      return ChatCompletions.make(options)
  }
}
