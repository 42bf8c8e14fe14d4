import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

/**
 * The marketplace around agents: creator applications (reviewed by people, like agent versions) and the skills
 * catalogue. A skill names the built-in tools it stands for; an agent has a skill when it has all of its tools.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  // One application per user; a rejected one may be sent again (back to pending), an approved one stays.
  yield* sql`
    CREATE TABLE creators (
      user_id text PRIMARY KEY REFERENCES users (id),
      display_name text NOT NULL,
      bio text NOT NULL,
      account_type text NOT NULL,
      email text NOT NULL,
      status text NOT NULL CHECK (status IN ('pending', 'approved', 'rejected')),
      reason text,
      applied_at timestamptz NOT NULL DEFAULT now(),
      decided_at timestamptz
    )`
  yield* sql`CREATE INDEX creators_pending ON creators (applied_at) WHERE status = 'pending'`
  yield* sql`
    CREATE TABLE skills (
      name text PRIMARY KEY,
      title text NOT NULL,
      description text NOT NULL,
      tools jsonb NOT NULL CHECK (jsonb_typeof(tools) = 'array' AND jsonb_array_length(tools) > 0)
    )`
  // The run engine's built-in tools (src/agents/Agent.ts BUILTIN_TOOLS), grouped as a creator thinks of them.
  const seed: ReadonlyArray<readonly [string, string, string, ReadonlyArray<string>]> = [
    ["time", "Current time", "Tells the current date and time in any time zone.", ["get_time"]],
    ["math", "Calculator", "Evaluates arithmetic exactly instead of guessing at numbers.", ["calculator"]],
    [
      "files",
      "Files",
      "Reads, writes and lists files in the conversation's workspace.",
      ["write_file", "read_file", "list_files"]
    ],
    ["memory", "Memory", "Saves facts about the user and finds them again in later conversations.", [
      "memory_save",
      "memory_search"
    ]]
  ]
  for (const [name, title, description, tools] of seed) {
    yield* sql`
      INSERT INTO skills (name, title, description, tools)
      VALUES (${name}, ${title}, ${description}, ${JSON.stringify(tools)}::jsonb)`
  }
})
