import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

/**
 * The marketplace as a store (issue 48 item 4, docs/marketplace.md): reviews by people who ran an expert, the icon
 * its creator uploaded, and the operator's featured list. Each is the market's own table beside `agents`, so the
 * agents' rows and their queries stay as they were.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // One review per person and expert, editable; `id` is the list cursor (and never the reviewer's user id).
  yield* sql`
    CREATE TABLE agent_reviews (
      id text PRIMARY KEY,
      agent_id text NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
      user_id text NOT NULL REFERENCES users (id),
      rating smallint NOT NULL CHECK (rating BETWEEN 1 AND 5),
      text text NOT NULL DEFAULT '',
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (agent_id, user_id)
    )`
  yield* sql`CREATE INDEX agent_reviews_page ON agent_reviews (agent_id, created_at DESC, id DESC)`
  // The bytes are small (256 KB at most, checked before insert), so PostgreSQL holds them rather than the files service.
  yield* sql`
    CREATE TABLE agent_icons (
      agent_id text PRIMARY KEY REFERENCES agents (id) ON DELETE CASCADE,
      content_type text NOT NULL CHECK (content_type IN ('image/png', 'image/jpeg', 'image/webp')),
      bytes bytea NOT NULL CHECK (octet_length(bytes) <= 262144),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`
    CREATE TABLE agent_featured (
      agent_id text PRIMARY KEY REFERENCES agents (id) ON DELETE CASCADE,
      featured_at timestamptz NOT NULL DEFAULT now()
    )`
  // Popularity counts the accounts that ran an expert lately: runs by agent and time (runs_agent) serve it.
})
