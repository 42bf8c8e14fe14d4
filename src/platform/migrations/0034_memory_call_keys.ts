import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

/**
 * A model's memory write keyed by its tool call (docs/runs.md, "Tools tried again"): a durable run's tool step tried
 * again after a kill or an outage calls `memory_append` again with the same call, and the block's version that the
 * first try wrote names that call, so the second finds it and appends nothing. Facts need no column: a keyed fact's
 * id is derived from its call.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE memory_block_versions ADD COLUMN call_key text`
})
