import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

/**
 * Webhooks (issue 43 item 3, docs/webhooks.md): an account's endpoints, the events emitted for it, and one delivery
 * per (event, endpoint) that the delivery worker claims under a lease (`FOR UPDATE SKIP LOCKED`) until it succeeds
 * or its retry window closes. A pending delivery lives in the database, not in a process, so a restart loses none.
 *
 * The endpoint's signing secret is encrypted like stored credentials (AES-256-GCM under `SECRETS_KEY`).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE webhook_endpoints (
      id text PRIMARY KEY,
      account_id text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      url text NOT NULL,
      events text[] NOT NULL,
      description text NOT NULL DEFAULT '',
      secret text NOT NULL,
      -- 'enabled' or 'disabled' (by its owner, or by the worker after failing for WEBHOOK_DISABLE_AFTER)
      status text NOT NULL DEFAULT 'enabled',
      disabled_reason text,
      -- the first failed attempt since the last success: how long it has kept failing
      failing_since timestamptz,
      -- the create's Idempotency-Key and what it asked for: a retried create answers this endpoint again
      idempotency_key text,
      request_hash text,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE INDEX webhook_endpoints_account ON webhook_endpoints (account_id, created_at)`
  yield* sql`CREATE UNIQUE INDEX webhook_endpoints_idempotency ON webhook_endpoints (account_id, idempotency_key) WHERE idempotency_key IS NOT NULL`
  yield* sql`
    CREATE TABLE webhook_events (
      id text PRIMARY KEY,
      account_id text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      type text NOT NULL,
      data jsonb NOT NULL,
      -- who emitted it and for what (a run's terminal event: the run id and status), so an event is emitted once
      idempotency_key text NOT NULL,
      created_at timestamptz NOT NULL,
      UNIQUE (account_id, idempotency_key)
    )`
  yield* sql`
    CREATE TABLE webhook_deliveries (
      id text PRIMARY KEY,
      endpoint_id text NOT NULL REFERENCES webhook_endpoints(id) ON DELETE CASCADE,
      event_id text NOT NULL REFERENCES webhook_events(id) ON DELETE CASCADE,
      -- 'pending', 'succeeded' or 'failed'
      status text NOT NULL DEFAULT 'pending',
      attempts integer NOT NULL DEFAULT 0,
      next_attempt_at timestamptz NOT NULL,
      -- retries stop after this (WEBHOOK_RETRY_WINDOW after the delivery was made)
      expires_at timestamptz NOT NULL,
      lease_owner text,
      lease_until timestamptz,
      -- the last attempt: its HTTP status (none for a timeout or a refused connection), latency, first bytes, error
      response_status integer,
      latency_ms integer,
      response_body text,
      error text,
      last_attempt_at timestamptz,
      -- a redelivery asked for by the owner
      manual boolean NOT NULL DEFAULT false,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL
    )`
  yield* sql`CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending'`
  yield* sql`CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, created_at DESC, id DESC)`
})
