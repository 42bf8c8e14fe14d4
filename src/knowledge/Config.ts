import { Config, ConfigError, Effect, Either, Option, type Redacted } from "effect"
import { duration, optional, optionalRedacted, optionalString, setting } from "../platform/Config.js"
import { parseCredits } from "../platform/Money.js"
import type { Micros } from "../platform/Money.js"

/** An OpenAI-compatible `/embeddings` endpoint; none configured: knowledge is full-text only. */
export interface EmbeddingsSettings {
  /** The API base, `https://api.openai.com/v1`; requests go to `<baseUrl>/embeddings`. */
  readonly baseUrl: string
  readonly apiKey: Option.Option<Redacted.Redacted>
  readonly model: string
  /** Asked of the provider (`dimensions`) when set; otherwise whatever length it answers. */
  readonly dimensions: Option.Option<number>
  /** Credits per 1,000 tokens embedded, in micro-credits. */
  readonly pricePer1k: Micros
  /** Inputs per request. */
  readonly batchSize: number
}

const embeddings = Config.all({
  baseUrl: optionalString("EMBEDDINGS_BASE_URL"),
  apiKey: optionalRedacted("EMBEDDINGS_API_KEY"),
  model: optionalString("EMBEDDINGS_MODEL"),
  dimensions: optional("EMBEDDINGS_DIMENSIONS", Config.integer),
  price: setting("EMBEDDINGS_PRICE_PER_1K", Config.string, "0.0001"),
  batchSize: setting("EMBEDDINGS_BATCH_SIZE", Config.integer, 64)
}).pipe(
  Config.mapOrFail((raw): Either.Either<Option.Option<EmbeddingsSettings>, ConfigError.ConfigError> => {
    if (Option.isNone(raw.baseUrl) && Option.isNone(raw.model)) return Either.right(Option.none())
    // Half a configuration is a mistake to say at start, not a silent fall back to full-text search.
    if (Option.isNone(raw.baseUrl) || Option.isNone(raw.model)) {
      return Either.left(ConfigError.InvalidData(["EMBEDDINGS_MODEL"], "EMBEDDINGS_BASE_URL and EMBEDDINGS_MODEL go together"))
    }
    const price = parseCredits(raw.price)
    if (price === undefined) {
      return Either.left(ConfigError.InvalidData(["EMBEDDINGS_PRICE_PER_1K"], `expected credits such as 0.0001, got "${raw.price}"`))
    }
    if (Option.isSome(raw.dimensions) && (raw.dimensions.value < 1 || raw.dimensions.value > 16_000)) {
      return Either.left(ConfigError.InvalidData(["EMBEDDINGS_DIMENSIONS"], "expected 1 to 16000"))
    }
    if (raw.batchSize < 1 || raw.batchSize > 2048) {
      return Either.left(ConfigError.InvalidData(["EMBEDDINGS_BATCH_SIZE"], "expected 1 to 2048"))
    }
    return Either.right(Option.some({
      baseUrl: raw.baseUrl.value.replace(/\/+$/, ""),
      apiKey: raw.apiKey,
      model: raw.model.value,
      dimensions: raw.dimensions,
      pricePer1k: price,
      batchSize: raw.batchSize
    }))
  })
)

/** Knowledge's settings (docs/knowledge.md), read once. */
export class KnowledgeConfig extends Effect.Service<KnowledgeConfig>()("atrium/knowledge/KnowledgeConfig", {
  effect: Config.all({
    embeddings,
    embeddingsTimeout: duration("EMBEDDINGS_TIMEOUT", "60 seconds"),
    /** The largest file a store ingests (its bytes; the API's upload limit is separate). */
    maxFileBytes: setting("KNOWLEDGE_FILE_MAX_BYTES", Config.integer, 20 * 1024 * 1024),
    /** The most bytes of files one store holds. */
    maxStoreBytes: setting("KNOWLEDGE_STORE_MAX_BYTES", Config.integer, 512 * 1024 * 1024),
    /** The most files one store holds. */
    maxStoreFiles: setting("KNOWLEDGE_STORE_MAX_FILES", Config.integer, 10_000),
    /** The text search configuration of a new store when it names none. */
    language: setting("KNOWLEDGE_LANGUAGE", Config.string, "english"),
    /** How long a runner's claim on a file being ingested lasts without renewal: a dead runner's file waits this. */
    lease: duration("KNOWLEDGE_INGEST_LEASE", "1 minute"),
    /** How often a runner looks for files to ingest that it was not told about (other runners', expired claims). */
    poll: duration("KNOWLEDGE_INGEST_POLL", "5 seconds"),
    /** Chunks written (and embedded) per step; a restart resumes after the last step written. */
    stepChunks: setting("KNOWLEDGE_INGEST_STEP_CHUNKS", Config.integer, 64),
    /** A file that failed this many claims (its runner died each time) fails for good. */
    maxAttempts: setting("KNOWLEDGE_INGEST_MAX_ATTEMPTS", Config.integer, 5)
  })
}) {}
