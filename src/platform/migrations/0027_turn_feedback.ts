import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

/**
 * Thumbs on an answer (issue 48, docs/sessions.md "Feedback"): one rating per turn of a session, by the session's own
 * end user. `shared` is that user's consent that the turn's messages may go to the expert's creator (an evaluation
 * dataset's row, issue 46); without it the creator sees counts only.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE turn_feedback (
      session_id text NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
      turn integer NOT NULL,
      agent_id text NOT NULL,
      rating text NOT NULL CHECK (rating IN ('up', 'down')),
      reason text,
      shared boolean NOT NULL DEFAULT false,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (session_id, turn)
    )
  `
  // The creator's counts per expert (and, with evaluations, the shared thumbs-down of one expert).
  yield* sql`CREATE INDEX turn_feedback_agent ON turn_feedback (agent_id, rating)`
})
