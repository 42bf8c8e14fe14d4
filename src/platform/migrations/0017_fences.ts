import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

/**
 * Fencing tokens (issue 33 item 1, docs/operations.md "Fault model"):
 *
 * - Every acquisition of a shard by a runner raises the shard's generation (Cluster.ts `TrackedRunnerStorage`). An
 *   entity (a wallet, a session) takes its shard's generation when it starts, and every write it makes carries it:
 *   the statement locks the shard's row (`FOR SHARE`) and writes nothing when the generation moved on. A runner that
 *   lost a shard (paused past its locks, cut off) therefore cannot bill or write for it, even before it notices.
 *   The lock orders each write against the next owner's acquisition: a write either commits before the generation is
 *   raised (and the next owner reads it when it loads) or sees the new generation and is refused.
 * - Each runner's own heartbeat for the others' watch (`beat_at`), written every 0.5 s apart from the shard-lock
 *   refresh, so a paused runner is found silent within seconds (issue 26 item 2).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE shard_generations (
      -- the cluster's shard id, "<group>:<number>"
      shard text PRIMARY KEY,
      generation bigint NOT NULL,
      -- the runner that acquired it last, and when
      runner text NOT NULL,
      acquired_at timestamptz NOT NULL DEFAULT now()
    )`
  yield* sql`ALTER TABLE cluster_runner_backends ADD COLUMN beat_at timestamptz NOT NULL DEFAULT now()`
})
