import { AgentId, SessionId } from "../platform/Ids.js"
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import { Effect, Schema } from "effect"

export const FeedbackRow = Schema.Struct({
  turn: Schema.Number,
  rating: Schema.Literal("up", "down"),
  reason: Schema.NullOr(Schema.String),
  shared: Schema.Boolean,
  updatedAt: Schema.DateFromSelf
})
export type FeedbackRow = typeof FeedbackRow.Type

const FeedbackWrite = Schema.Struct({
  sessionId: SessionId,
  agentId: AgentId,
  turn: Schema.Number,
  rating: Schema.Literal("up", "down"),
  reason: Schema.NullOr(Schema.String),
  shared: Schema.Boolean
})

/** Thumbs on a session's answers (migration 0027). SQL errors are defects here. */
export class FeedbackRepo extends Effect.Service<FeedbackRepo>()("atrium/sessions/FeedbackRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const upsert = SqlSchema.single({
      Request: FeedbackWrite,
      Result: FeedbackRow,
      execute: (row) =>
        sql`
          INSERT INTO turn_feedback (session_id, agent_id, turn, rating, reason, shared)
          VALUES (${row.sessionId}, ${row.agentId}, ${row.turn}, ${row.rating}, ${row.reason}, ${row.shared})
          ON CONFLICT (session_id, turn) DO UPDATE
            SET rating = EXCLUDED.rating, reason = EXCLUDED.reason, shared = EXCLUDED.shared, updated_at = now()
          RETURNING turn, rating, reason, shared, updated_at`
    })

    const remove = SqlSchema.findAll({
      Request: Schema.Struct({ sessionId: SessionId, turn: Schema.Number }),
      Result: Schema.Struct({ turn: Schema.Number }),
      execute: ({ sessionId, turn }) =>
        sql`DELETE FROM turn_feedback WHERE session_id = ${sessionId} AND turn = ${turn} RETURNING turn`
    })

    const ofSession = SqlSchema.findAll({
      Request: Schema.String,
      Result: FeedbackRow,
      execute: (sessionId) =>
        sql`SELECT turn, rating, reason, shared, updated_at FROM turn_feedback WHERE session_id = ${sessionId} ORDER BY turn`
    })

    return {
      /** Sets the turn's rating (a second rating replaces the first). */
      set: (row: typeof FeedbackWrite.Type) => Effect.orDie(upsert(row)),
      /** Whether there was a rating to take back. */
      remove: (sessionId: SessionId, turn: number) => Effect.map(Effect.orDie(remove({ sessionId, turn })), (rows) => rows.length > 0),
      ofSession: (sessionId: SessionId) => Effect.orDie(ofSession(sessionId))
    } as const
  })
}) {}
