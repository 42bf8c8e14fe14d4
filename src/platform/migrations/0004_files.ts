import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

/**
 * Files (two-step upload) and environments (reusable sandbox templates). Both belong to an account and, inside it,
 * to one end user: `end_user_id` is the caller's `X-End-User-Id`, or '' for a caller that names none (spec 2.7).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE files (
      id text PRIMARY KEY,
      owner_id text NOT NULL REFERENCES users (id),
      end_user_id text NOT NULL DEFAULT '',
      filename text NOT NULL,
      content_type text NOT NULL,
      size bigint NOT NULL CHECK (size >= 0),
      sha256 text NOT NULL,
      storage_key text NOT NULL UNIQUE,
      created_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE INDEX files_partition ON files (owner_id, end_user_id, created_at)`
  yield* sql`
    CREATE TABLE environments (
      id text PRIMARY KEY,
      owner_id text NOT NULL REFERENCES users (id),
      end_user_id text NOT NULL DEFAULT '',
      name text NOT NULL,
      description text NOT NULL DEFAULT '',
      packages jsonb NOT NULL DEFAULT '[]'::jsonb,
      env jsonb NOT NULL DEFAULT '{}'::jsonb,
      files jsonb NOT NULL DEFAULT '[]'::jsonb,
      setup_script text NOT NULL DEFAULT '',
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`CREATE INDEX environments_partition ON environments (owner_id, end_user_id, created_at)`
  // "Which environments use this file?" when a file is deleted (`files ? 'file_...'`).
  yield* sql`CREATE INDEX environments_files ON environments USING gin (files)`
})
