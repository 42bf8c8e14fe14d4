import { UserId } from "../platform/Ids.js"
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import { Effect, Option, Schema } from "effect"
import { FileId } from "../files/Domain.js"

/** A file claimed for ingestion, with what the worker needs to read it and whom to bill. */
const ClaimSchema = Schema.Struct({
  storeId: Schema.String,
  fileId: FileId,
  generation: Schema.Number,
  maxChunkTokens: Schema.Number,
  overlapTokens: Schema.Number,
  chunksDone: Schema.Number,
  attempts: Schema.Number,
  ownerId: UserId,
  language: Schema.String,
  filename: Schema.String,
  contentType: Schema.String,
  size: Schema.NumberFromString,
  storageKey: Schema.String
})
export type Claim = typeof ClaimSchema.Type

const Held = { storeId: Schema.String, fileId: FileId, generation: Schema.Number, runner: Schema.String }

const held = (claim: Claim, runner: string) =>
  ({ storeId: claim.storeId, fileId: claim.fileId, generation: claim.generation, runner })

/**
 * The ingestion of knowledge's files (`Ingestion`): claims under a lease, the chunks written step by step, the
 * outcome. Every write holds only while the claim does (same generation, same runner, still in progress). SQL errors
 * are defects here.
 */
export class IngestionRepo extends Effect.Service<IngestionRepo>()("atrium/knowledge/IngestionRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const heldBy = (claim: { readonly storeId: string; readonly fileId: string; readonly generation: number; readonly runner: string }) =>
      sql`f.store_id = ${claim.storeId} AND f.file_id = ${claim.fileId} AND f.generation = ${claim.generation}
        AND f.lease_owner = ${claim.runner} AND f.status = 'in_progress'`

    const claimFile = SqlSchema.findOne({
      Request: Schema.Struct({ runner: Schema.String, leaseMillis: Schema.Number }),
      Result: ClaimSchema,
      execute: ({ leaseMillis, runner }) =>
        sql`
          UPDATE vector_store_files f SET lease_owner = ${runner}, lease_until = now() + ${leaseMillis} * interval '1 millisecond',
            attempts = f.attempts + 1, updated_at = now()
          FROM vector_stores s, files fl
          WHERE (f.store_id, f.file_id) = (
              SELECT store_id, file_id FROM vector_store_files
              WHERE status = 'in_progress' AND (lease_until IS NULL OR lease_until < now())
              ORDER BY updated_at, store_id, file_id LIMIT 1 FOR UPDATE SKIP LOCKED)
            AND s.id = f.store_id AND fl.id = f.file_id
          RETURNING f.store_id, f.file_id, f.generation, f.max_chunk_tokens, f.overlap_tokens, f.chunks_done, f.attempts,
            s.owner_id, s.language, fl.filename, fl.content_type, fl.size::text AS size, fl.storage_key`
    })
    /**
     * Claims the oldest file waiting for ingestion whose lease is free or has passed (its runner died or stopped):
     * `FOR UPDATE SKIP LOCKED`, so runners polling together each take a different file.
     */
    const claim = (runner: string, leaseMillis: number) =>
      claimFile({ runner, leaseMillis }).pipe(Effect.orDie, Effect.withSpan("IngestionRepo.claim"))

    const Chunk = Schema.Struct({
      seq: Schema.Number,
      text: Schema.String,
      heading: Schema.String,
      start: Schema.Number,
      end: Schema.Number,
      tokens: Schema.Number,
      embedding: Schema.NullOr(Schema.String)
    })
    const advance = SqlSchema.findOne({
      Request: Schema.Struct({
        ...Held,
        chunksDone: Schema.Number,
        chunksTotal: Schema.Number,
        tokensEmbedded: Schema.Number,
        leaseMillis: Schema.Number
      }),
      Result: Schema.Struct({ fileId: FileId }),
      execute: (step) =>
        sql`
          UPDATE vector_store_files f SET chunks_done = ${step.chunksDone},
            chunks_total = ${step.chunksTotal}, tokens_embedded = f.tokens_embedded + ${step.tokensEmbedded},
            lease_until = now() + ${step.leaseMillis} * interval '1 millisecond', updated_at = now()
          WHERE ${heldBy(step)} RETURNING f.file_id`
    })
    const insertChunks = SqlSchema.void({
      Request: Schema.Struct({
        ...Held,
        language: Schema.String,
        embedded: Schema.Boolean,
        chunks: Schema.Array(Chunk)
      }),
      execute: (request) => {
        const rows = request.chunks.map((chunk) => {
          const tsv = sql`setweight(to_tsvector(${request.language}::regconfig, ${chunk.heading}), 'A') ||
            setweight(to_tsvector(${request.language}::regconfig, ${chunk.text}), 'B')`
          return request.embedded
            ? sql`(${request.storeId}, ${request.fileId}, ${request.generation}, ${chunk.seq}, ${chunk.text}, ${chunk.heading}, ${chunk.start},
                ${chunk.end}, ${chunk.tokens}, ${tsv}, ${chunk.embedding}::vector, vector_dims(${chunk.embedding}::vector))`
            : sql`(${request.storeId}, ${request.fileId}, ${request.generation}, ${chunk.seq}, ${chunk.text}, ${chunk.heading}, ${chunk.start},
                ${chunk.end}, ${chunk.tokens}, ${tsv})`
        })
        return request.embedded
          ? sql`
            INSERT INTO knowledge_chunks (store_id, file_id, generation, seq, text, heading, start_char, end_char, tokens, tsv, embedding, embedding_dims)
            VALUES ${sql.csv(rows)} ON CONFLICT DO NOTHING`
          : sql`
            INSERT INTO knowledge_chunks (store_id, file_id, generation, seq, text, heading, start_char, end_char, tokens, tsv)
            VALUES ${sql.csv(rows)} ON CONFLICT DO NOTHING`
      }
    })

    /**
     * One step of a file: its next chunks written (with their embeddings, when there are), its progress and lease
     * moved on, in one transaction. False when the claim is lost (the file was re-added or removed, or another
     * runner took it): nothing is written then.
     */
    const writeStep = (
      claim: Claim,
      runner: string,
      leaseMillis: number,
      step: {
        readonly chunks: ReadonlyArray<{ seq: number; text: string; heading: string; start: number; end: number; tokens: number; embedding: string | null }>
        readonly chunksTotal: number
        readonly tokensEmbedded: number
        readonly withEmbeddings: boolean
      }
    ) =>
      sql.withTransaction(Effect.gen(function*() {
        const kept = yield* advance({
          ...held(claim, runner),
          chunksDone: step.chunks.length === 0 ? claim.chunksDone : step.chunks[step.chunks.length - 1]!.seq + 1,
          chunksTotal: step.chunksTotal,
          tokensEmbedded: step.tokensEmbedded,
          leaseMillis
        })
        if (Option.isNone(kept)) return false
        if (step.chunks.length === 0) return true
        // One statement per step, not per chunk: on the embedded database every statement is a round trip.
        yield* insertChunks({
          ...held(claim, runner),
          language: claim.language,
          embedded: step.withEmbeddings && step.chunks.every((chunk) => chunk.embedding !== null),
          chunks: step.chunks
        })
        return true
      })).pipe(Effect.orDie, Effect.withSpan("IngestionRepo.writeStep"))

    const finishFile = SqlSchema.findOne({
      Request: Schema.Struct({
        ...Held,
        status: Schema.Literal("completed", "failed"),
        code: Schema.NullOr(Schema.String),
        message: Schema.NullOr(Schema.String),
        usageBytes: Schema.Number
      }),
      Result: Schema.Struct({ fileId: FileId }),
      execute: (outcome) =>
        sql`
          UPDATE vector_store_files f SET status = ${outcome.status},
            last_error_code = ${outcome.code}, last_error_message = ${outcome.message},
            usage_bytes = ${outcome.usageBytes}, lease_owner = NULL, lease_until = NULL, updated_at = now()
          WHERE ${heldBy(outcome)} RETURNING f.file_id`
    })
    const finish = (claim: Claim, runner: string, outcome: { status: "completed" } | { status: "failed"; code: string; message: string }, usageBytes: number) =>
      finishFile({
        ...held(claim, runner),
        status: outcome.status,
        code: outcome.status === "failed" ? outcome.code : null,
        message: outcome.status === "failed" ? outcome.message.slice(0, 1000) : null,
        usageBytes
      }).pipe(
        Effect.map(Option.isSome),
        Effect.orDie,
        Effect.withSpan("IngestionRepo.finish")
      )

    const releaseFile = SqlSchema.void({
      Request: Schema.Struct(Held),
      execute: (claim) =>
        sql`UPDATE vector_store_files f SET lease_owner = NULL, lease_until = NULL, attempts = greatest(f.attempts - 1, 0) WHERE ${heldBy(claim)}`
    })
    /** Lets a claim go at once (a runner shutting down), so the next runner need not wait for the lease. */
    const release = (claim: Claim, runner: string) => Effect.orDie(releaseFile(held(claim, runner)))

    return { claim, writeStep, finish, release } as const
  })
}) {}
