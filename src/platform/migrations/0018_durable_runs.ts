import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

/**
 * Durable runs (issue 43, docs/runs.md):
 *
 * - Every run answers `GET /v1/runs/:id`: its row gains what the answer tells (the agent's identifier, kept also for
 *   a bare model, which has no `agent_id`; the answer's text; why it ended incomplete) and the states of a background
 *   run (`queued` before a runner takes it, `incomplete` past its deadline). `running` stays the state of a run in
 *   progress (`in_progress` on the wire), so rows written before this migration read the same.
 * - A background run's `request` is what its workflow needs to run it on any runner (the message, the budget, the
 *   history), `deadline_at` when it ends `incomplete`, `cancel_requested_at` the cancel any runner may write and the
 *   runner running it reads.
 * - `run_events`: a background run's public events in order, written by whichever runner runs it and read by any,
 *   while it runs and after it ended (`GET /v1/runs/:id/events`).
 * - A background response (`/v1/responses` with `background: true`) is `queued` first and may end `incomplete`; it
 *   names its run.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE runs DROP CONSTRAINT runs_status_check`
  yield* sql`
    ALTER TABLE runs ADD CONSTRAINT runs_status_check
      CHECK (status IN ('queued', 'running', 'completed', 'failed', 'cancelled', 'incomplete'))`
  yield* sql`ALTER TABLE runs ADD COLUMN agent text`
  yield* sql`ALTER TABLE runs ADD COLUMN output text`
  yield* sql`ALTER TABLE runs ADD COLUMN background boolean NOT NULL DEFAULT false`
  yield* sql`ALTER TABLE runs ADD COLUMN request jsonb`
  yield* sql`ALTER TABLE runs ADD COLUMN deadline_at timestamptz`
  yield* sql`ALTER TABLE runs ADD COLUMN cancel_requested_at timestamptz`
  yield* sql`ALTER TABLE runs ADD COLUMN incomplete_reason text`
  yield* sql`ALTER TABLE runs ADD COLUMN started_at timestamptz`
  // A caller's runs, newest first (GET /v1/runs pages by (created_at, id)).
  yield* sql`CREATE INDEX runs_caller ON runs (payer_id, end_user_id, created_at DESC, id DESC)`
  yield* sql`
    CREATE TABLE run_events (
      run_id text NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
      seq integer NOT NULL CHECK (seq > 0),
      payload jsonb NOT NULL,
      PRIMARY KEY (run_id, seq)
    )`
  yield* sql`ALTER TABLE api_responses DROP CONSTRAINT api_responses_status_check`
  yield* sql`
    ALTER TABLE api_responses ADD CONSTRAINT api_responses_status_check
      CHECK (status IN ('queued', 'in_progress', 'completed', 'failed', 'cancelled', 'incomplete'))`
  yield* sql`ALTER TABLE api_responses ADD COLUMN run_id text`
})
