import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

/**
 * What the run engine keeps: a record of every run (`agent_id` null for a bare model through chat completions) (its outcome feeds operations and self-evolution), free-trial
 * turns per agent, payer and end user, the workspace files the file tools edit, and the memory the memory tools keep.
 * `end_user_id` is '' for a caller acting for itself (a login user, an OAuth app's user); with an API key it is the
 * `X-End-User-Id`, so one account's end users never share files or memory (spec 2.7).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE runs (
      id text PRIMARY KEY,
      agent_id text REFERENCES agents (id),
      agent_version integer,
      payer_id text NOT NULL REFERENCES users (id),
      end_user_id text NOT NULL DEFAULT '',
      session_id text,
      parent_run_id text,
      status text NOT NULL CHECK (status IN ('running', 'completed', 'failed', 'cancelled')),
      failure_code text,
      failure_message text,
      input_tokens integer NOT NULL DEFAULT 0,
      output_tokens integer NOT NULL DEFAULT 0,
      credits_charged bigint NOT NULL DEFAULT 0,
      tools_denied integer NOT NULL DEFAULT 0,
      created_at timestamptz NOT NULL DEFAULT now(),
      finished_at timestamptz
    )`
  yield* sql`CREATE INDEX runs_agent ON runs (agent_id, created_at)`
  yield* sql`
    CREATE TABLE agent_trials (
      agent_id text NOT NULL REFERENCES agents (id),
      payer_id text NOT NULL REFERENCES users (id),
      end_user_id text NOT NULL,
      used integer NOT NULL CHECK (used >= 0),
      PRIMARY KEY (agent_id, payer_id, end_user_id)
    )`
  yield* sql`
    CREATE TABLE workspace_files (
      account_id text NOT NULL REFERENCES users (id),
      end_user_id text NOT NULL,
      workspace text NOT NULL,
      path text NOT NULL,
      content text NOT NULL,
      updated_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (account_id, end_user_id, workspace, path)
    )`
  yield* sql`
    CREATE TABLE agent_memories (
      id bigserial PRIMARY KEY,
      agent_id text NOT NULL REFERENCES agents (id),
      account_id text NOT NULL REFERENCES users (id),
      end_user_id text NOT NULL,
      text text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE INDEX agent_memories_owner ON agent_memories (agent_id, account_id, end_user_id, id)`
})
