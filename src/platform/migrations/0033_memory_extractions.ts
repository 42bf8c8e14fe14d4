import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

/**
 * Durable memory extraction (issue 47 item 2, docs/memory.md "Extraction"): a finished turn waits here for the
 * extraction that reads it, so a runner that stops before the extraction ran loses nothing: the extraction's
 * workflow, executed again on another runner, finds its turns in this table. An extraction claims the turns it reads
 * (`extraction_id`, its identity) and deletes them once its proposals are written.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE memory_extraction_turns (
      run_id text PRIMARY KEY,
      agent_id text NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
      account_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
      end_user_id text NOT NULL,
      -- the expert's identifier, its models (model and fallbacks) and memory settings as the turn had them
      agent text NOT NULL,
      models jsonb NOT NULL,
      settings jsonb NOT NULL,
      message text NOT NULL,
      answer text NOT NULL,
      -- the extraction that took the turn (its workflow's id): null while it waits for one
      extraction_id text,
      created_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE INDEX memory_extraction_turns_owner ON memory_extraction_turns (agent_id, account_id, end_user_id, created_at)`
})
