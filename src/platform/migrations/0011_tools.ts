import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

/**
 * Per-end-user credentials for remote MCP servers (issue 19): one secret per (account, end user, server URL),
 * encrypted with AES-256-GCM under `SECRETS_KEY` (iv, tag and ciphertext in `secret`); only the last four
 * characters are kept in clear, to tell credentials apart. An agent's `mcp_servers` live in its JSON configuration.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE credentials (
      id text PRIMARY KEY,
      account_id text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      end_user_id text NOT NULL DEFAULT '',
      server_url text NOT NULL,
      secret text NOT NULL,
      hint text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (account_id, end_user_id, server_url)
    )`
})
