import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

/**
 * Sessions: long-lived conversations owned by an account and, with an API key, one of its end users. A session's
 * history is its messages (one row per turn, whole turns so a context cut never splits a tool call from its
 * result); its event log holds every public event with a session-wide `seq`, so a subscriber can come back after
 * any point and miss nothing.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE sessions (
      id text PRIMARY KEY,
      agent_id text NOT NULL REFERENCES agents (id),
      account_id text NOT NULL REFERENCES users (id),
      end_user_id text NOT NULL,
      environment_id text REFERENCES environments (id),
      title text,
      metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
      status text NOT NULL DEFAULT 'idle' CHECK (status IN ('idle', 'running', 'waiting_approval')),
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE INDEX sessions_owner ON sessions (account_id, end_user_id, created_at DESC, id)`
  yield* sql`
    CREATE TABLE session_turns (
      session_id text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
      turn integer NOT NULL,
      run_id text NOT NULL,
      messages jsonb NOT NULL,
      chars integer NOT NULL,
      status text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (session_id, turn)
    )`
  yield* sql`
    CREATE TABLE session_events (
      session_id text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
      seq bigint NOT NULL,
      turn integer NOT NULL,
      payload jsonb NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (session_id, seq)
    )`
})
