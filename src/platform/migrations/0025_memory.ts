import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

/**
 * Memory (issue 47, docs/memory.md): what an expert keeps about each of its end users. Blocks are labelled texts with
 * a limit in characters, shown in every turn's context, each change kept as a version; facts are short statements
 * that are superseded, never deleted by the model. Everything is keyed by the expert and the end user's partition
 * (account + end user id), like files and sessions. The notes `memory_save` kept in `agent_memories` become facts.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE memory_blocks (
      agent_id text NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
      account_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
      end_user_id text NOT NULL,
      label text NOT NULL,
      value text NOT NULL,
      -- 1 for the first value; each change adds one and keeps the value it replaced in memory_block_versions
      version integer NOT NULL,
      updated_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (agent_id, account_id, end_user_id, label)
    )`
  yield* sql`
    CREATE TABLE memory_block_versions (
      agent_id text NOT NULL,
      account_id text NOT NULL,
      end_user_id text NOT NULL,
      label text NOT NULL,
      version integer NOT NULL,
      value text NOT NULL,
      -- who wrote the version: 'model' (a tool call), 'user' (PATCH /v1/memory/blocks), 'extraction'
      written_by text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (agent_id, account_id, end_user_id, label, version),
      FOREIGN KEY (agent_id, account_id, end_user_id, label)
        REFERENCES memory_blocks (agent_id, account_id, end_user_id, label) ON DELETE CASCADE
    )`
  yield* sql`
    CREATE TABLE memory_facts (
      id text PRIMARY KEY,
      agent_id text NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
      account_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
      end_user_id text NOT NULL,
      text text NOT NULL,
      valid_from timestamptz NOT NULL DEFAULT now(),
      -- set once, when a newer fact replaces it (fact_supersede); a superseded fact stays, out of the context
      superseded_at timestamptz,
      superseded_by text,
      -- 'model', 'migration' (a memory_save note of before), 'extraction'
      source text NOT NULL,
      search tsvector GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED
    )`
  yield* sql`CREATE INDEX memory_facts_owner ON memory_facts (agent_id, account_id, end_user_id, valid_from)`
  yield* sql`CREATE INDEX memory_facts_search ON memory_facts USING gin (search)`
  yield* sql`
    INSERT INTO memory_facts (id, agent_id, account_id, end_user_id, text, valid_from, source)
    SELECT 'fact_m' || id::text, agent_id, account_id, end_user_id, text, created_at, 'migration' FROM agent_memories`
  yield* sql`DROP TABLE agent_memories`
})
