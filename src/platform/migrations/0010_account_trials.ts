import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

/**
 * Free trials bind the paying account per expert (issue 15 item 2, docs/agents.md): the end users of one account
 * share its allowance, kept under `end_user_id = ''`. Trials counted per end user before this are added up into
 * that one row, so an account that rotated `X-End-User-Id` has used what it took.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    INSERT INTO agent_trials (agent_id, payer_id, end_user_id, used)
    SELECT agent_id, payer_id, '', SUM(used)::integer FROM agent_trials WHERE end_user_id <> ''
    GROUP BY agent_id, payer_id
    ON CONFLICT (agent_id, payer_id, end_user_id) DO UPDATE SET used = agent_trials.used + EXCLUDED.used`
  yield* sql`DELETE FROM agent_trials WHERE end_user_id <> ''`
})
