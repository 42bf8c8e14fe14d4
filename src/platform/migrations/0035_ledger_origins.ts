import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

/**
 * The call that made each ledger entry (docs/billing.md, "Replays"): a charge whose message was cut on its way (a
 * shard moved, a deadline) is sent again with the same key, and when its first delivery was committed, the second
 * finds its entry. Without the call's origin that second delivery was answered as a replay (`idempotent_replay`),
 * although the client had sent its key once; with it, it answers as the first charge it is. Nullable: entries from
 * before, and those made without a call (the signup grant), have none, and a repeat of their key replays as before.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE ledger_entries ADD COLUMN origin text`
})
