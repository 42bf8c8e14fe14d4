import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

/**
 * What self-evolution needs to know about a run beyond its counts (docs/evolution.md).
 *
 * `answer_chars`: the length of the run's answer text (every step's text, surrounding whitespace not counted), so an
 * empty answer is seen as such; estimated output tokens never reach 0 for a model that ran. Null for runs recorded
 * before this migration: their length was never known, and 0 would make every old run look unanswered.
 *
 * `denied_tools`: the name of the tool of each denied call, in order (one entry per call, so its length is
 * `tools_denied`), so a suggestion can name the tools really denied. Runs recorded before this have `[]`: their
 * denials stay counted in `tools_denied` but are attributed to no tool.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE runs ADD COLUMN answer_chars integer CHECK (answer_chars >= 0)`
  yield* sql`ALTER TABLE runs ADD COLUMN denied_tools jsonb NOT NULL DEFAULT '[]'::jsonb`
})
