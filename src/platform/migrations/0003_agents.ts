import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

/**
 * Agents (experts): an editable draft, immutable versions snapshotted at publish, and review submissions. What other
 * users run and see is only ever an approved version (`published_version`).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE agents (
      id text PRIMARY KEY,
      identifier text NOT NULL UNIQUE,
      owner_id text NOT NULL REFERENCES users (id),
      draft jsonb NOT NULL,
      published_version integer,
      published_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE INDEX agents_owner ON agents (owner_id, created_at)`
  yield* sql`
    CREATE TABLE agent_versions (
      agent_id text NOT NULL REFERENCES agents (id),
      version integer NOT NULL CHECK (version > 0),
      config jsonb NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (agent_id, version)
    )`
  // States: pending -> approved | rejected; a pending submission replaced by a newer publish becomes superseded.
  yield* sql`
    CREATE TABLE agent_submissions (
      id text PRIMARY KEY,
      agent_id text NOT NULL REFERENCES agents (id),
      version integer NOT NULL,
      status text NOT NULL CHECK (status IN ('pending', 'approved', 'rejected', 'superseded')),
      reason text,
      submitted_at timestamptz NOT NULL DEFAULT now(),
      decided_at timestamptz,
      FOREIGN KEY (agent_id, version) REFERENCES agent_versions (agent_id, version)
    )`
  yield* sql`CREATE UNIQUE INDEX agent_submissions_one_pending ON agent_submissions (agent_id) WHERE status = 'pending'`
  // An unlock is bought once per user and agent; the row is written after the wallet charge committed.
  yield* sql`
    CREATE TABLE purchases (
      user_id text NOT NULL REFERENCES users (id),
      agent_id text NOT NULL REFERENCES agents (id),
      price bigint NOT NULL CHECK (price >= 0),
      creator_share bigint NOT NULL CHECK (creator_share >= 0),
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (user_id, agent_id)
    )`
  yield* sql`CREATE INDEX purchases_agent ON purchases (agent_id)`
  // In-app notifications: how review outcomes (agents, creator applications) reach their owner.
  yield* sql`
    CREATE TABLE notifications (
      id text PRIMARY KEY,
      user_id text NOT NULL REFERENCES users (id),
      kind text NOT NULL,
      title text NOT NULL,
      body text NOT NULL,
      data jsonb NOT NULL DEFAULT '{}'::jsonb,
      read_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE INDEX notifications_user ON notifications (user_id, created_at DESC)`
})
