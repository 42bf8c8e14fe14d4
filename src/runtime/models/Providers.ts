import { Either, Option, Redacted } from "effect"
import { formatCredits, parseCredits } from "../../platform/Money.js"

/**
 * The providers setting (`MODEL_PROVIDERS_FILE` / `MODEL_PROVIDERS`, docs/models.md): any number of upstreams side by
 * side, each offering models addressed as `<provider id>/<model id>`. Parsed by hand rather than by a schema so that
 * a bad file stops start-up with a message an operator can act on: the provider's id and the field, e.g.
 * `providers[1] "anthropic": models[0].input_per_1k: expected a decimal with at most 6 places, got "cheap"`.
 */

export const PROVIDER_KINDS = ["openai-chat", "openai-responses", "anthropic", "google", "bedrock", "openrouter"] as const
export type ProviderKind = typeof PROVIDER_KINDS[number]

/** Kinds this build can talk to (all of them; the set is where a kind is switched off while its adapter is missing). */
export const SUPPORTED_KINDS: ReadonlySet<ProviderKind> = new Set(PROVIDER_KINDS)

export const CAPABILITIES = ["tools", "vision", "structured_output", "reasoning"] as const
export type Capability = typeof CAPABILITIES[number]

/** Where each kind lives when the file gives no `base_url`. */
export const DEFAULT_BASE_URLS: Readonly<Record<ProviderKind, string>> = {
  "openai-chat": "https://api.openai.com/v1",
  "openai-responses": "https://api.openai.com/v1",
  anthropic: "https://api.anthropic.com",
  google: "https://generativelanguage.googleapis.com",
  bedrock: "https://bedrock-runtime.us-east-1.amazonaws.com",
  openrouter: "https://openrouter.ai/api/v1"
}

/**
 * What a cached input token costs, as a percentage of the input rate, when a model gives no `cached_input_per_1k`:
 * the providers' published discounts (Anthropic cache reads 10 %, OpenAI 50 %, Gemini 25 %); OpenRouter passes on
 * whatever the routed provider charges, so it gets no discount unless the file says.
 */
export const CACHED_INPUT_PERCENT: Readonly<Record<ProviderKind, bigint>> = {
  "openai-chat": 50n,
  "openai-responses": 50n,
  anthropic: 10n,
  google: 25n,
  bedrock: 10n,
  openrouter: 100n
}

export interface ProviderModel {
  readonly id: string
  readonly inputPer1k: string
  readonly outputPer1k: string
  readonly cachedInputPer1k: string
  readonly contextWindow: number
  readonly capabilities: ReadonlyArray<Capability>
}

/** Bedrock's SigV4 credentials (`aws_access_key_id`, `aws_secret_access_key`, `aws_session_token`, `region`). */
export interface AwsSpec {
  readonly region: string
  readonly accessKeyId: string
  readonly secretAccessKey: Redacted.Redacted
  readonly sessionToken: Option.Option<Redacted.Redacted>
}

export interface ProviderSpec {
  readonly id: string
  readonly kind: ProviderKind
  /** Bedrock only: signs requests with SigV4 when given (else `api_key` is a Bedrock API key, sent as Bearer). */
  readonly aws?: Option.Option<AwsSpec> | undefined
  /** Without a trailing slash. */
  readonly baseUrl: string
  readonly apiKey: Option.Option<Redacted.Redacted>
  readonly models: ReadonlyArray<ProviderModel>
}

const DECIMAL = /^\d{1,12}(\.\d{1,6})?$/
const PROVIDER_ID = /^[a-z0-9][a-z0-9_-]{0,39}$/
const MODEL_ID = /^[^\s/][^\s]{0,99}$/

/** `rate × percent / 100`, rounded up to the micro-credit, as decimal text. */
export const discounted = (rate: string, percent: bigint): string =>
  formatCredits(((parseCredits(rate) ?? 0n) * percent + 99n) / 100n)

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** A rate given as a string or a number; a number is read as its decimal text, so `0.003` and `"0.003"` agree. */
const rate = (value: unknown, where: string): Either.Either<string, string> => {
  const text = typeof value === "number" ? String(value) : value
  return typeof text === "string" && DECIMAL.test(text.trim())
    ? Either.right(text.trim())
    : Either.left(`${where}: expected a decimal with at most 6 places, got ${JSON.stringify(value)}`)
}

const parseModel = (
  raw: unknown,
  kind: ProviderKind,
  where: string
): Either.Either<ProviderModel, string> =>
  Either.gen(function*() {
    if (!isRecord(raw)) return yield* Either.left(`${where}: expected an object`)
    const id = raw.id
    if (typeof id !== "string" || !MODEL_ID.test(id)) {
      return yield* Either.left(`${where}.id: expected a model id of 1-100 characters without spaces, got ${JSON.stringify(id)}`)
    }
    const inputPer1k = yield* rate(raw.input_per_1k, `${where}.input_per_1k`)
    const outputPer1k = yield* rate(raw.output_per_1k, `${where}.output_per_1k`)
    const cachedInputPer1k = raw.cached_input_per_1k === undefined
      ? discounted(inputPer1k, CACHED_INPUT_PERCENT[kind])
      : yield* rate(raw.cached_input_per_1k, `${where}.cached_input_per_1k`)
    const window = raw.context_window ?? 128_000
    if (typeof window !== "number" || !Number.isInteger(window) || window < 1) {
      return yield* Either.left(`${where}.context_window: expected a positive integer, got ${JSON.stringify(window)}`)
    }
    const capabilities = raw.capabilities ?? ["tools"]
    if (!Array.isArray(capabilities) || capabilities.some((c) => !(CAPABILITIES as ReadonlyArray<unknown>).includes(c))) {
      return yield* Either.left(`${where}.capabilities: expected a list of ${CAPABILITIES.join(", ")}, got ${JSON.stringify(capabilities)}`)
    }
    return { id, inputPer1k, outputPer1k, cachedInputPer1k, contextWindow: window, capabilities: [...new Set(capabilities as Array<Capability>)] }
  })

const parseProvider = (raw: unknown, index: number): Either.Either<ProviderSpec, string> =>
  Either.gen(function*() {
    if (!isRecord(raw)) return yield* Either.left(`providers[${index}]: expected an object`)
    const id = raw.id
    if (typeof id !== "string" || !PROVIDER_ID.test(id)) {
      return yield* Either.left(`providers[${index}].id: expected 1-40 characters of a-z 0-9 _ - (starting with a letter or digit), got ${JSON.stringify(id)}`)
    }
    const at = `providers[${index}] "${id}"`
    if (id === "builtin") return yield* Either.left(`${at}: id: "builtin" is the platform's own model`)
    const kind = raw.kind
    if (typeof kind !== "string" || !(PROVIDER_KINDS as ReadonlyArray<string>).includes(kind)) {
      return yield* Either.left(`${at}: kind: expected one of ${PROVIDER_KINDS.join(", ")}, got ${JSON.stringify(kind)}`)
    }
    if (!SUPPORTED_KINDS.has(kind as ProviderKind)) {
      return yield* Either.left(`${at}: kind: "${kind}" is not supported by this build yet (docs/models.md)`)
    }
    let aws = Option.none<AwsSpec>()
    let region = "us-east-1"
    if (kind === "bedrock") {
      if (raw.region !== undefined && (typeof raw.region !== "string" || !/^[a-z]{2}(-[a-z]+)+-\d$/.test(raw.region))) {
        return yield* Either.left(`${at}: region: expected an AWS region such as "us-east-1", got ${JSON.stringify(raw.region)}`)
      }
      region = (raw.region as string | undefined) ?? region
      const keyId = raw.aws_access_key_id
      const secret = raw.aws_secret_access_key
      const token = raw.aws_session_token
      if ((keyId === undefined) !== (secret === undefined)) {
        return yield* Either.left(`${at}: aws_access_key_id and aws_secret_access_key: give both or neither`)
      }
      if (keyId !== undefined) {
        if (typeof keyId !== "string" || typeof secret !== "string" || keyId.trim() === "" || secret.trim() === "") {
          return yield* Either.left(`${at}: aws_access_key_id and aws_secret_access_key: expected non-empty strings`)
        }
        if (token !== undefined && typeof token !== "string") return yield* Either.left(`${at}: aws_session_token: expected a string`)
        aws = Option.some({
          region,
          accessKeyId: keyId.trim(),
          secretAccessKey: Redacted.make(secret.trim()),
          sessionToken: typeof token === "string" && token.trim() !== "" ? Option.some(Redacted.make(token.trim())) : Option.none()
        })
      }
    }
    const baseRaw = raw.base_url ??
      (kind === "bedrock" ? `https://bedrock-runtime.${region}.amazonaws.com` : DEFAULT_BASE_URLS[kind as ProviderKind])
    if (typeof baseRaw !== "string" || !/^https?:\/\/[^\s]+$/.test(baseRaw.trim())) {
      return yield* Either.left(`${at}: base_url: expected an http(s) URL, got ${JSON.stringify(baseRaw)}`)
    }
    const key = raw.api_key
    if (key !== undefined && key !== null && typeof key !== "string") {
      return yield* Either.left(`${at}: api_key: expected a string`)
    }
    if (!Array.isArray(raw.models) || raw.models.length === 0) {
      return yield* Either.left(`${at}: models: expected a non-empty list`)
    }
    const models: Array<ProviderModel> = []
    for (const [i, model] of raw.models.entries()) {
      const parsed = yield* parseModel(model, kind as ProviderKind, `${at}: models[${i}]`)
      if (models.some((m) => m.id === parsed.id)) {
        return yield* Either.left(`${at}: models[${i}].id: "${parsed.id}" is listed twice`)
      }
      models.push(parsed)
    }
    return {
      id,
      kind: kind as ProviderKind,
      baseUrl: baseRaw.trim().replace(/\/+$/, ""),
      apiKey: typeof key === "string" && key.trim().length > 0 ? Option.some(Redacted.make(key.trim())) : Option.none(),
      ...(kind === "bedrock" ? { aws } : {}),
      models
    }
  })

/** The providers document: `{"providers": [...]}`, given as text. */
export const parseProviders = (text: string): Either.Either<ReadonlyArray<ProviderSpec>, string> =>
  Either.gen(function*() {
    let json: unknown
    try {
      json = JSON.parse(text)
    } catch (error) {
      return yield* Either.left(`not JSON: ${(error as Error).message}`)
    }
    if (!isRecord(json) || !Array.isArray(json.providers)) {
      return yield* Either.left(`expected {"providers": [...]}`)
    }
    const providers: Array<ProviderSpec> = []
    for (const [index, raw] of json.providers.entries()) {
      const provider = yield* parseProvider(raw, index)
      if (providers.some((p) => p.id === provider.id)) {
        return yield* Either.left(`providers[${index}] "${provider.id}": id: listed twice`)
      }
      providers.push(provider)
    }
    return providers
  })
