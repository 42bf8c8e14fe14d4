import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import { Effect, Schema } from "effect"

/** The channel on which a claimed answer travels to the runner whose run waits for it. */
export const APPROVALS_CHANNEL = "atrium_approvals"

/** `sessionId`: the session the approval waits in (on insert), or the one it is answered through (on claim). */
const Claim = Schema.Struct({
  id: Schema.String,
  accountId: Schema.String,
  endUserId: Schema.String,
  sessionId: Schema.NullOr(Schema.String)
})

/** Pending approvals as rows, for cluster mode: which exist, whose they are, and the claim of an answer. */
export class ApprovalsRepo extends Effect.Service<ApprovalsRepo>()("atrium/runtime/ApprovalsRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const insert = SqlSchema.void({
      Request: Schema.Struct({ ...Claim.fields, expiresAt: Schema.DateFromSelf }),
      execute: (row) =>
        sql`INSERT INTO pending_approvals (id, account_id, end_user_id, session_id, expires_at)
            VALUES (${row.id}, ${row.accountId}, ${row.endUserId}, ${row.sessionId}, ${row.expiresAt})`
    })

    const remove = SqlSchema.void({
      Request: Schema.String,
      execute: (id) => sql`DELETE FROM pending_approvals WHERE id = ${id}`
    })

    /** Takes the approval if it is still pending and `owner`'s: only one answer ever claims it. */
    const claim = SqlSchema.findOne({
      Request: Claim,
      Result: Schema.Struct({ id: Schema.String }),
      execute: (c) =>
        sql`DELETE FROM pending_approvals
            WHERE id = ${c.id} AND account_id = ${c.accountId} AND end_user_id = ${c.endUserId} AND expires_at > now()
              AND (${c.sessionId}::text IS NULL OR session_id = ${c.sessionId})
            RETURNING id`
    })

    /** Tells every runner (transactional with nothing: the claim is already committed). */
    const notify = SqlSchema.void({
      Request: Schema.String,
      execute: (payload) => sql`SELECT pg_notify(${APPROVALS_CHANNEL}, ${payload})`
    })

    return {
      insert: (row: typeof Claim.Type & { readonly expiresAt: Date }) => Effect.orDie(insert(row)),
      remove: (id: string) => Effect.orDie(remove(id)),
      claim: (c: typeof Claim.Type) => Effect.orDie(claim(c)),
      notify: (payload: string) => Effect.orDie(notify(payload))
    } as const
  })
}) {}
