import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

/**
 * Traces (issue 46, docs/traces.md): every run is a tree of spans (`trace_spans`, one row per span, with the credits
 * that span was charged), and every root run a row of `traces` that search reads without touching the spans: who
 * may read it (the expert's owner, the payer and its end user), what it cost, how long it took and which tools it
 * called. Written in batches by the trace writer, never by the run itself.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE trace_spans (
      trace_id text NOT NULL,
      span_id text NOT NULL,
      -- the nearest traced ancestor; null for the trace's root (invoke_agent of the root run)
      parent_span_id text,
      -- the run whose engine made the span (a delegated run's spans carry its own id, in its parent's trace)
      run_id text NOT NULL,
      name text NOT NULL,
      kind text NOT NULL,
      start_time timestamptz NOT NULL,
      end_time timestamptz NOT NULL,
      -- 'ok' or 'error' (then attributes carry error.type)
      status text NOT NULL,
      attributes jsonb NOT NULL,
      -- micro-credits the span was charged (a model call's step, a tool's own charge)
      credits bigint NOT NULL DEFAULT 0,
      PRIMARY KEY (trace_id, span_id)
    )`
  yield* sql`CREATE INDEX trace_spans_run ON trace_spans (run_id)`
  yield* sql`
    CREATE TABLE traces (
      trace_id text PRIMARY KEY,
      run_id text NOT NULL,
      agent_id text,
      agent text NOT NULL,
      agent_version integer,
      -- the expert's creator: reads every trace of its experts' runs
      owner_id text NOT NULL,
      -- the run's payer and its end user ('' for none): read their own
      payer_id text NOT NULL,
      end_user_id text NOT NULL DEFAULT '',
      session_id text,
      status text NOT NULL,
      error_type text,
      credits bigint NOT NULL,
      tools text[] NOT NULL DEFAULT '{}',
      span_count integer NOT NULL,
      started_at timestamptz NOT NULL,
      ended_at timestamptz NOT NULL
    )`
  yield* sql`CREATE UNIQUE INDEX traces_run ON traces (run_id)`
  yield* sql`CREATE INDEX traces_owner ON traces (owner_id, started_at DESC, trace_id DESC)`
  yield* sql`CREATE INDEX traces_payer ON traces (payer_id, end_user_id, started_at DESC, trace_id DESC)`
  yield* sql`CREATE INDEX traces_tools ON traces USING gin (tools)`
})
