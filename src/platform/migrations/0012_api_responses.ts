import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

/**
 * Responses of the OpenAI-compatible `/v1/responses` (docs/runs.md): what a client may retrieve, cancel, list the
 * input of, and continue with `previous_response_id`. `body` is the response object as last told; `session_id` is
 * the session the response's conversation lives in (an agent's), or null for a conversation kept here, in
 * `messages` (a bare model's, or one with the caller's own tools).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE api_responses (
      id text PRIMARY KEY,
      account_id text NOT NULL REFERENCES users (id),
      end_user_id text NOT NULL,
      session_id text,
      status text NOT NULL CHECK (status IN ('in_progress', 'completed', 'failed', 'cancelled')),
      body jsonb NOT NULL,
      input jsonb NOT NULL,
      messages jsonb,
      created_at timestamptz NOT NULL DEFAULT now()
    )`
})
