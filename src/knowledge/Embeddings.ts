import { Data, Duration, Effect, Option, Redacted } from "effect"
import type { EmbeddingsSettings } from "./Config.js"

/** The embedding provider failed or answered something unusable; the message says which. */
export class EmbeddingsFailed extends Data.TaggedError("EmbeddingsFailed")<{ readonly message: string }> {}

export interface Embedded {
  readonly vectors: ReadonlyArray<ReadonlyArray<number>>
  /** As the provider counted them (`usage.total_tokens`), or estimated when it did not say. */
  readonly tokens: number
}

/**
 * One call of an OpenAI-compatible `POST <base>/embeddings` (OpenAI, Azure's compatible endpoints, Ollama, vLLM,
 * LiteLLM...). The answer is checked: one vector per input, in input order, all of one length.
 */
export const embed = (settings: EmbeddingsSettings, timeout: Duration.Duration, inputs: ReadonlyArray<string>) =>
  Effect.tryPromise({
    try: async (signal) => {
      const headers: Record<string, string> = { "content-type": "application/json" }
      if (Option.isSome(settings.apiKey)) headers.authorization = `Bearer ${Redacted.value(settings.apiKey.value)}`
      const response = await fetch(`${settings.baseUrl}/embeddings`, {
        method: "POST",
        headers,
        body: JSON.stringify({
          model: settings.model,
          input: inputs,
          encoding_format: "float",
          ...(Option.isSome(settings.dimensions) ? { dimensions: settings.dimensions.value } : {})
        }),
        signal: AbortSignal.any([signal, AbortSignal.timeout(Duration.toMillis(timeout))])
      })
      const text = await response.text()
      if (!response.ok) throw new Error(`the embedding provider answered ${response.status}: ${text.slice(0, 300)}`)
      return JSON.parse(text) as {
        data?: Array<{ index?: number; embedding?: unknown }>
        usage?: { total_tokens?: number; prompt_tokens?: number }
      }
    },
    catch: (error) => new EmbeddingsFailed({ message: error instanceof Error ? error.message : String(error) })
  }).pipe(
    Effect.flatMap((body) => {
      const data = body.data ?? []
      if (data.length !== inputs.length) {
        return Effect.fail(new EmbeddingsFailed({ message: `the embedding provider returned ${data.length} vectors for ${inputs.length} inputs` }))
      }
      const vectors: Array<ReadonlyArray<number>> = new Array(inputs.length)
      for (const [position, item] of data.entries()) {
        const index = typeof item.index === "number" ? item.index : position
        const vector = item.embedding
        if (!Array.isArray(vector) || vector.length === 0 || !vector.every((x) => typeof x === "number" && Number.isFinite(x))) {
          return Effect.fail(new EmbeddingsFailed({ message: "the embedding provider returned a vector that is not a list of numbers" }))
        }
        if (index < 0 || index >= inputs.length || vectors[index] !== undefined) {
          return Effect.fail(new EmbeddingsFailed({ message: "the embedding provider returned vectors out of order" }))
        }
        vectors[index] = vector as Array<number>
      }
      const dims = vectors[0]!.length
      if (vectors.some((vector) => vector.length !== dims)) {
        return Effect.fail(new EmbeddingsFailed({ message: "the embedding provider returned vectors of different lengths" }))
      }
      const counted = body.usage?.total_tokens ?? body.usage?.prompt_tokens
      const tokens = typeof counted === "number" && counted >= 0
        ? counted
        : inputs.reduce((sum, input) => sum + Math.ceil(input.length / 4), 0)
      return Effect.succeed<Embedded>({ vectors, tokens })
    }),
    Effect.withSpan("Embeddings.embed", { attributes: { inputs: inputs.length } })
  )

/** pgvector's text form of a vector, `[0.1,0.2]`. */
export const vectorLiteral = (vector: ReadonlyArray<number>) => `[${vector.join(",")}]`
