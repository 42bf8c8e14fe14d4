import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

/**
 * Conversations as trees (issue 44, docs/sessions.md "Branches"): every turn has a parent turn (`parent_turn`, null for
 * a first turn), and a session has a current leaf (`leaf_turn`): every read of its history follows the path from the
 * root to that leaf. A fork shares its origin's history without copying it: `fork_of` and `fork_turn` name the
 * session and the turn it was forked at, and the fork's own turns are numbered after `fork_turn`, so a parent number up
 * to `fork_turn` names a turn of the origin. A sent turn keeps the parent it was sent under (`session_queue`:
 * `branch` true with `parent_turn`, null for the root; false: the leaf when it runs). A response of a session names its
 * turn (`api_responses.turn`), which a later `previous_response_id` continues from.
 *
 * Existing sessions become a line: each turn's parent is the turn before it, the leaf the last turn.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE session_turns ADD COLUMN parent_turn integer`
  yield* sql`
    UPDATE session_turns t SET parent_turn = p.previous
    FROM (SELECT session_id, turn, lag(turn) OVER (PARTITION BY session_id ORDER BY turn) AS previous FROM session_turns) p
    WHERE p.session_id = t.session_id AND p.turn = t.turn AND p.previous IS NOT NULL`
  yield* sql`
    ALTER TABLE sessions
      ADD COLUMN leaf_turn integer,
      ADD COLUMN fork_of text REFERENCES sessions (id),
      ADD COLUMN fork_turn integer`
  yield* sql`UPDATE sessions s SET leaf_turn = (SELECT max(turn) FROM session_turns t WHERE t.session_id = s.id)`
  yield* sql`CREATE INDEX sessions_forks ON sessions (fork_of) WHERE fork_of IS NOT NULL`
  yield* sql`
    ALTER TABLE session_queue
      ADD COLUMN parent_turn integer,
      ADD COLUMN branch boolean NOT NULL DEFAULT false`
  yield* sql`ALTER TABLE api_responses ADD COLUMN turn integer`
})
