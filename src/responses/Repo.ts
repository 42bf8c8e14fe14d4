import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import { Effect, Option, Schema } from "effect"
import { SessionId, UserId } from "../platform/Ids.js"
import { RunId } from "../runtime/Domain.js"
import type { Partition } from "../identity/Partition.js"
import { ResponseId, ResponseItemId } from "./Api.js"

const Json = Schema.Unknown

export const ResponseRow = Schema.Struct({
  id: ResponseId,
  accountId: UserId,
  endUserId: Schema.String,
  sessionId: Schema.NullOr(SessionId),
  status: Schema.Literal("queued", "in_progress", "completed", "failed", "cancelled", "incomplete"),
  body: Json,
  input: Json,
  messages: Schema.NullOr(Json),
  /** The session turn that answered it (migration 0021): where a `previous_response_id` naming it branches from. */
  turn: Schema.NullOr(Schema.Number)
})
export type ResponseRow = typeof ResponseRow.Type

/** JSON columns come back parsed from PostgreSQL and as text from some drivers. */
const parsed = (value: unknown) => (typeof value === "string" ? JSON.parse(value) : value)

/** Stored `/v1/responses` answers (migration 0012). SQL failures are defects here. */
export class ResponsesRepo extends Effect.Service<ResponsesRepo>()("atrium/responses/ResponsesRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const insert = SqlSchema.void({
      Request: Schema.Struct({
        id: ResponseId,
        accountId: UserId,
        endUserId: Schema.String,
        sessionId: Schema.NullOr(SessionId),
        body: Json,
        input: Json,
        runId: Schema.NullOr(RunId)
      }),
      execute: (row) =>
        sql`
          INSERT INTO api_responses (id, account_id, end_user_id, session_id, status, body, input, run_id)
          VALUES (${row.id}, ${row.accountId}, ${row.endUserId}, ${row.sessionId}, 'in_progress',
                  ${JSON.stringify(row.body)}::jsonb, ${JSON.stringify(row.input)}::jsonb, ${row.runId})`
    })

    const findById = SqlSchema.findOne({
      Request: Schema.Struct({ id: ResponseId, accountId: UserId, endUserId: Schema.String }),
      Result: ResponseRow,
      execute: ({ accountId, endUserId, id }) =>
        sql`
          SELECT id, account_id, end_user_id, session_id, status, body, input, messages, turn FROM api_responses
          WHERE id = ${id} AND account_id = ${accountId} AND end_user_id = ${endUserId}`
    })

    /** The end of a response; one already cancelled stays so (the cancel was first). */
    const finish = SqlSchema.void({
      Request: Schema.Struct({ id: ResponseId, status: Schema.String, body: Json, messages: Schema.NullOr(Json) }),
      execute: (row) =>
        sql`
          UPDATE api_responses SET status = ${row.status}, body = ${JSON.stringify(row.body)}::jsonb,
                 messages = ${row.messages === null ? null : JSON.stringify(row.messages)}::jsonb
          WHERE id = ${row.id} AND status = 'in_progress'`
    })

    const turnOf = SqlSchema.void({
      Request: Schema.Struct({ id: ResponseId, turn: Schema.Number }),
      execute: ({ id, turn }) => sql`UPDATE api_responses SET turn = ${turn} WHERE id = ${id}`
    })

    /** Marks a response in progress as cancelled: false when it had already ended. */
    const cancel = SqlSchema.findAll({
      Request: Schema.Struct({ id: ResponseId, body: Json }),
      Result: Schema.Struct({ id: ResponseId }),
      execute: (row) =>
        sql`
          UPDATE api_responses SET status = 'cancelled', body = ${JSON.stringify(row.body)}::jsonb
          WHERE id = ${row.id} AND status = 'in_progress' RETURNING id`
    })

    /** The output item `itemId` of one of the partition's responses (what an `item_reference` names). */
    const findItem = SqlSchema.findOne({
      Request: Schema.Struct({ itemId: ResponseItemId, accountId: UserId, endUserId: Schema.String }),
      Result: Schema.Struct({ item: Json }),
      execute: ({ accountId, endUserId, itemId }) =>
        sql`
          SELECT item FROM api_responses, jsonb_array_elements(body->'output') AS item
          WHERE account_id = ${accountId} AND end_user_id = ${endUserId}
            AND body->'output' @> ${JSON.stringify([{ id: itemId }])}::jsonb AND item->>'id' = ${itemId}
          LIMIT 1`
    })

    /** Deletes one of the partition's responses: false when it has none by that id. */
    const remove = SqlSchema.findAll({
      Request: Schema.Struct({ id: ResponseId, accountId: UserId, endUserId: Schema.String }),
      Result: Schema.Struct({ id: ResponseId }),
      execute: ({ accountId, endUserId, id }) =>
        sql`
          DELETE FROM api_responses WHERE id = ${id} AND account_id = ${accountId} AND end_user_id = ${endUserId}
          RETURNING id`
    })

    return {
      /** Records the session turn that answers the response (once the session numbered it). */
      setTurn: (id: ResponseId, turn: number) => Effect.orDie(turnOf({ id, turn })),
      remove: (partition: Partition, id: ResponseId) =>
        Effect.map(remove({ id, accountId: partition.accountId, endUserId: partition.endUserId }), (rows) => rows.length > 0).pipe(Effect.orDie),
      item: (partition: Partition, itemId: ResponseItemId) =>
        findItem({ itemId, accountId: partition.accountId, endUserId: partition.endUserId }).pipe(
          Effect.map(Option.map((row) => parsed(row.item) as Record<string, unknown>)),
          Effect.orDie
        ),
      /** `runId`: a background response's run (migration 0018's column; `run_` and the response id's part). */
      insert: (row: { id: ResponseId; partition: Partition; sessionId: SessionId | null; body: unknown; input: unknown; runId?: RunId | null }) =>
        insert({ id: row.id, accountId: row.partition.accountId, endUserId: row.partition.endUserId, sessionId: row.sessionId, body: row.body, input: row.input, runId: row.runId ?? null })
          .pipe(Effect.orDie),
      byId: (partition: Partition, id: ResponseId) =>
        findById({ id, accountId: partition.accountId, endUserId: partition.endUserId }).pipe(
          Effect.map(Option.map((row) => ({ ...row, body: parsed(row.body), input: parsed(row.input), messages: parsed(row.messages) }))),
          Effect.orDie
        ),
      finish: (id: ResponseId, status: "completed" | "failed" | "cancelled" | "incomplete", body: unknown, messages: unknown | null) =>
        finish({ id, status, body, messages }).pipe(Effect.orDie),
      cancel: (id: ResponseId, body: unknown) => Effect.map(cancel({ id, body }), (rows) => rows.length > 0).pipe(Effect.orDie)
    } as const
  })
}) {}
