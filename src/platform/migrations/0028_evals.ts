import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

/**
 * Evaluations (issue 46 item 3, docs/evals.md): datasets of an expert (rows: an input and what is expected of the
 * answer), eval runs of a dataset against one version of the expert (or its draft), and one result per row, which
 * names the background run that answered it (its trace is that run's).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE eval_datasets (
      id text PRIMARY KEY,
      agent_id text NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
      owner_id text NOT NULL,
      name text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )
  `
  yield* sql`CREATE INDEX eval_datasets_owner ON eval_datasets (owner_id, created_at DESC, id DESC)`
  yield* sql`
    CREATE TABLE eval_rows (
      id text PRIMARY KEY,
      dataset_id text NOT NULL REFERENCES eval_datasets(id) ON DELETE CASCADE,
      position bigint NOT NULL,
      input jsonb NOT NULL,
      expected jsonb NOT NULL,
      source text NOT NULL,
      -- Where an imported row came from (a thumbs-down turn: session:turn), so importing it again adds nothing.
      source_ref text,
      created_at timestamptz NOT NULL DEFAULT now()
    )
  `
  yield* sql`CREATE UNIQUE INDEX eval_rows_order ON eval_rows (dataset_id, position)`
  yield* sql`CREATE UNIQUE INDEX eval_rows_source ON eval_rows (dataset_id, source_ref) WHERE source_ref IS NOT NULL`
  yield* sql`
    CREATE TABLE eval_runs (
      id text PRIMARY KEY,
      dataset_id text NOT NULL REFERENCES eval_datasets(id) ON DELETE CASCADE,
      agent_id text NOT NULL,
      agent text NOT NULL,
      -- The version evaluated; null: the draft, whose configuration's fingerprint is in config_hash.
      version integer,
      config_hash text NOT NULL,
      owner_id text NOT NULL,
      graders jsonb NOT NULL,
      concurrency integer NOT NULL,
      status text NOT NULL CHECK (status IN ('running', 'completed', 'failed', 'cancelled')),
      estimate_micros bigint NOT NULL,
      rows_total integer NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      finished_at timestamptz
    )
  `
  yield* sql`CREATE INDEX eval_runs_owner ON eval_runs (owner_id, created_at DESC, id DESC)`
  yield* sql`CREATE INDEX eval_runs_gate ON eval_runs (dataset_id, agent_id, version, finished_at DESC) WHERE status = 'completed'`
  yield* sql`CREATE INDEX eval_runs_active ON eval_runs (created_at) WHERE status = 'running'`
  yield* sql`
    CREATE TABLE eval_results (
      eval_run_id text NOT NULL REFERENCES eval_runs(id) ON DELETE CASCADE,
      position integer NOT NULL,
      row_id text NOT NULL,
      -- The background run that answers the row, its id chosen before it starts (a pass that dies between the two
      -- starts the same run again, which the run's workflow makes once).
      run_id text NOT NULL,
      judge_run_id text,
      status text NOT NULL CHECK (status IN ('pending', 'running', 'judging', 'graded')),
      passed boolean,
      score double precision,
      explanation text,
      grades jsonb,
      credits bigint NOT NULL DEFAULT 0,
      latency_ms integer,
      output text,
      started_at timestamptz,
      PRIMARY KEY (eval_run_id, position)
    )
  `
  yield* sql`CREATE INDEX eval_results_open ON eval_results (eval_run_id, status) WHERE status <> 'graded'`
})
