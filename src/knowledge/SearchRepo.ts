import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import type * as Statement from "@effect/sql/Statement"
import { Effect, Option, Schema } from "effect"
import { FileId } from "../files/Domain.js"
import { Json } from "../platform/Rows.js"
import type { CompoundFilter, ComparisonFilter, SearchFilter } from "./Domain.js"

/**
 * Retrieval's SQL (docs/knowledge.md): the full-text and the vector candidates of a search, each ranked by its own
 * measure; `Retrieval.ts` fuses them. Only chunks of a file's current generation that finished ingesting are found.
 */

/** OpenAI's attribute filters: a comparison, or `and`/`or` of filters. */
export type Filter = SearchFilter

const CandidateSchema = Schema.Struct({
  storeId: Schema.String,
  fileId: FileId,
  generation: Schema.Number,
  seq: Schema.Number,
  text: Schema.String,
  heading: Schema.String,
  startChar: Schema.Number,
  endChar: Schema.Number,
  filename: Schema.String,
  attributes: Json(Schema.Record({ key: Schema.String, value: Schema.Union(Schema.String, Schema.Number, Schema.Boolean) })),
  score: Schema.Number
})
export type Candidate = typeof CandidateSchema.Type

export interface Scope {
  readonly storeIds: ReadonlyArray<string>
  readonly fileIds: ReadonlyArray<FileId> | undefined
  readonly filter: Filter | undefined
}

/** A filter is built into SQL fragments as it is (it was decoded at the HTTP edge). */
const FilterValue = Schema.declare((u: unknown): u is Filter => typeof u === "object" && u !== null)
const ScopeSchema = Schema.Struct({
  storeIds: Schema.Array(Schema.String),
  fileIds: Schema.UndefinedOr(Schema.Array(FileId)),
  filter: Schema.UndefinedOr(FilterValue)
})
const FullTextQuery = Schema.Struct({
  scope: ScopeSchema,
  languages: Schema.Array(Schema.String),
  query: Schema.String,
  limit: Schema.Number
})
const NearestQuery = Schema.Struct({
  scope: ScopeSchema,
  vector: Schema.String,
  dims: Schema.Int,
  limit: Schema.Number
})

const COLUMNS = `c.store_id, c.file_id, c.generation, c.seq, c.text, c.heading, c.start_char, c.end_char, fl.filename, f.attributes`

export class SearchRepo extends Effect.Service<SearchRepo>()("atrium/knowledge/SearchRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const comparison = (filter: Filter): Statement.Fragment => {
      switch (filter.type) {
        case "and":
        case "or": {
          const { filters } = filter as CompoundFilter
          if (filters.length === 0) return sql`TRUE`
          return filter.type === "and" ? sql.and(filters.map(comparison)) : sql.or(filters.map(comparison))
        }
        case "eq":
          return sql`f.attributes -> ${filter.key} = ${JSON.stringify(filter.value)}::jsonb`
        case "ne":
          return sql`f.attributes -> ${filter.key} IS DISTINCT FROM ${JSON.stringify(filter.value)}::jsonb`
        case "in":
        case "nin": {
          const any = sql`f.attributes -> ${filter.key} = ANY(ARRAY(SELECT jsonb_array_elements(${JSON.stringify(filter.value)}::jsonb)))`
          return filter.type === "in" ? any : sql`NOT coalesce(${any}, false)`
        }
        default: {
          const { key, value } = filter as ComparisonFilter
          const op = sql.literal({ gt: ">", gte: ">=", lt: "<", lte: "<=" }[filter.type])
          // Numbers compare as numbers, strings as strings; a value of another type never matches.
          return typeof value === "number"
            ? sql`(CASE WHEN jsonb_typeof(f.attributes -> ${key}) = 'number'
                THEN (f.attributes ->> ${key})::numeric ${op} ${value} ELSE false END)`
            : sql`(CASE WHEN jsonb_typeof(f.attributes -> ${key}) = 'string'
                THEN (f.attributes ->> ${key}) ${op} ${String(value)} ELSE false END)`
        }
      }
    }

    const where = (scope: typeof ScopeSchema.Encoded) =>
      sql.and([
        sql.in("c.store_id", scope.storeIds),
        sql`f.status = 'completed'`,
        scope.fileIds === undefined ? sql`TRUE` : scope.fileIds.length === 0 ? sql`FALSE` : sql.in("c.file_id", scope.fileIds),
        scope.filter === undefined ? sql`TRUE` : comparison(scope.filter)
      ])

    /**
     * Chunks matching any word of the query (`|` of its lexemes: a question seldom has every word in one passage),
     * ranked by `ts_rank_cd` (cover density, normalised to [0, 1)). The query is parsed with each searched store's
     * language, so stemming matches the chunks' own.
     */
    const fullTextRows = SqlSchema.findAll({ Request: FullTextQuery, Result: CandidateSchema, execute: ({ languages, limit, query, scope }) => {
      const parts = languages.map((language) => sql`replace(plainto_tsquery(${language}::regconfig, ${query})::text, ' & ', ' | ')::tsquery`)
      const combined = parts.slice(1).reduce((all, part) => sql`${all} || ${part}`, parts[0]!)
      return sql`
        WITH q AS (SELECT (${combined}) AS tsq)
        SELECT ${sql.literal(COLUMNS)}, ts_rank_cd(c.tsv, q.tsq, 32)::float8 AS score
        FROM q, knowledge_chunks c
          JOIN vector_store_files f ON f.store_id = c.store_id AND f.file_id = c.file_id AND f.generation = c.generation
          JOIN files fl ON fl.id = c.file_id
        WHERE c.tsv @@ q.tsq AND ${where(scope)}
        ORDER BY score DESC, c.store_id, c.file_id, c.seq
        LIMIT ${limit}`
    } })
    const fullText = (scope: Scope, languages: ReadonlyArray<string>, query: string, limit: number) =>
      fullTextRows({ scope, languages, query, limit }).pipe(Effect.orDie, Effect.withSpan("SearchRepo.fullText"))

    /** Nearest chunks by cosine similarity, through the HNSW index of the vectors' dimension. */
    const nearestRows = SqlSchema.findAll({ Request: NearestQuery, Result: CandidateSchema, execute: ({ dims, limit, scope, vector }) =>
      sql`
        SELECT ${sql.literal(COLUMNS)}, (1 - (c.embedding::vector(${sql.literal(String(dims))}) <=> ${vector}::vector(${sql.literal(String(dims))})))::float8 AS score
        FROM knowledge_chunks c
          JOIN vector_store_files f ON f.store_id = c.store_id AND f.file_id = c.file_id AND f.generation = c.generation
          JOIN files fl ON fl.id = c.file_id
        WHERE c.embedding_dims = ${dims} AND ${where(scope)}
        ORDER BY c.embedding::vector(${sql.literal(String(dims))}) <=> ${vector}::vector(${sql.literal(String(dims))})
        LIMIT ${limit}` })
    const nearest = (scope: Scope, vector: string, dims: number, limit: number) =>
      nearestRows({ scope, vector, dims, limit }).pipe(Effect.orDie, Effect.withSpan("SearchRepo.nearest"))

    /** Whether chunks can hold embeddings here (the `vector` extension and the column exist). */
    const hasEmbeddings = SqlSchema.findOne({
      Request: Schema.Void,
      Result: Schema.Struct({ found: Schema.Literal(1) }),
      execute: () =>
        sql`SELECT 1 AS found FROM information_schema.columns WHERE table_name = 'knowledge_chunks' AND column_name = 'embedding'`
    })(undefined).pipe(Effect.map(Option.isSome), Effect.orDie)

    /** The HNSW index of one dimension, over the chunks of that dimension (a partial expression index). */
    const ensureIndex = (dims: number) =>
      sql.unsafe(
        `CREATE INDEX IF NOT EXISTS knowledge_chunks_hnsw_${dims} ON knowledge_chunks
         USING hnsw ((embedding::vector(${dims})) vector_cosine_ops) WHERE embedding_dims = ${dims}`
      ).pipe(Effect.asVoid, Effect.withSpan("SearchRepo.ensureIndex"))

    return { fullText, nearest, hasEmbeddings, ensureIndex } as const
  })
}) {}
