import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import { Effect, Option, Schema } from "effect"
import { UserId } from "../platform/Ids.js"
import { FileId } from "../files/Domain.js"
import type { Partition } from "../identity/Partition.js"
import { VectorStoreId } from "./Domain.js"
import { Json } from "../platform/Rows.js"

const Attributes = Json(Schema.Record({ key: Schema.String, value: Schema.Union(Schema.String, Schema.Number, Schema.Boolean) }))

const StoreRowSchema = Schema.Struct({
  id: VectorStoreId,
  ownerId: UserId,
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
  storeId: VectorStoreId,
  fileId: FileId,
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

const STORE = `s.id, s.owner_id, s.end_user_id, s.name, s.metadata, s.language, s.created_at, s.last_active_at,
  (SELECT coalesce(sum(f.usage_bytes), 0)::text FROM vector_store_files f WHERE f.store_id = s.id) AS usage_bytes,
  (SELECT count(*)::text FROM vector_store_files f WHERE f.store_id = s.id AND f.status = 'in_progress') AS in_progress,
  (SELECT count(*)::text FROM vector_store_files f WHERE f.store_id = s.id AND f.status = 'completed') AS completed,
  (SELECT count(*)::text FROM vector_store_files f WHERE f.store_id = s.id AND f.status = 'failed') AS failed,
  (SELECT count(*)::text FROM vector_store_files f WHERE f.store_id = s.id AND f.status = 'cancelled') AS cancelled`

const STORE_FILE = `f.store_id, f.file_id, f.status, f.last_error_code, f.last_error_message, f.attributes,
  f.max_chunk_tokens, f.overlap_tokens, f.generation, f.usage_bytes::text AS usage_bytes, f.chunks_total, f.chunks_done, f.created_at`

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
  readonly fileId: FileId
  readonly attributes: Readonly<Record<string, string | number | boolean>>
  readonly maxChunkTokens: number
  readonly overlapTokens: number
}

export interface Limits {
  readonly maxFileBytes: number
  readonly maxStoreBytes: number
  readonly maxStoreFiles: number
}

const Owner = { accountId: UserId, endUserId: Schema.String }
const OwnedStore = Schema.Struct({ ...Owner, id: VectorStoreId })
const OwnedStoreFile = Schema.Struct({ ...Owner, storeId: VectorStoreId, fileId: FileId })
const PageRequest = {
  limit: Schema.Number,
  after: Schema.NullOr(Schema.String),
  order: Schema.Literal("asc", "desc")
}
const StoreId = Schema.Struct({ id: VectorStoreId })
const Metadata = Schema.Record({ key: Schema.String, value: Schema.String })
const AttributesJson = Schema.parseJson(Schema.Record({ key: Schema.String, value: Schema.Union(Schema.String, Schema.Number, Schema.Boolean) }))
const Found = Schema.Struct({ found: Schema.Literal(1) })

const owner = (partition: Partition) => ({ accountId: partition.accountId, endUserId: partition.endUserId })

/** Knowledge's stores and their files (docs/knowledge.md); their ingestion is `IngestionRepo`'s. SQL errors are defects here. */
export class KnowledgeRepo extends Effect.Service<KnowledgeRepo>()("atrium/knowledge/KnowledgeRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const mine = (owner: { readonly accountId: string; readonly endUserId: string }) =>
      sql`s.owner_id = ${owner.accountId} AND s.end_user_id = ${owner.endUserId}`

    const insertStoreRow = SqlSchema.void({
      Request: Schema.Struct({ ...OwnedStore.fields, name: Schema.String, metadata: Schema.parseJson(Metadata), language: Schema.String }),
      execute: (store) =>
        sql`
          INSERT INTO vector_stores (id, owner_id, end_user_id, name, metadata, language)
          VALUES (${store.id}, ${store.accountId}, ${store.endUserId}, ${store.name}, ${store.metadata}::jsonb, ${store.language})`
    })
    const insertStore = (partition: Partition, store: { id: VectorStoreId; name: string; metadata: Record<string, string>; language: string }) =>
      insertStoreRow({ ...owner(partition), ...store }).pipe(Effect.orDie, Effect.withSpan("KnowledgeRepo.insertStore"))

    const storeById = SqlSchema.findOne({
      Request: OwnedStore,
      Result: StoreRowSchema,
      execute: (request) => sql`SELECT ${sql.literal(STORE)} FROM vector_stores s WHERE s.id = ${request.id} AND ${mine(request)}`
    })
    const store = (partition: Partition, id: VectorStoreId) => Effect.orDie(storeById({ ...owner(partition), id }))

    const storePage = SqlSchema.findAll({
      Request: Schema.Struct({ ...Owner, ...PageRequest }),
      Result: StoreRowSchema,
      execute: (page) => {
        const cursor = page.after === null
          ? sql`TRUE`
          : page.order === "desc"
          ? sql`(s.created_at, s.id) < (SELECT created_at, id FROM vector_stores WHERE id = ${page.after})`
          : sql`(s.created_at, s.id) > (SELECT created_at, id FROM vector_stores WHERE id = ${page.after})`
        return sql`
          SELECT ${sql.literal(STORE)} FROM vector_stores s WHERE ${mine(page)} AND ${cursor}
          ORDER BY s.created_at ${sql.literal(page.order === "desc" ? "DESC" : "ASC")}, s.id ${sql.literal(page.order === "desc" ? "DESC" : "ASC")}
          LIMIT ${page.limit + 1}`
      }
    })
    /** OpenAI's cursor: the rows after `after` (an id of this partition) in `order`, `limit + 1` to tell `has_more`. */
    const stores = (partition: Partition, page: Page) =>
      Effect.orDie(storePage({ ...owner(partition), limit: page.limit, after: Option.getOrNull(page.after), order: page.order }))

    const updateStoreRow = SqlSchema.findOne({
      Request: Schema.Struct({ ...OwnedStore.fields, name: Schema.NullOr(Schema.String), metadata: Schema.NullOr(Schema.parseJson(Metadata)) }),
      Result: StoreId,
      execute: (change) =>
        sql`
          UPDATE vector_stores s SET
            name = coalesce(${change.name}, s.name),
            metadata = coalesce(${change.metadata}::jsonb, s.metadata),
            last_active_at = now()
          WHERE s.id = ${change.id} AND ${mine(change)} RETURNING s.id`
    })
    const updateStore = (partition: Partition, id: VectorStoreId, change: { name?: string | undefined; metadata?: Record<string, string> | undefined }) =>
      updateStoreRow({ ...owner(partition), id, name: change.name ?? null, metadata: change.metadata ?? null }).pipe(
        Effect.map(Option.isSome),
        Effect.orDie
      )

    const deleteStoreRow = SqlSchema.findOne({
      Request: OwnedStore,
      Result: StoreId,
      execute: (request) => sql`DELETE FROM vector_stores s WHERE s.id = ${request.id} AND ${mine(request)} RETURNING s.id`
    })
    const deleteStore = (partition: Partition, id: VectorStoreId) =>
      deleteStoreRow({ ...owner(partition), id }).pipe(
        Effect.map(Option.isSome),
        Effect.orDie,
        Effect.withSpan("KnowledgeRepo.deleteStore")
      )

    const textSearchConfig = SqlSchema.findOne({
      Request: Schema.String,
      Result: Found,
      execute: (language) => sql`SELECT 1 AS found FROM pg_ts_config WHERE cfgname = ${language}`
    })
    const knowsLanguage = (language: string) => textSearchConfig(language).pipe(Effect.map(Option.isSome), Effect.orDie)

    const ownedStores = SqlSchema.findAll({
      Request: Schema.Struct({ ...Owner, ids: Schema.Array(Schema.String) }),
      Result: StoreId,
      execute: (request) => sql`SELECT s.id FROM vector_stores s WHERE ${sql.in("s.id", request.ids)} AND ${mine(request)}`
    })
    /** Which of `ids` are stores of `partition`. */
    const existing = (partition: Partition, ids: ReadonlyArray<string>) =>
      ids.length === 0
        ? Effect.succeed<ReadonlyArray<string>>([])
        : ownedStores({ ...owner(partition), ids }).pipe(Effect.map((rows) => rows.map((row) => row.id)), Effect.orDie)

    const touchStores = SqlSchema.findAll({
      Request: Schema.Struct({ ...Owner, ids: Schema.Array(Schema.String) }),
      Result: Schema.Struct({ id: Schema.String, language: Schema.String }),
      execute: (request) =>
        sql`
          WITH found AS (SELECT s.id, s.language, s.last_active_at FROM vector_stores s WHERE ${sql.in("s.id", request.ids)} AND ${mine(request)}),
            -- A search marks its stores active, but writes at most once a minute per store: searches stay reads.
            touched AS (
              UPDATE vector_stores SET last_active_at = now()
              WHERE id IN (SELECT id FROM found WHERE last_active_at < now() - interval '1 minute'))
          SELECT id, language FROM found`
    })
    /** The stores among `ids` of `partition`, with their languages (what a search needs). */
    const storesIn = (partition: Partition, ids: ReadonlyArray<string>) =>
      ids.length === 0
        ? Effect.succeed<ReadonlyArray<{ readonly id: string; readonly language: string }>>([])
        : Effect.orDie(touchStores({ ...owner(partition), ids }))

    const lockStore = SqlSchema.findOne({
      Request: OwnedStore,
      Result: StoreId,
      execute: (request) => sql`SELECT s.id FROM vector_stores s WHERE s.id = ${request.id} AND ${mine(request)} FOR UPDATE`
    })
    const shareFile = SqlSchema.findOne({
      Request: Schema.Struct({ ...Owner, id: FileId }),
      Result: Schema.Struct({ size: Schema.NumberFromString }),
      execute: (request) =>
        sql`
          SELECT size::text AS size FROM files
          WHERE id = ${request.id} AND owner_id = ${request.accountId} AND end_user_id = ${request.endUserId}
          FOR SHARE`
    })
    const StoreFileKey = Schema.Struct({ storeId: VectorStoreId, fileId: FileId })
    const storeFileRow = SqlSchema.findOne({
      Request: StoreFileKey,
      Result: StoreFileRowSchema,
      execute: (key) =>
        sql`SELECT ${sql.literal(STORE_FILE)} FROM vector_store_files f WHERE f.store_id = ${key.storeId} AND f.file_id = ${key.fileId}`
    })
    const otherFiles = SqlSchema.single({
      Request: StoreFileKey,
      Result: Schema.Struct({ files: Schema.NumberFromString, bytes: Schema.NumberFromString }),
      execute: (key) =>
        sql`
          SELECT count(*)::text AS files, coalesce(sum(fl.size), 0)::text AS bytes
          FROM vector_store_files f JOIN files fl ON fl.id = f.file_id
          WHERE f.store_id = ${key.storeId} AND f.file_id <> ${key.fileId}`
    })
    const upsertStoreFile = SqlSchema.single({
      Request: Schema.Struct({
        ...StoreFileKey.fields,
        attributes: AttributesJson,
        maxChunkTokens: Schema.Number,
        overlapTokens: Schema.Number
      }),
      Result: StoreFileRowSchema,
      execute: (file) =>
        sql`
          INSERT INTO vector_store_files AS f (store_id, file_id, status, attributes, max_chunk_tokens, overlap_tokens)
          VALUES (${file.storeId}, ${file.fileId}, 'in_progress', ${file.attributes}::jsonb, ${file.maxChunkTokens}, ${file.overlapTokens})
          ON CONFLICT (store_id, file_id) DO UPDATE SET
            status = 'in_progress', last_error_code = NULL, last_error_message = NULL, attributes = EXCLUDED.attributes,
            max_chunk_tokens = EXCLUDED.max_chunk_tokens, overlap_tokens = EXCLUDED.overlap_tokens,
            generation = f.generation + 1, usage_bytes = 0, chunks_total = NULL, chunks_done = 0, tokens_embedded = 0,
            lease_owner = NULL, lease_until = NULL, attempts = 0, updated_at = now()
          RETURNING ${sql.literal(STORE_FILE)}`
    })
    const dropOldChunks = SqlSchema.void({
      Request: Schema.Struct({ ...StoreFileKey.fields, generation: Schema.Number }),
      execute: (key) =>
        sql`DELETE FROM knowledge_chunks WHERE store_id = ${key.storeId} AND file_id = ${key.fileId} AND generation < ${key.generation}`
    })
    const touchStore = SqlSchema.void({
      Request: VectorStoreId,
      execute: (storeId) => sql`UPDATE vector_stores SET last_active_at = now() WHERE id = ${storeId}`
    })

    /**
     * Adds a file (of the store's partition) to a store, or adds it again: a new generation, its old chunks gone,
     * ingestion from the start. The store row is locked first, so two adds cannot both pass the store's caps. Adding
     * again a file that is ingested or being ingested with the same chunking and attributes changes nothing.
     */
    const addFile = (partition: Partition, storeId: VectorStoreId, file: NewStoreFile, limits: Limits) =>
      sql.withTransaction(Effect.gen(function*() {
        const locked = yield* lockStore({ ...owner(partition), id: storeId })
        if (Option.isNone(locked)) return { _tag: "NoStore" } as AddResult
        const found = yield* shareFile({ ...owner(partition), id: file.fileId })
        if (Option.isNone(found)) return { _tag: "NoFile" } as AddResult
        const size = found.value.size
        if (size > limits.maxFileBytes) {
          return { _tag: "OverLimit", message: `${file.fileId} is ${size} bytes; a knowledge base takes files of at most ${limits.maxFileBytes} bytes (KNOWLEDGE_FILE_MAX_BYTES).` } as AddResult
        }
        const existing = yield* storeFileRow({ storeId, fileId: file.fileId })
        if (
          Option.isSome(existing) && existing.value.status !== "failed" && existing.value.status !== "cancelled" &&
          existing.value.maxChunkTokens === file.maxChunkTokens && existing.value.overlapTokens === file.overlapTokens &&
          JSON.stringify(existing.value.attributes) === JSON.stringify(file.attributes)
        ) return { _tag: "Unchanged", file: existing.value } as AddResult
        const totals = yield* otherFiles({ storeId, fileId: file.fileId })
        if (totals.files + 1 > limits.maxStoreFiles) {
          return { _tag: "OverLimit", message: `A knowledge base holds at most ${limits.maxStoreFiles} files (KNOWLEDGE_STORE_MAX_FILES).` } as AddResult
        }
        if (totals.bytes + size > limits.maxStoreBytes) {
          return { _tag: "OverLimit", message: `This file would bring the knowledge base to ${totals.bytes + size} bytes; it holds at most ${limits.maxStoreBytes} (KNOWLEDGE_STORE_MAX_BYTES).` } as AddResult
        }
        const added = yield* upsertStoreFile({ storeId, ...file })
        // The chunks of earlier generations go with the version they belonged to (a first add has none).
        if (added.generation > 1) yield* dropOldChunks({ storeId, fileId: file.fileId, generation: added.generation })
        yield* touchStore(storeId)
        return { _tag: "Added", file: added } as AddResult
      })).pipe(Effect.orDie, Effect.withSpan("KnowledgeRepo.addFile"))

    const ownedStoreFile = SqlSchema.findOne({
      Request: OwnedStoreFile,
      Result: StoreFileRowSchema,
      execute: (request) =>
        sql`
          SELECT ${sql.literal(STORE_FILE)} FROM vector_store_files f JOIN vector_stores s ON s.id = f.store_id
          WHERE f.store_id = ${request.storeId} AND f.file_id = ${request.fileId} AND ${mine(request)}`
    })
    const storeFile = (partition: Partition, storeId: VectorStoreId, fileId: FileId) =>
      Effect.orDie(ownedStoreFile({ ...owner(partition), storeId, fileId }))

    const storeFilePage = SqlSchema.findAll({
      Request: Schema.Struct({ ...Owner, ...PageRequest, storeId: VectorStoreId, status: Schema.NullOr(Schema.String) }),
      Result: StoreFileRowSchema,
      execute: (page) => {
        const dir = sql.literal(page.order === "desc" ? "DESC" : "ASC")
        const cursor = page.after === null
          ? sql`TRUE`
          : sql`(f.created_at, f.file_id) ${sql.literal(page.order === "desc" ? "<" : ">")}
              (SELECT created_at, file_id FROM vector_store_files WHERE store_id = ${page.storeId} AND file_id = ${page.after})`
        return sql`
          SELECT ${sql.literal(STORE_FILE)} FROM vector_store_files f JOIN vector_stores s ON s.id = f.store_id
          WHERE f.store_id = ${page.storeId} AND ${mine(page)} AND ${cursor}
            AND ${page.status !== null ? sql`f.status = ${page.status}` : sql`TRUE`}
          ORDER BY f.created_at ${dir}, f.file_id ${dir} LIMIT ${page.limit + 1}`
      }
    })
    const storeFiles = (partition: Partition, storeId: VectorStoreId, page: Page, status: Option.Option<string>) =>
      Effect.orDie(storeFilePage({
        ...owner(partition),
        storeId,
        limit: page.limit,
        after: Option.getOrNull(page.after),
        order: page.order,
        status: Option.getOrNull(status)
      }))

    const deleteStoreFile = SqlSchema.findOne({
      Request: OwnedStoreFile,
      Result: Schema.Struct({ fileId: FileId }),
      execute: (request) =>
        sql`
          DELETE FROM vector_store_files f USING vector_stores s
          WHERE s.id = f.store_id AND f.store_id = ${request.storeId} AND f.file_id = ${request.fileId} AND ${mine(request)}
          RETURNING f.file_id`
    })
    /** Removes a file from a store; its chunks go with it (foreign key). */
    const removeFile = (partition: Partition, storeId: VectorStoreId, fileId: FileId) =>
      deleteStoreFile({ ...owner(partition), storeId, fileId }).pipe(
        Effect.map(Option.isSome),
        Effect.orDie,
        Effect.withSpan("KnowledgeRepo.removeFile")
      )

    return { insertStore, knowsLanguage, existing, store, stores, updateStore, deleteStore, storesIn, addFile, storeFile, storeFiles, removeFile } as const
  })
}) {}
