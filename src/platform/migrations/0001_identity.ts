import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // Secrets the platform generates for itself (the JWT key when JWT_SECRET is unset): shared by every process
  // that uses this database, and kept with the data in embedded mode.
  yield* sql`
    CREATE TABLE platform_secrets (
      name text PRIMARY KEY,
      value text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )`
  // current_token_hash makes "single device" hold without a session store: only the newest login's token is valid.
  yield* sql`
    CREATE TABLE users (
      id text PRIMARY KEY,
      phone text NOT NULL UNIQUE,
      current_token_hash text,
      current_token_iat bigint,
      created_at timestamptz NOT NULL DEFAULT now(),
      last_login_at timestamptz
    )`
  yield* sql`
    CREATE TABLE api_keys (
      id text PRIMARY KEY,
      user_id text NOT NULL REFERENCES users (id),
      name text NOT NULL,
      key_hash text NOT NULL UNIQUE,
      prefix text NOT NULL,
      last4 text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      last_used_at timestamptz,
      revoked_at timestamptz
    )`
  yield* sql`CREATE INDEX api_keys_user ON api_keys (user_id, created_at) WHERE revoked_at IS NULL`
})
