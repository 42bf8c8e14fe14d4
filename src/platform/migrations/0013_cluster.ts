import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

/**
 * Pending approvals in cluster mode (docs/sessions.md, "Cluster"): the run that waits for an approval lives in one
 * runner's memory, and the answer may reach any runner. The row says the approval exists and whose it is, so any
 * runner can check and claim the answer (deleting the row) before it tells the waiting runner through
 * `pg_notify`. Embedded mode (one process) writes no rows.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE pending_approvals (
      id text PRIMARY KEY,
      account_id text NOT NULL,
      end_user_id text NOT NULL,
      -- the session whose turn waits, if any: answered through a session, only that one may claim it
      session_id text,
      expires_at timestamptz NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )`
})
