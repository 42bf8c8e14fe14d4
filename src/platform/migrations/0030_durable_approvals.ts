import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

/**
 * Durable approvals (issue 43 item 2, docs/runs.md "Approvals in a background run"): a background run waiting for an
 * approval holds no fiber anywhere; its workflow is suspended on a `DurableDeferred`. The approval's row names the
 * run (`run_id`), so the runner that takes the answer, whichever it is, resolves that run's deferred (its token is the
 * run's workflow execution and the approval's id) rather than telling a waiting runner. Null: the waiting run is in a
 * runner's memory, as before (a foreground run, a session's turn). Rows of a run go when it ends.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE pending_approvals ADD COLUMN run_id text`
  yield* sql`CREATE INDEX pending_approvals_run ON pending_approvals (run_id) WHERE run_id IS NOT NULL`
})
