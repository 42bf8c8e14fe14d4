import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

/**
 * Schedules (issue 43 item 4, docs/schedules.md): a cron expression in an IANA zone that starts a background run
 * (or a session turn) at each firing. A firing is a row keyed by its schedule and its time, so a firing is made once
 * whoever's scheduler makes it, and started once whatever fails between.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE schedules (
      id text PRIMARY KEY,
      account_id text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      -- the X-End-User-Id the schedule was made for ('' for none): its runs belong to that partition
      end_user_id text NOT NULL DEFAULT '',
      agent text NOT NULL,
      cron text NOT NULL,
      timezone text NOT NULL,
      input text NOT NULL,
      session_id text,
      webhook_id text,
      -- a firing found later than SCHEDULE_MISSED_AFTER: 'run_once' (one run for all that were missed) or 'skip'
      missed text NOT NULL DEFAULT 'run_once',
      description text NOT NULL DEFAULT '',
      -- 'active' or 'paused'
      status text NOT NULL DEFAULT 'active',
      next_run_at timestamptz,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL
    )`
  yield* sql`CREATE INDEX schedules_due ON schedules (next_run_at) WHERE status = 'active'`
  yield* sql`CREATE INDEX schedules_partition ON schedules (account_id, end_user_id, created_at)`
  yield* sql`
    CREATE TABLE schedule_firings (
      schedule_id text NOT NULL REFERENCES schedules(id) ON DELETE CASCADE,
      -- the firing's time, as its cron gave it: with the schedule, its identity
      fire_at timestamptz NOT NULL,
      -- 'pending' (made, not yet started), 'started' (its run or turn is under way), 'skipped' (missed, policy
      -- 'skip'), 'failed' (the expert or the wallet could not run it: schedule.failed was emitted)
      status text NOT NULL DEFAULT 'pending',
      run_id text,
      error text,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL,
      PRIMARY KEY (schedule_id, fire_at)
    )`
  yield* sql`CREATE INDEX schedule_firings_pending ON schedule_firings (created_at) WHERE status = 'pending'`
})
