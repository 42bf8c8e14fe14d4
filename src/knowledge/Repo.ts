import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Option, Schema } from "effect"
import type { Partition } from "../identity/Partition.js"
import { decodeFirst, decodeRows, Json } from "../platform/Rows.js"

/** Knowledge's stores and their files (docs/knowledge.md). SQL errors are defects here. */

const Attributes = Json(Schema.Record({ key: Schema.String, value: Schema.Union(Schema.String, Schema.Number, Schema.Boolean) }))

const StoreRowSchema = Schema.Struct({
  id: Schema.String,
  ownerId: Schema.String,
  endUserId: Schema.String,
  name: Schema.String,
  metadata: Json(Schema.Record({ key: Schema.String, value: Schema.String })),
  language: Schema.String,
  createdAt: Schema.DateFromSelf,
  lastActiveAt: Schema.DateFromSelf,
  usageBytes: Schema.NumberFromString,
  inProgress: Schema.NumberFromString,
  completed: Schema.NumberFromString,
  failed: Schema.NumberFromString,
  cancelled: Schema.NumberFromString
})
export type StoreRow = typeof StoreRowSchema.Type

const StoreFileRowSchema = Schema.Struct({
  storeId: Schema.String,
  fileId: Schema.String,
  status: Schema.Literal("in_progress", "completed", "failed", "cancelled"),
  lastErrorCode: Schema.NullOr(Schema.String),
  lastErrorMessage: Schema.NullOr(Schema.String),
  attributes: Attributes,
  maxChunkTokens: Schema.Number,
  overlapTokens: Schema.Number,
  generation: Schema.Number,
  usageBytes: Schema.NumberFromString,
  chunksTotal: Schema.NullOr(Schema.Number),
  chunksDone: Schema.Number,
  createdAt: Schema.DateFromSelf
})
export type StoreFileRow = typeof StoreFileRowSchema.Type

/** A file claimed for ingestion, with what the worker needs to read it and whom to bill. */
const ClaimSchema = Schema.Struct({
  storeId: Schema.String,
  fileId: Schema.String,
  generation: Schema.Number,
  maxChunkTokens: Schema.Number,
  overlapTokens: Schema.Number,
  chunksDone: Schema.Number,
  attempts: Schema.Number,
  ownerId: Schema.String,
  language: Schema.String,
  filename: Schema.String,
  contentType: Schema.String,
  size: Schema.NumberFromString,
  storageKey: Schema.String
})
export type Claim = typeof ClaimSchema.Type

const STORE = `s.id, s.owner_id, s.end_user_id, s.name, s.metadata, s.language, s.created_at, s.last_active_at,
  (SELECT coalesce(sum(f.usage_bytes), 0)::text FROM vector_store_files f WHERE f.store_id = s.id) AS usage_bytes,
  (SELECT count(*)::text FROM vector_store_files f WHERE f.store_id = s.id AND f.status = 'in_progress') AS in_progress,
  (SELECT count(*)::text FROM vector_store_files f WHERE f.store_id = s.id AND f.status = 'completed') AS completed,
  (SELECT count(*)::text FROM vector_store_files f WHERE f.store_id = s.id AND f.status = 'failed') AS failed,
  (SELECT count(*)::text FROM vector_store_files f WHERE f.store_id = s.id AND f.status = 'cancelled') AS cancelled`

const STORE_FILE = `f.store_id, f.file_id, f.status, f.last_error_code, f.last_error_message, f.attributes,
  f.max_chunk_tokens, f.overlap_tokens, f.generation, f.usage_bytes::text, f.chunks_total, f.chunks_done, f.created_at`

const firstStore = decodeFirst(StoreRowSchema)
const storeRows = decodeRows(StoreRowSchema)
const firstStoreFile = decodeFirst(StoreFileRowSchema)
const storeFileRows = decodeRows(StoreFileRowSchema)

export interface Page {
  readonly limit: number
  readonly after: Option.Option<string>
  readonly order: "asc" | "desc"
}

/** Why a file could not be added. */
export type AddResult =
  | { readonly _tag: "Added"; readonly file: StoreFileRow }
  | { readonly _tag: "Unchanged"; readonly file: StoreFileRow }
  | { readonly _tag: "NoStore" }
  | { readonly _tag: "NoFile" }
  | { readonly _tag: "OverLimit"; readonly message: string }

export interface NewStoreFile {
  readonly fileId: string
  readonly attributes: Readonly<Record<string, string | number | boolean>>
  readonly maxChunkTokens: number
  readonly overlapTokens: number
}

export interface Limits {
  readonly maxFileBytes: number
  readonly maxStoreBytes: number
  readonly maxStoreFiles: number
}

export class KnowledgeRepo extends Effect.Service<KnowledgeRepo>()("atrium/knowledge/KnowledgeRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const mine = (partition: Partition) => sql`s.owner_id = ${partition.accountId} AND s.end_user_id = ${partition.endUserId}`

    const insertStore = (partition: Partition, store: { id: string; name: string; metadata: Record<string, string>; language: string }) =>
      sql`
        INSERT INTO vector_stores (id, owner_id, end_user_id, name, metadata, language)
        VALUES (${store.id}, ${partition.accountId}, ${partition.endUserId}, ${store.name}, ${JSON.stringify(store.metadata)}::jsonb,
                ${store.language})`.pipe(Effect.asVoid, Effect.orDie, Effect.withSpan("KnowledgeRepo.insertStore"))

    const store = (partition: Partition, id: string) =>
      sql`SELECT ${sql.literal(STORE)} FROM vector_stores s WHERE s.id = ${id} AND ${mine(partition)}`.pipe(
        Effect.flatMap(firstStore),
        Effect.orDie
      )

    /** OpenAI's cursor: the rows after `after` (an id of this partition) in `order`, `limit + 1` to tell `has_more`. */
    const stores = (partition: Partition, page: Page) =>
      Effect.gen(function*() {
        const cursor = Option.isNone(page.after)
          ? sql`TRUE`
          : page.order === "desc"
          ? sql`(s.created_at, s.id) < (SELECT created_at, id FROM vector_stores WHERE id = ${page.after.value})`
          : sql`(s.created_at, s.id) > (SELECT created_at, id FROM vector_stores WHERE id = ${page.after.value})`
        return yield* sql`
          SELECT ${sql.literal(STORE)} FROM vector_stores s WHERE ${mine(partition)} AND ${cursor}
          ORDER BY s.created_at ${sql.literal(page.order === "desc" ? "DESC" : "ASC")}, s.id ${sql.literal(page.order === "desc" ? "DESC" : "ASC")}
          LIMIT ${page.limit + 1}`.pipe(Effect.flatMap(storeRows))
      }).pipe(Effect.orDie)

    const updateStore = (partition: Partition, id: string, change: { name?: string | undefined; metadata?: Record<string, string> | undefined }) =>
      sql`
        UPDATE vector_stores s SET
          name = coalesce(${change.name ?? null}, s.name),
          metadata = coalesce(${change.metadata === undefined ? null : JSON.stringify(change.metadata)}::jsonb, s.metadata),
          last_active_at = now()
        WHERE s.id = ${id} AND ${mine(partition)} RETURNING s.id`.pipe(Effect.map((rows) => rows.length > 0), Effect.orDie)

    const deleteStore = (partition: Partition, id: string) =>
      sql`DELETE FROM vector_stores s WHERE s.id = ${id} AND ${mine(partition)} RETURNING s.id`.pipe(
        Effect.map((rows) => rows.length > 0),
        Effect.orDie,
        Effect.withSpan("KnowledgeRepo.deleteStore")
      )

    const knowsLanguage = (language: string) =>
      sql`SELECT 1 AS one FROM pg_ts_config WHERE cfgname = ${language}`.pipe(Effect.map((rows) => rows.length > 0), Effect.orDie)

    /** Which of `ids` are stores of `partition`. */
    const existing = (partition: Partition, ids: ReadonlyArray<string>) =>
      ids.length === 0 ? Effect.succeed([] as ReadonlyArray<string>) : sql`
        SELECT s.id FROM vector_stores s WHERE ${sql.in("s.id", ids)} AND ${mine(partition)}`.pipe(
        Effect.flatMap(decodeRows(Schema.Struct({ id: Schema.String }))),
        Effect.map((rows) => rows.map((row) => row.id)),
        Effect.orDie
      )

    /** The stores among `ids` of `partition`, with their languages (what a search needs). */
    const storesIn = (partition: Partition, ids: ReadonlyArray<string>) =>
      ids.length === 0 ? Effect.succeed([] as ReadonlyArray<{ id: string; language: string }>) : sql`
        WITH found AS (SELECT s.id, s.language, s.last_active_at FROM vector_stores s WHERE ${sql.in("s.id", ids)} AND ${mine(partition)}),
          -- A search marks its stores active, but writes at most once a minute per store: searches stay reads.
          touched AS (
            UPDATE vector_stores SET last_active_at = now()
            WHERE id IN (SELECT id FROM found WHERE last_active_at < now() - interval '1 minute'))
        SELECT id, language FROM found`.pipe(
        Effect.flatMap(decodeRows(Schema.Struct({ id: Schema.String, language: Schema.String }))),
        Effect.orDie
      )

    /**
     * Adds a file (of the store's partition) to a store, or adds it again: a new generation, its old chunks gone,
     * ingestion from the start. The store row is locked first, so two adds cannot both pass the store's caps. Adding
     * again a file that is ingested or being ingested with the same chunking and attributes changes nothing.
     */
    const addFile = (partition: Partition, storeId: string, file: NewStoreFile, limits: Limits) =>
      sql.withTransaction(Effect.gen(function*() {
        const locked = yield* sql`SELECT s.id FROM vector_stores s WHERE s.id = ${storeId} AND ${mine(partition)} FOR UPDATE`
        if (locked.length === 0) return { _tag: "NoStore" } as AddResult
        const found = yield* sql`
          SELECT size::text FROM files
          WHERE id = ${file.fileId} AND owner_id = ${partition.accountId} AND end_user_id = ${partition.endUserId}
          FOR SHARE`.pipe(Effect.flatMap(decodeFirst(Schema.Struct({ size: Schema.NumberFromString }))))
        if (Option.isNone(found)) return { _tag: "NoFile" } as AddResult
        const size = found.value.size
        if (size > limits.maxFileBytes) {
          return { _tag: "OverLimit", message: `${file.fileId} is ${size} bytes; a knowledge base takes files of at most ${limits.maxFileBytes} bytes (KNOWLEDGE_FILE_MAX_BYTES).` } as AddResult
        }
        const existing = yield* sql`SELECT ${sql.literal(STORE_FILE)} FROM vector_store_files f WHERE f.store_id = ${storeId} AND f.file_id = ${file.fileId}`.pipe(
          Effect.flatMap(firstStoreFile)
        )
        if (
          Option.isSome(existing) && existing.value.status !== "failed" && existing.value.status !== "cancelled" &&
          existing.value.maxChunkTokens === file.maxChunkTokens && existing.value.overlapTokens === file.overlapTokens &&
          JSON.stringify(existing.value.attributes) === JSON.stringify(file.attributes)
        ) return { _tag: "Unchanged", file: existing.value } as AddResult
        const totals = yield* sql`
          SELECT count(*)::text AS files, coalesce(sum(fl.size), 0)::text AS bytes
          FROM vector_store_files f JOIN files fl ON fl.id = f.file_id
          WHERE f.store_id = ${storeId} AND f.file_id <> ${file.fileId}`.pipe(
          Effect.flatMap(decodeFirst(Schema.Struct({ files: Schema.NumberFromString, bytes: Schema.NumberFromString }))),
          Effect.map(Option.getOrThrow)
        )
        if (totals.files + 1 > limits.maxStoreFiles) {
          return { _tag: "OverLimit", message: `A knowledge base holds at most ${limits.maxStoreFiles} files (KNOWLEDGE_STORE_MAX_FILES).` } as AddResult
        }
        if (totals.bytes + size > limits.maxStoreBytes) {
          return { _tag: "OverLimit", message: `This file would bring the knowledge base to ${totals.bytes + size} bytes; it holds at most ${limits.maxStoreBytes} (KNOWLEDGE_STORE_MAX_BYTES).` } as AddResult
        }
        const added = yield* sql`
          INSERT INTO vector_store_files AS f (store_id, file_id, status, attributes, max_chunk_tokens, overlap_tokens)
          VALUES (${storeId}, ${file.fileId}, 'in_progress', ${JSON.stringify(file.attributes)}::jsonb, ${file.maxChunkTokens}, ${file.overlapTokens})
          ON CONFLICT (store_id, file_id) DO UPDATE SET
            status = 'in_progress', last_error_code = NULL, last_error_message = NULL, attributes = EXCLUDED.attributes,
            max_chunk_tokens = EXCLUDED.max_chunk_tokens, overlap_tokens = EXCLUDED.overlap_tokens,
            generation = f.generation + 1, usage_bytes = 0, chunks_total = NULL, chunks_done = 0, tokens_embedded = 0,
            lease_owner = NULL, lease_until = NULL, attempts = 0, updated_at = now()
          RETURNING ${sql.literal(STORE_FILE)}`.pipe(Effect.flatMap(firstStoreFile), Effect.map(Option.getOrThrow))
        // The chunks of earlier generations go with the version they belonged to (a first add has none).
        if (added.generation > 1) {
          yield* sql`DELETE FROM knowledge_chunks WHERE store_id = ${storeId} AND file_id = ${file.fileId} AND generation < ${added.generation}`
        }
        yield* sql`UPDATE vector_stores SET last_active_at = now() WHERE id = ${storeId}`
        return { _tag: "Added", file: added } as AddResult
      })).pipe(Effect.orDie, Effect.withSpan("KnowledgeRepo.addFile"))

    const storeFile = (partition: Partition, storeId: string, fileId: string) =>
      sql`
        SELECT ${sql.literal(STORE_FILE)} FROM vector_store_files f JOIN vector_stores s ON s.id = f.store_id
        WHERE f.store_id = ${storeId} AND f.file_id = ${fileId} AND ${mine(partition)}`.pipe(Effect.flatMap(firstStoreFile), Effect.orDie)

    const storeFiles = (partition: Partition, storeId: string, page: Page, status: Option.Option<string>) =>
      Effect.gen(function*() {
        const dir = sql.literal(page.order === "desc" ? "DESC" : "ASC")
        const cursor = Option.isNone(page.after)
          ? sql`TRUE`
          : sql`(f.created_at, f.file_id) ${sql.literal(page.order === "desc" ? "<" : ">")}
              (SELECT created_at, file_id FROM vector_store_files WHERE store_id = ${storeId} AND file_id = ${page.after.value})`
        return yield* sql`
          SELECT ${sql.literal(STORE_FILE)} FROM vector_store_files f JOIN vector_stores s ON s.id = f.store_id
          WHERE f.store_id = ${storeId} AND ${mine(partition)} AND ${cursor}
            AND ${Option.isSome(status) ? sql`f.status = ${status.value}` : sql`TRUE`}
          ORDER BY f.created_at ${dir}, f.file_id ${dir} LIMIT ${page.limit + 1}`.pipe(Effect.flatMap(storeFileRows))
      }).pipe(Effect.orDie)

    /** Removes a file from a store; its chunks go with it (foreign key). */
    const removeFile = (partition: Partition, storeId: string, fileId: string) =>
      sql`
        DELETE FROM vector_store_files f USING vector_stores s
        WHERE s.id = f.store_id AND f.store_id = ${storeId} AND f.file_id = ${fileId} AND ${mine(partition)}
        RETURNING f.file_id`.pipe(Effect.map((rows) => rows.length > 0), Effect.orDie, Effect.withSpan("KnowledgeRepo.removeFile"))

    // ---- ingestion ------------------------------------------------------------------------------------------

    /**
     * Claims the oldest file waiting for ingestion whose lease is free or has passed (its runner died or stopped):
     * `FOR UPDATE SKIP LOCKED`, so runners polling together each take a different file.
     */
    const claim = (runner: string, leaseMillis: number) =>
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
          s.owner_id, s.language, fl.filename, fl.content_type, fl.size::text, fl.storage_key`.pipe(
        Effect.flatMap(decodeFirst(ClaimSchema)),
        Effect.orDie,
        Effect.withSpan("KnowledgeRepo.claim")
      )

    const held = (claim: Claim, runner: string) =>
      sql`f.store_id = ${claim.storeId} AND f.file_id = ${claim.fileId} AND f.generation = ${claim.generation}
        AND f.lease_owner = ${runner} AND f.status = 'in_progress'`

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
        const kept = yield* sql`
          UPDATE vector_store_files f SET chunks_done = ${step.chunks.length === 0 ? claim.chunksDone : step.chunks[step.chunks.length - 1]!.seq + 1},
            chunks_total = ${step.chunksTotal}, tokens_embedded = f.tokens_embedded + ${step.tokensEmbedded},
            lease_until = now() + ${leaseMillis} * interval '1 millisecond', updated_at = now()
          WHERE ${held(claim, runner)} RETURNING f.file_id`
        if (kept.length === 0) return false
        if (step.chunks.length === 0) return true
        // One statement per step, not per chunk: on the embedded database every statement is a round trip.
        const embedded = step.withEmbeddings && step.chunks.every((chunk) => chunk.embedding !== null)
        const rows = step.chunks.map((chunk) => {
          const tsv = sql`setweight(to_tsvector(${claim.language}::regconfig, ${chunk.heading}), 'A') ||
            setweight(to_tsvector(${claim.language}::regconfig, ${chunk.text}), 'B')`
          return embedded
            ? sql`(${claim.storeId}, ${claim.fileId}, ${claim.generation}, ${chunk.seq}, ${chunk.text}, ${chunk.heading}, ${chunk.start},
                ${chunk.end}, ${chunk.tokens}, ${tsv}, ${chunk.embedding}::vector, vector_dims(${chunk.embedding}::vector))`
            : sql`(${claim.storeId}, ${claim.fileId}, ${claim.generation}, ${chunk.seq}, ${chunk.text}, ${chunk.heading}, ${chunk.start},
                ${chunk.end}, ${chunk.tokens}, ${tsv})`
        })
        yield* embedded
          ? sql`
            INSERT INTO knowledge_chunks (store_id, file_id, generation, seq, text, heading, start_char, end_char, tokens, tsv, embedding, embedding_dims)
            VALUES ${sql.csv(rows)} ON CONFLICT DO NOTHING`
          : sql`
            INSERT INTO knowledge_chunks (store_id, file_id, generation, seq, text, heading, start_char, end_char, tokens, tsv)
            VALUES ${sql.csv(rows)} ON CONFLICT DO NOTHING`
        return true
      })).pipe(Effect.orDie, Effect.withSpan("KnowledgeRepo.writeStep"))

    const finish = (claim: Claim, runner: string, outcome: { status: "completed" } | { status: "failed"; code: string; message: string }, usageBytes: number) =>
      sql`
        UPDATE vector_store_files f SET status = ${outcome.status},
          last_error_code = ${outcome.status === "failed" ? outcome.code : null},
          last_error_message = ${outcome.status === "failed" ? outcome.message.slice(0, 1000) : null},
          usage_bytes = ${usageBytes}, lease_owner = NULL, lease_until = NULL, updated_at = now()
        WHERE ${held(claim, runner)} RETURNING f.file_id`.pipe(
        Effect.map((rows) => rows.length > 0),
        Effect.orDie,
        Effect.withSpan("KnowledgeRepo.finish")
      )

    /** Lets a claim go at once (a runner shutting down), so the next runner need not wait for the lease. */
    const release = (claim: Claim, runner: string) =>
      sql`UPDATE vector_store_files f SET lease_owner = NULL, lease_until = NULL, attempts = greatest(f.attempts - 1, 0) WHERE ${held(claim, runner)}`.pipe(
        Effect.asVoid,
        Effect.orDie
      )

    return { insertStore, knowsLanguage, existing, store, stores, updateStore, deleteStore, storesIn, addFile, storeFile, storeFiles, removeFile, claim, writeStep, finish, release } as const
  })
}) {}
