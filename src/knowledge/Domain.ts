import { Schema } from "effect"
import { FileId } from "../files/Domain.js"
import { prefixedId } from "../platform/Ids.js"

/**
 * Knowledge's contract (docs/knowledge.md): OpenAI's vector store shapes
 * (https://platform.openai.com/docs/api-reference/vector-stores), with a few fields of ours beside them.
 */

/** A knowledge base's id (`vs_…`, as OpenAI's vector stores). */
export const VectorStoreId = prefixedId("vs", "VectorStoreId")
export type VectorStoreId = typeof VectorStoreId.Type

export const AttributeValue = Schema.Union(Schema.String.pipe(Schema.maxLength(512)), Schema.Number, Schema.Boolean)

/** Up to 16 attributes per file, as OpenAI allows: keys of 64 characters, strings of 512. */
export const Attributes = Schema.Record({ key: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(64)), value: AttributeValue }).pipe(
  Schema.filter((record) => Object.keys(record).length <= 16 || "at most 16 attributes")
)

/** Up to 16 pairs, as OpenAI's `metadata`. */
export const Metadata = Schema.Record({ key: Schema.String.pipe(Schema.maxLength(64)), value: Schema.String.pipe(Schema.maxLength(512)) }).pipe(
  Schema.filter((record) => Object.keys(record).length <= 16 || "at most 16 keys")
)

export const ChunkingStrategy = Schema.Union(
  Schema.Struct({ type: Schema.Literal("auto") }),
  Schema.Struct({
    type: Schema.Literal("static"),
    static: Schema.Struct({
      max_chunk_size_tokens: Schema.Int.pipe(Schema.between(100, 4096)),
      chunk_overlap_tokens: Schema.Int.pipe(Schema.greaterThanOrEqualTo(0))
    }).pipe(Schema.filter((s) => s.chunk_overlap_tokens <= s.max_chunk_size_tokens / 2 || "chunk_overlap_tokens must not exceed half of max_chunk_size_tokens"))
  })
)
export type ChunkingStrategy = typeof ChunkingStrategy.Type

/** OpenAI's default: 800-token chunks overlapping by 400. */
export const DEFAULT_CHUNKING = { max_chunk_size_tokens: 800, chunk_overlap_tokens: 400 } as const

export interface ComparisonFilter {
  readonly type: "eq" | "ne" | "gt" | "gte" | "lt" | "lte" | "in" | "nin"
  readonly key: string
  readonly value: string | number | boolean | ReadonlyArray<string | number>
}
export interface CompoundFilter {
  readonly type: "and" | "or"
  readonly filters: ReadonlyArray<ComparisonFilter | CompoundFilter>
}
export type SearchFilter = ComparisonFilter | CompoundFilter

export const SearchFilter: Schema.Schema<SearchFilter> = Schema.Union(
  Schema.Struct({
    type: Schema.Literal("eq", "ne", "gt", "gte", "lt", "lte", "in", "nin"),
    key: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(64)),
    value: Schema.Union(AttributeValue, Schema.Array(Schema.Union(Schema.String, Schema.Number)).pipe(Schema.maxItems(100)))
  }),
  Schema.Struct({
    type: Schema.Literal("and", "or"),
    filters: Schema.Array(Schema.suspend((): Schema.Schema<SearchFilter> => SearchFilter)).pipe(Schema.maxItems(20))
  })
).annotations({ identifier: "SearchFilter" })

export const Language = Schema.String.pipe(
  Schema.pattern(/^[a-z_]{1,63}$/, { message: () => "must be a text search configuration such as english, simple, german" })
)

/** A knowledge base's name, and a search's query (HTTP and the MCP tools). */
export const StoreName = Schema.String.pipe(Schema.maxLength(256))
export const SearchQuery = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(4000))
export const MaxResults = Schema.Int.pipe(Schema.between(1, 50))

export const CreateVectorStore = Schema.Struct({
  name: Schema.optional(Schema.NullOr(StoreName)),
  description: Schema.optional(Schema.NullOr(Schema.String.pipe(Schema.maxLength(2000)))),
  file_ids: Schema.optional(Schema.Array(FileId.pipe(Schema.maxLength(64))).pipe(Schema.maxItems(500))),
  metadata: Schema.optional(Schema.NullOr(Metadata)),
  chunking_strategy: Schema.optional(ChunkingStrategy),
  expires_after: Schema.optional(Schema.NullOr(Schema.Unknown)),
  /** Ours: the store's text search configuration (default `KNOWLEDGE_LANGUAGE`). */
  language: Schema.optional(Language)
})

export const UpdateVectorStore = Schema.Struct({
  name: Schema.optional(Schema.NullOr(StoreName)),
  metadata: Schema.optional(Schema.NullOr(Metadata)),
  expires_after: Schema.optional(Schema.NullOr(Schema.Unknown))
})

export const FileCounts = Schema.Struct({
  in_progress: Schema.Int,
  completed: Schema.Int,
  failed: Schema.Int,
  cancelled: Schema.Int,
  total: Schema.Int
})

export const VectorStore = Schema.Struct({
  id: Schema.String,
  object: Schema.Literal("vector_store"),
  created_at: Schema.Int,
  name: Schema.String,
  usage_bytes: Schema.Int,
  file_counts: FileCounts,
  status: Schema.Literal("in_progress", "completed", "expired"),
  expires_after: Schema.Null,
  expires_at: Schema.Null,
  last_active_at: Schema.Int,
  metadata: Schema.Record({ key: Schema.String, value: Schema.String }),
  language: Schema.String
}).annotations({ identifier: "VectorStore" })

export const LastError = Schema.Struct({
  code: Schema.Literal("server_error", "unsupported_file", "invalid_file", "insufficient_credits"),
  message: Schema.String
})

export const VectorStoreFile = Schema.Struct({
  id: FileId,
  object: Schema.Literal("vector_store.file"),
  usage_bytes: Schema.Int,
  created_at: Schema.Int,
  vector_store_id: Schema.String,
  status: Schema.Literal("in_progress", "completed", "failed", "cancelled"),
  last_error: Schema.NullOr(LastError),
  chunking_strategy: Schema.Struct({
    type: Schema.Literal("static"),
    static: Schema.Struct({ max_chunk_size_tokens: Schema.Int, chunk_overlap_tokens: Schema.Int })
  }),
  attributes: Schema.Record({ key: Schema.String, value: AttributeValue }),
  /** Ours: ingestion's progress (chunks written of the file's total, none until it is chunked). */
  progress: Schema.Struct({ chunks_done: Schema.Int, chunks_total: Schema.NullOr(Schema.Int) })
}).annotations({ identifier: "VectorStoreFile" })

export const AddVectorStoreFile = Schema.Struct({
  file_id: FileId.pipe(Schema.minLength(1), Schema.maxLength(64)),
  attributes: Schema.optional(Schema.NullOr(Attributes)),
  chunking_strategy: Schema.optional(ChunkingStrategy)
})

export const SearchRequest = Schema.Struct({
  query: Schema.Union(SearchQuery, Schema.Array(Schema.String.pipe(Schema.maxLength(4000))).pipe(Schema.minItems(1), Schema.maxItems(10))),
  filters: Schema.optional(Schema.NullOr(SearchFilter)),
  max_num_results: Schema.optional(MaxResults),
  ranking_options: Schema.optional(Schema.NullOr(Schema.Struct({
    ranker: Schema.optional(Schema.String),
    score_threshold: Schema.optional(Schema.Number.pipe(Schema.between(0, 1)))
  }))),
  rewrite_query: Schema.optional(Schema.NullOr(Schema.Boolean)),
  /** Ours: only these files of the store. */
  file_ids: Schema.optional(Schema.Array(FileId).pipe(Schema.maxItems(100)))
})
export type SearchRequest = typeof SearchRequest.Type

/** One passage found, with where it is: OpenAI's result plus the chunk and its character range (a citation). */
export const SearchResult = Schema.Struct({
  file_id: FileId,
  filename: Schema.String,
  score: Schema.Number,
  attributes: Schema.Record({ key: Schema.String, value: AttributeValue }),
  content: Schema.Array(Schema.Struct({ type: Schema.Literal("text"), text: Schema.String })),
  vector_store_id: Schema.String,
  chunk_index: Schema.Int,
  start_char: Schema.Int,
  end_char: Schema.Int,
  heading: Schema.String
})

export const SearchPage = Schema.Struct({
  object: Schema.Literal("vector_store.search_results.page"),
  search_query: Schema.Array(Schema.String),
  data: Schema.Array(SearchResult),
  has_more: Schema.Boolean,
  next_page: Schema.Null,
  /** Ours: `hybrid` when vectors took part, `full_text` otherwise. */
  ranker: Schema.Literal("hybrid", "full_text")
})

export const ListParams = Schema.Struct({
  limit: Schema.optional(Schema.NumberFromString.pipe(Schema.int(), Schema.between(1, 100))),
  order: Schema.optional(Schema.Literal("asc", "desc")),
  after: Schema.optional(Schema.String),
  before: Schema.optional(Schema.String)
})

export const ListPage = <A, I, R>(item: Schema.Schema<A, I, R>) =>
  Schema.Struct({
    object: Schema.Literal("list"),
    data: Schema.Array(item),
    first_id: Schema.NullOr(Schema.String),
    last_id: Schema.NullOr(Schema.String),
    has_more: Schema.Boolean
  })
