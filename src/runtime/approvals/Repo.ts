import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import { Effect, Schema } from "effect"
import { UserId } from "../../platform/Ids.js"
import { ApprovalId, RunId } from "../Domain.js"

/** The channel on which a claimed answer travels to the runner whose run waits for it. */
export const APPROVALS_CHANNEL = "atrium_approvals"

/** `sessionId`: the session the approval waits in (on insert), or the one it is answered through (on claim). */
const Claim = Schema.Struct({
  id: ApprovalId,
  accountId: UserId,
  endUserId: Schema.String,
  sessionId: Schema.NullOr(Schema.String)
})

/** Pending approvals as rows, for cluster mode: which exist, whose they are, and the claim of an answer. */
export class ApprovalsRepo extends Effect.Service<ApprovalsRepo>()("atrium/runtime/ApprovalsRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    /** `runId`: a background run's approval (migration 0030), answered through its workflow's deferred. */
    const insert = SqlSchema.void({
      Request: Schema.Struct({ ...Claim.fields, expiresAt: Schema.DateFromSelf, runId: Schema.NullOr(Schema.String) }),
      execute: (row) =>
        sql`INSERT INTO pending_approvals (id, account_id, end_user_id, session_id, expires_at, run_id)
            VALUES (${row.id}, ${row.accountId}, ${row.endUserId}, ${row.sessionId}, ${row.expiresAt}, ${row.runId})`
    })

    /**
     * A background run's approval, whose id is its identity (the run and the call's place): opened again by a step
     * executed again after a fault, it is the same approval, and keeps its first expiry (answered: its answer).
     */
    const insertDurable = SqlSchema.single({
      Request: Schema.Struct({ ...Claim.fields, expiresAt: Schema.DateFromSelf, runId: Schema.String }),
      Result: Schema.Struct({ expiresAt: Schema.DateFromSelf }),
      execute: (row) =>
        sql`INSERT INTO pending_approvals (id, account_id, end_user_id, session_id, expires_at, run_id)
            VALUES (${row.id}, ${row.accountId}, ${row.endUserId}, ${row.sessionId}, ${row.expiresAt}, ${row.runId})
            ON CONFLICT (id) DO UPDATE SET id = EXCLUDED.id
            RETURNING expires_at`
    })

    /** A background run's approvals, when it ends: answered or not, none of them can be answered any more. */
    const removeOfRun = SqlSchema.void({
      Request: Schema.String,
      execute: (runId) => sql`DELETE FROM pending_approvals WHERE run_id = ${runId}`
    })

    const remove = SqlSchema.void({
      Request: ApprovalId,
      execute: (id) => sql`DELETE FROM pending_approvals WHERE id = ${id}`
    })

    /**
     * Takes the approval if it is still pending and `owner`'s: only one answer ever claims it. The answer stays in
     * the row (migration 0015) until the waiting run is done with it, so a runner whose listening connection was
     * down when the notification went out still finds it (`answered`).
     */
    const claim = SqlSchema.findOne({
      Request: Schema.Struct({ ...Claim.fields, answer: Schema.String }),
      Result: Schema.Struct({ id: ApprovalId, runId: Schema.NullOr(RunId) }),
      execute: (c) =>
        sql`UPDATE pending_approvals SET answer = ${c.answer}::jsonb
            WHERE id = ${c.id} AND account_id = ${c.accountId} AND end_user_id = ${c.endUserId} AND expires_at > now()
              AND (${c.sessionId}::text IS NULL OR session_id = ${c.sessionId}) AND answer IS NULL
            RETURNING id, run_id`
    })

    /** The answers claimed for any of `ids` (as the JSON the notification carries). */
    const answered = SqlSchema.findAll({
      Request: Schema.Array(Schema.String),
      Result: Schema.Struct({ answer: Schema.String }),
      execute: (ids) =>
        sql`SELECT answer::text AS answer FROM pending_approvals
            WHERE id IN (SELECT jsonb_array_elements_text(${JSON.stringify(ids)}::jsonb)) AND answer IS NOT NULL`
    })

    /** Tells every runner (transactional with nothing: the claim is already committed). */
    const notify = SqlSchema.void({
      Request: Schema.String,
      execute: (payload) => sql`SELECT pg_notify(${APPROVALS_CHANNEL}, ${payload})`
    })

    return {
      insert: (row: typeof Claim.Type & { readonly expiresAt: Date; readonly runId?: string | null }) =>
        Effect.orDie(insert({ ...row, runId: row.runId ?? null })),
      remove: (id: ApprovalId) => Effect.orDie(remove(id)),
      removeOfRun: (runId: RunId) => Effect.orDie(removeOfRun(runId)),
      insertDurable: (row: typeof Claim.Type & { readonly expiresAt: Date; readonly runId: string }) =>
        Effect.orDie(Effect.map(insertDurable(row), (found) => found.expiresAt)),
      claim: (c: typeof Claim.Type & { readonly answer: string }) => Effect.orDie(claim(c)),
      answered: (ids: ReadonlyArray<string>) =>
        Effect.orDie(Effect.map(answered(ids), (rows) => rows.map((row) => row.answer))),
      notify: (payload: string) => Effect.orDie(notify(payload))
    } as const
  })
}) {}
