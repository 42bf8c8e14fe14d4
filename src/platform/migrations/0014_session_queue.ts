import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

/**
 * A session's sent turns that have not ended (docs/sessions.md, "Cluster"): a message is acknowledged only once its
 * row is here, and the row goes when the turn has ended in the log. A runner that dies with turns queued leaves
 * their rows; the session's next owner runs them, in order.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE session_queue (
      session_id text NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
      turn integer NOT NULL,
      message text NOT NULL,
      -- the turn's own credit cap in micro-credits, if the message set one
      budget bigint,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (session_id, turn)
    )`
})
