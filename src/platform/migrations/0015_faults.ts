import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

/**
 * Exactly once under faults (issues 26 and 33, docs/operations.md "Fault model"):
 *
 * - A turn has one terminal event (`run.completed` is `complete`, `run.failed` is `error` in the log's payload): the
 *   database refuses a second one, so a runner that woke from a pause, or retried an end it thought lost, cannot end
 *   a turn the next owner already closed.
 * - A claimed approval keeps its answer in its row until the waiting run is done with it: a runner whose listening
 *   connection was down when the answer's notification went out reads it from there when it listens again.
 * - Create idempotency keys live here, not in Redis, so a Redis flush or loss does not make a create twice.
 * - Each runner files its connections' `application_name` under its address, so the others can end the database
 *   sessions of one that stopped answering (a paused process keeps its advisory locks otherwise).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE UNIQUE INDEX session_events_one_end ON session_events (session_id, turn)
    WHERE payload->>'type' IN ('complete', 'error')`
  yield* sql`ALTER TABLE pending_approvals ADD COLUMN answer jsonb`
  yield* sql`
    CREATE TABLE idempotency_keys (
      -- the account's, end user's and key's hashes (Idempotency.ts); the value is the claim or the stored answer
      key text PRIMARY KEY,
      value text NOT NULL,
      expires_at timestamptz NOT NULL
    )`
  yield* sql`
    CREATE TABLE cluster_runner_backends (
      address text PRIMARY KEY,
      application_name text NOT NULL,
      updated_at timestamptz NOT NULL DEFAULT now()
    )`
})
