import { Effect, Option } from "effect"
import type { FileId } from "../files/Domain.js"
import type { Partition } from "../identity/Partition.js"
import { InvalidRequest, NotFound } from "../platform/Errors.js"
import type { UserId } from "../platform/Ids.js"
import { KnowledgeConfig } from "./Config.js"
import { type ChunkingStrategy, DEFAULT_CHUNKING, type SearchFilter, type SearchRequest, VectorStoreId } from "./Domain.js"
import { Ingestion } from "./Ingestion.js"
import { KnowledgeRepo, type Page, type StoreFileRow, type StoreRow } from "./Repo.js"
import { type Passage, Retrieval } from "./Retrieval.js"

/**
 * Knowledge bases (docs/knowledge.md): OpenAI-compatible vector stores of one partition (account and end user,
 * like files), the files added to them, and their search. Anything of another partition is not found (404).
 */

const seconds = (date: Date) => Math.floor(date.getTime() / 1000)

export const storeView = (row: StoreRow) => ({
  id: row.id,
  object: "vector_store" as const,
  created_at: seconds(row.createdAt),
  name: row.name,
  usage_bytes: row.usageBytes,
  file_counts: {
    in_progress: row.inProgress,
    completed: row.completed,
    failed: row.failed,
    cancelled: row.cancelled,
    total: row.inProgress + row.completed + row.failed + row.cancelled
  },
  status: row.inProgress > 0 ? "in_progress" as const : "completed" as const,
  expires_after: null,
  expires_at: null,
  last_active_at: seconds(row.lastActiveAt),
  metadata: row.metadata,
  language: row.language
})

const ERROR_CODES = new Set(["server_error", "unsupported_file", "invalid_file", "insufficient_credits"])

export const fileView = (row: StoreFileRow) => ({
  id: row.fileId,
  object: "vector_store.file" as const,
  usage_bytes: row.usageBytes,
  created_at: seconds(row.createdAt),
  vector_store_id: row.storeId,
  status: row.status,
  last_error: row.status === "failed"
    ? {
      code: (ERROR_CODES.has(row.lastErrorCode ?? "") ? row.lastErrorCode : "server_error") as "server_error",
      message: row.lastErrorMessage ?? "Ingestion failed."
    }
    : null,
  chunking_strategy: {
    type: "static" as const,
    static: { max_chunk_size_tokens: row.maxChunkTokens, chunk_overlap_tokens: row.overlapTokens }
  },
  attributes: row.attributes,
  progress: { chunks_done: row.chunksDone, chunks_total: row.chunksTotal }
})

export const passageView = (passage: Passage) => ({
  file_id: passage.fileId,
  filename: passage.filename,
  score: Math.round(passage.fusedScore * 1e6) / 1e6,
  attributes: passage.attributes,
  content: [{ type: "text" as const, text: passage.text }],
  vector_store_id: passage.storeId,
  chunk_index: passage.seq,
  start_char: passage.startChar,
  end_char: passage.endChar,
  heading: passage.heading
})

const chunkingOf = (strategy: ChunkingStrategy | undefined) =>
  strategy === undefined || strategy.type === "auto"
    ? { maxChunkTokens: DEFAULT_CHUNKING.max_chunk_size_tokens, overlapTokens: DEFAULT_CHUNKING.chunk_overlap_tokens }
    : { maxChunkTokens: strategy.static.max_chunk_size_tokens, overlapTokens: strategy.static.chunk_overlap_tokens }

/** A page of OpenAI's lists from `limit + 1` rows. */
const pageOf = <Row, View extends { id: string }>(rows: ReadonlyArray<Row>, limit: number, view: (row: Row) => View) => {
  const data = rows.slice(0, limit).map(view)
  return {
    object: "list" as const,
    data,
    first_id: data[0]?.id ?? null,
    last_id: data[data.length - 1]?.id ?? null,
    has_more: rows.length > limit
  }
}

export interface ListQuery {
  readonly limit?: number | undefined
  readonly order?: "asc" | "desc" | undefined
  readonly after?: string | undefined
}

const pageParams = (query: ListQuery): Page => ({
  limit: query.limit ?? 20,
  order: query.order ?? "desc",
  after: Option.fromNullable(query.after)
})

export class Knowledge extends Effect.Service<Knowledge>()("atrium/knowledge/Knowledge", {
  effect: Effect.gen(function*() {
    const config = yield* KnowledgeConfig
    const repo = yield* KnowledgeRepo
    const ingestion = yield* Ingestion
    const retrieval = yield* Retrieval
    const limits = { maxFileBytes: config.maxFileBytes, maxStoreBytes: config.maxStoreBytes, maxStoreFiles: config.maxStoreFiles }

    const noStore = (...ids: ReadonlyArray<string>) => new NotFound({ message: `No vector store ${ids.join(", ")}.` })

    const retrieve = Effect.fn("Knowledge.retrieve")(function*(partition: Partition, id: VectorStoreId) {
      const row = yield* repo.store(partition, id)
      if (Option.isNone(row)) return yield* noStore(id)
      return storeView(row.value)
    })

    const addFile = Effect.fn("Knowledge.addFile")(function*(
      partition: Partition,
      storeId: VectorStoreId,
      input: { fileId: FileId; attributes?: Record<string, string | number | boolean> | null | undefined; chunking?: ChunkingStrategy | undefined }
    ) {
      const result = yield* repo.addFile(partition, storeId, { fileId: input.fileId, attributes: input.attributes ?? {}, ...chunkingOf(input.chunking) }, limits)
      switch (result._tag) {
        case "NoStore":
          return yield* noStore(storeId)
        case "NoFile":
          return yield* new InvalidRequest({ message: `Invalid request: file_id: no file ${input.fileId} of yours.`, param: "file_id" })
        case "OverLimit":
          return yield* new InvalidRequest({ message: `Invalid request: file_id: ${result.message}`, param: "file_id" })
        case "Added":
          yield* ingestion.wake
          return fileView(result.file)
        case "Unchanged":
          return fileView(result.file)
      }
    })

    const create = Effect.fn("Knowledge.create")(function*(partition: Partition, input: {
      name?: string | null | undefined
      metadata?: Record<string, string> | null | undefined
      language?: string | undefined
      fileIds?: ReadonlyArray<FileId> | undefined
      chunking?: ChunkingStrategy | undefined
    }) {
      const id = VectorStoreId.random()
      const language = input.language ?? config.language
      // A language PostgreSQL does not know would fail every chunk's `::regconfig`: refused here instead.
      if (!(yield* repo.knowsLanguage(language))) {
        return yield* new InvalidRequest({ message: `Invalid request: language: no text search configuration ${language}.`, param: "language" })
      }
      yield* repo.insertStore(partition, { id, name: input.name ?? "", metadata: input.metadata ?? {}, language })
      for (const fileId of input.fileIds ?? []) {
        yield* addFile(partition, id, { fileId, chunking: input.chunking }).pipe(
          Effect.catchTag("InvalidRequest", (error) => Effect.zipRight(repo.deleteStore(partition, id), Effect.fail(error)))
        )
      }
      return yield* retrieve(partition, id)
    })

    const list = Effect.fn("Knowledge.list")(function*(partition: Partition, query: ListQuery) {
      const page = pageParams(query)
      return pageOf(yield* repo.stores(partition, page), page.limit, storeView)
    })

    const update = Effect.fn("Knowledge.update")(function*(partition: Partition, id: VectorStoreId, change: { name?: string | null | undefined; metadata?: Record<string, string> | null | undefined }) {
      const found = yield* repo.updateStore(partition, id, { name: change.name ?? undefined, metadata: change.metadata ?? undefined })
      if (!found) return yield* noStore(id)
      return yield* retrieve(partition, id)
    })

    const remove = Effect.fn("Knowledge.remove")(function*(partition: Partition, id: VectorStoreId) {
      if (!(yield* repo.deleteStore(partition, id))) return yield* noStore(id)
      return { id, object: "vector_store.deleted" as const, deleted: true as const }
    })

    const file = Effect.fn("Knowledge.file")(function*(partition: Partition, storeId: VectorStoreId, fileId: FileId) {
      const row = yield* repo.storeFile(partition, storeId, fileId)
      if (Option.isNone(row)) return yield* new NotFound({ message: `No file ${fileId} in vector store ${storeId}.` })
      return fileView(row.value)
    })

    const files = Effect.fn("Knowledge.files")(function*(partition: Partition, storeId: VectorStoreId, query: ListQuery & { filter?: string | undefined }) {
      yield* retrieve(partition, storeId)
      const page = pageParams(query)
      return pageOf(yield* repo.storeFiles(partition, storeId, page, Option.fromNullable(query.filter)), page.limit, fileView)
    })

    const removeFile = Effect.fn("Knowledge.removeFile")(function*(partition: Partition, storeId: VectorStoreId, fileId: FileId) {
      if (!(yield* repo.removeFile(partition, storeId, fileId))) {
        return yield* new NotFound({ message: `No file ${fileId} in vector store ${storeId}.` })
      }
      return { id: fileId, object: "vector_store.file.deleted" as const, deleted: true as const }
    })

    /**
     * Searches stores of `owner`, all of which must exist there (one that does not is 404, as on every route). The
     * query's embedding, when there is one, is paid by `payer`.
     */
    const searchStores = Effect.fn("Knowledge.searchStores")(function*(
      owner: Partition,
      storeIds: ReadonlyArray<string>,
      request: {
        readonly query: string
        readonly maxResults?: number | undefined
        readonly scoreThreshold?: number | undefined
        readonly fileIds?: ReadonlyArray<FileId> | undefined
        readonly filter?: SearchFilter | null | undefined
      },
      payer: UserId
    ) {
      const unique = [...new Set(storeIds)]
      const stores = yield* repo.storesIn(owner, unique)
      const missing = unique.filter((id) => !stores.some((store) => store.id === id))
      if (missing.length > 0) return yield* noStore(...missing)
      return yield* retrieval.search(stores, {
        query: request.query,
        maxResults: request.maxResults ?? 10,
        scoreThreshold: request.scoreThreshold ?? 0,
        fileIds: request.fileIds,
        filter: request.filter ?? undefined
      }, payer)
    })

    const search = Effect.fn("Knowledge.search")(function*(partition: Partition, storeId: VectorStoreId, request: SearchRequest) {
      const queries = typeof request.query === "string" ? [request.query] : request.query
      const found = yield* searchStores(partition, [storeId], {
        query: queries.join(" "),
        maxResults: request.max_num_results,
        scoreThreshold: request.ranking_options?.score_threshold,
        fileIds: request.file_ids,
        filter: request.filters
      }, partition.accountId)
      return {
        object: "vector_store.search_results.page" as const,
        search_query: queries,
        data: found.passages.map(passageView),
        has_more: false,
        next_page: null,
        ranker: found.ranker
      }
    })

    return { create, list, retrieve, update, remove, addFile, file, files, removeFile, search, searchStores } as const
  }),
  dependencies: [KnowledgeConfig.Default, KnowledgeRepo.Default, Ingestion.Default, Retrieval.Default]
}) {}
