import { Cause, Duration, Effect, Option } from "effect"
import { ObjectStorage, ObjectStorageLive } from "../files/Storage.js"
import { newId } from "../platform/Ids.js"
import { chunkText, type TextChunk } from "./Chunk.js"
import { KnowledgeConfig } from "./Config.js"
import { embed, vectorLiteral } from "./Embeddings.js"
import { extractText, isRefusal, kindOf, type Refusal } from "./Extract.js"
import { pdfText } from "./Pdf.js"
import { type Claim, IngestionRepo } from "./IngestionRepo.js"
import { Retrieval } from "./Retrieval.js"
import { Wallets } from "../billing/Wallets.js"
import { makeWakeup } from "../platform/Wakeup.js"

/**
 * Ingestion, a durable background job (docs/knowledge.md). Its queue is the `vector_store_files` rows still
 * `in_progress`: a runner claims one with a lease (`FOR UPDATE SKIP LOCKED`), reads the file, chunks it, and writes
 * its chunks step by step, each step in one transaction that also records the progress and renews the lease. A
 * runner that stops lets its claim go; one that dies leaves it to expire, and whoever claims the file next resumes
 * after the last step written (chunking is deterministic, so the same chunks come out). Every runner polls, so a
 * file added on one runner may be ingested by another.
 */

type Outcome = { readonly status: "completed"; readonly usageBytes: number } | { readonly status: "failed"; readonly code: string; readonly message: string } | { readonly status: "lost" }

const failed = (code: string, message: string): Outcome => ({ status: "failed", code, message })

export class Ingestion extends Effect.Service<Ingestion>()("atrium/knowledge/Ingestion", {
  scoped: Effect.gen(function*() {
    const config = yield* KnowledgeConfig
    const repo = yield* IngestionRepo
    const storage = yield* ObjectStorage
    const wallets = yield* Wallets
    const retrieval = yield* Retrieval
    const runner = newId("ingest")
    const leaseMillis = Duration.toMillis(config.lease)
    const wakeup = yield* makeWakeup
    const embeddings = retrieval.vectors ? config.embeddings : Option.none()

    const textOf = (claim: Claim) =>
      Effect.gen(function*() {
        const bytes = yield* storage.read(claim.storageKey, config.maxFileBytes)
        if (Option.isNone(bytes)) {
          return { code: "invalid_file", message: "The file's bytes are missing from storage, or larger than KNOWLEDGE_FILE_MAX_BYTES." } as Refusal
        }
        const kind = kindOf(claim.contentType, claim.filename)
        if (kind === undefined) {
          return { code: "unsupported_file", message: `Files of type ${claim.contentType} cannot be read; send text, Markdown, HTML, CSV, JSON or PDF.` } as Refusal
        }
        return kind === "pdf" ? yield* pdfText(bytes.value) : extractText(kind, bytes.value)
      })

    /** The embeddings of a step's chunks, paid by the store's owner once per step (the key survives a re-run). */
    const embedStep = (claim: Claim, chunks: ReadonlyArray<TextChunk>) =>
      Effect.gen(function*() {
        if (Option.isNone(embeddings)) return { vectors: chunks.map(() => null as string | null), tokens: 0 }
        const settings = embeddings.value
        const vectors: Array<string | null> = []
        let tokens = 0
        for (let at = 0; at < chunks.length; at += settings.batchSize) {
          const batch = chunks.slice(at, at + settings.batchSize)
          const embedded = yield* embed(settings, config.embeddingsTimeout, batch.map((c) => c.heading.length > 0 ? `${c.heading}\n\n${c.text}` : c.text))
          tokens += embedded.tokens
          for (const vector of embedded.vectors) vectors.push(vectorLiteral(vector))
        }
        const cost = (BigInt(tokens) * settings.pricePer1k + 999n) / 1000n
        if (cost > 0n) {
          yield* wallets.charge(claim.ownerId, cost, {
            kind: "usage",
            scope: "knowledge",
            key: `kb:${claim.storeId}:${claim.fileId}:${claim.generation}:${chunks[0]!.seq}`,
            description: `Knowledge ingestion of ${claim.filename} (${settings.model}, ${tokens} tokens embedded)`
          })
        }
        return { vectors, tokens }
      })

    const ingest = (claim: Claim): Effect.Effect<Outcome> =>
      Effect.gen(function*() {
        if (claim.attempts > config.maxAttempts) {
          return failed("server_error", `Ingestion was interrupted ${claim.attempts - 1} times; add the file again to retry.`)
        }
        const text = yield* textOf(claim)
        if (isRefusal(text)) return failed(text.code, text.message)
        if (text.trim().length === 0) return failed("invalid_file", "The file holds no text.")
        const chunks = chunkText(text, { maxTokens: claim.maxChunkTokens, overlapTokens: claim.overlapTokens })
        for (let at = claim.chunksDone; at < chunks.length; at += config.stepChunks) {
          const step = chunks.slice(at, at + config.stepChunks)
          const embedded = yield* Effect.either(embedStep(claim, step))
          if (embedded._tag === "Left") {
            const error = embedded.left
            if (error._tag === "InsufficientCredits") return failed("insufficient_credits", "The knowledge base's owner has not enough credits to embed this file.")
            return failed("server_error", error._tag === "EmbeddingsFailed" ? `Embedding failed: ${error.message}` : "The embedding could not be billed.")
          }
          const kept = yield* repo.writeStep(claim, runner, leaseMillis, {
            chunks: step.map((chunk, index) => ({ ...chunk, embedding: embedded.right.vectors[index] ?? null })),
            chunksTotal: chunks.length,
            tokensEmbedded: embedded.right.tokens,
            withEmbeddings: Option.isSome(embeddings)
          })
          if (!kept) return { status: "lost" } as Outcome
        }
        return { status: "completed", usageBytes: chunks.reduce((sum, chunk) => sum + Buffer.byteLength(chunk.text), 0) } as Outcome
      }).pipe(Effect.withSpan("Ingestion.ingest", { attributes: { storeId: claim.storeId, fileId: claim.fileId } }))

    /** Ingests one claimed file to its end; a runner stopping mid-file lets the claim go for the next one. */
    const work = (claim: Claim) =>
      ingest(claim).pipe(
        Effect.catchAllCause((cause) =>
          Cause.isInterruptedOnly(cause)
            ? Effect.failCause(cause)
            : Effect.as(Effect.logError("knowledge: ingestion failed", cause), failed("server_error", "Ingestion failed on our side."))
        ),
        Effect.flatMap((outcome) =>
          outcome.status === "lost"
            ? Effect.void
            : repo.finish(claim, runner, outcome.status === "completed" ? { status: "completed" } : outcome, outcome.status === "completed" ? outcome.usageBytes : 0)
        ),
        Effect.onInterrupt(() => repo.release(claim, runner))
      )

    /** Claims and ingests files until none is waiting. */
    const drain: Effect.Effect<void> = Effect.gen(function*() {
      while (true) {
        const claim = yield* repo.claim(runner, leaseMillis)
        if (Option.isNone(claim)) return
        yield* work(claim.value)
      }
    })

    yield* drain.pipe(
      Effect.catchAllCause((cause) => Cause.isInterruptedOnly(cause) ? Effect.failCause(cause) : Effect.logError("knowledge: the ingestion loop failed", cause)),
      Effect.zipRight(wakeup.next(config.poll)),
      Effect.forever,
      Effect.forkScoped
    )

    /** Tells this runner's loop that a file is waiting, so it need not wait for its next poll. */
    return { wake: wakeup.wake } as const
  }),
  dependencies: [KnowledgeConfig.Default, IngestionRepo.Default, ObjectStorageLive, Retrieval.Default]
}) {}
