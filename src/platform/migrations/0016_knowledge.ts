import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

/**
 * Knowledge bases (docs/knowledge.md): OpenAI-compatible vector stores, the files added to them with their
 * ingestion status, and the files' chunks. Both a store and its files belong to one partition (account and end
 * user, as files do). A chunk is indexed for full-text search by its `tsv`, always; its embedding is a second,
 * optional step below.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE vector_stores (
      id text PRIMARY KEY,
      owner_id text NOT NULL REFERENCES users (id),
      end_user_id text NOT NULL DEFAULT '',
      name text NOT NULL DEFAULT '',
      metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
      -- the text search configuration its chunks are indexed and searched with ('english', 'simple', ...)
      language text NOT NULL DEFAULT 'english',
      created_at timestamptz NOT NULL DEFAULT now(),
      last_active_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE INDEX vector_stores_partition ON vector_stores (owner_id, end_user_id, created_at)`
  // A file in a store. `generation` grows each time the file is (re-)added: a worker's writes carry the
  // generation it claimed, so a worker that lost its claim (the file was re-added or removed meanwhile, or its
  // lease passed to another runner) writes nothing. `lease_until` is the durable claim of ingestion: a row
  // `in_progress` whose lease has passed is any runner's to take (a restart, a dead runner).
  yield* sql`
    CREATE TABLE vector_store_files (
      store_id text NOT NULL REFERENCES vector_stores (id) ON DELETE CASCADE,
      file_id text NOT NULL REFERENCES files (id) ON DELETE CASCADE,
      status text NOT NULL CHECK (status IN ('in_progress', 'completed', 'failed', 'cancelled')),
      last_error_code text,
      last_error_message text,
      attributes jsonb NOT NULL DEFAULT '{}'::jsonb,
      max_chunk_tokens integer NOT NULL,
      overlap_tokens integer NOT NULL,
      generation integer NOT NULL DEFAULT 1,
      usage_bytes bigint NOT NULL DEFAULT 0,
      chunks_total integer,
      chunks_done integer NOT NULL DEFAULT 0,
      tokens_embedded bigint NOT NULL DEFAULT 0,
      lease_owner text,
      lease_until timestamptz,
      attempts integer NOT NULL DEFAULT 0,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (store_id, file_id)
    )`
  yield* sql`CREATE INDEX vector_store_files_pending ON vector_store_files (lease_until) WHERE status = 'in_progress'`
  yield* sql`CREATE INDEX vector_store_files_file ON vector_store_files (file_id)`
  yield* sql`
    CREATE TABLE knowledge_chunks (
      store_id text NOT NULL,
      file_id text NOT NULL,
      generation integer NOT NULL,
      seq integer NOT NULL,
      text text NOT NULL,
      heading text NOT NULL DEFAULT '',
      start_char integer NOT NULL,
      end_char integer NOT NULL,
      tokens integer NOT NULL,
      tsv tsvector NOT NULL,
      PRIMARY KEY (store_id, file_id, generation, seq),
      FOREIGN KEY (store_id, file_id) REFERENCES vector_store_files (store_id, file_id) ON DELETE CASCADE
    )`
  yield* sql`CREATE INDEX knowledge_chunks_tsv ON knowledge_chunks USING gin (tsv)`
  yield* addEmbeddings
})

/**
 * The embedding column, only where the `vector` extension exists (PGlite ships it; a PostgreSQL server needs
 * pgvector installed). Without it nothing fails: knowledge is full-text only, and `Knowledge` tries this again at
 * start when an embedding provider is configured (pgvector installed later). In a savepoint, so that a refused
 * `CREATE EXTENSION` (not a superuser, extension not trusted) leaves the migration's transaction usable. The
 * column has no fixed dimension (`embedding_dims` says it): providers differ, and the HNSW index is built per
 * dimension over `embedding::vector(n)` once a provider's dimension is known.
 */
export const addEmbeddings = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const available = yield* sql`SELECT 1 AS one FROM pg_available_extensions WHERE name = 'vector'`
  if (available.length === 0) return false
  return yield* sql.withTransaction(Effect.gen(function*() {
    yield* sql`CREATE EXTENSION IF NOT EXISTS vector`
    yield* sql`ALTER TABLE knowledge_chunks ADD COLUMN IF NOT EXISTS embedding vector`
    yield* sql`ALTER TABLE knowledge_chunks ADD COLUMN IF NOT EXISTS embedding_dims integer`
    return true
  })).pipe(Effect.catchAll((error) => Effect.as(Effect.logWarning("knowledge: the vector extension could not be enabled", error), false)))
})
