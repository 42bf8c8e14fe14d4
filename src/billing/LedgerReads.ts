import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import { Effect, Option, Schema } from "effect"
import { UserId } from "../platform/Ids.js"
import { Json } from "../platform/Rows.js"
import { RunId } from "../runtime/Domain.js"

const LedgerLineRow = Schema.Struct({
  seq: Schema.BigInt,
  amount: Schema.BigInt,
  kind: Schema.String,
  appId: Schema.NullOr(Schema.String),
  event: Schema.NullOr(Schema.String),
  metadata: Schema.NullOr(Json(Schema.Record({ key: Schema.String, value: Schema.String }))),
  description: Schema.NullOr(Schema.String),
  balanceAfter: Schema.BigInt,
  createdAt: Schema.DateFromSelf
})
export type LedgerLine = typeof LedgerLineRow.Type

const Spent = Schema.Struct({ spent: Schema.BigInt })
const Audit = Schema.Struct({ sum: Schema.BigInt, balance: Schema.BigInt })

const LedgerPage = Schema.Struct({ userId: UserId, limit: Schema.Number, before: Schema.NullOr(Schema.BigInt) })

/** Read side of the ledger: what a user sees of their wallet. */
export class LedgerReads extends Effect.Service<LedgerReads>()("atrium/billing/LedgerReads", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const spentSinceOf = SqlSchema.single({
      Request: Schema.Struct({ userId: UserId, since: Schema.DateFromSelf }),
      Result: Spent,
      execute: ({ since, userId }) =>
        sql`
          SELECT COALESCE(-SUM(amount), 0)::text AS spent FROM ledger_entries
          WHERE user_id = ${userId} AND amount < 0 AND created_at >= ${since}`
    })
    const pageOf = SqlSchema.findAll({
      Request: LedgerPage,
      Result: LedgerLineRow,
      execute: ({ before, limit, userId }) =>
        sql`
          SELECT seq::text, amount::text, kind, app_id, event, metadata, description, balance_after::text, created_at
          FROM ledger_entries
          WHERE user_id = ${userId} ${before === null ? sql`` : sql`AND seq < ${before}`}
          ORDER BY ledger_entries.seq DESC LIMIT ${limit + 1}`
    })
    const auditOf = SqlSchema.single({
      Request: UserId,
      Result: Audit,
      execute: (userId) =>
        sql`
          SELECT COALESCE((SELECT SUM(amount) FROM ledger_entries WHERE user_id = ${userId}), 0)::text AS sum,
                 COALESCE((SELECT balance FROM wallets WHERE user_id = ${userId}), 0)::text AS balance`
    })

    const runChargedOf = SqlSchema.single({
      Request: Schema.Struct({ userId: UserId, runId: RunId }),
      Result: Spent,
      execute: ({ runId, userId }) =>
        sql`
          SELECT COALESCE(-SUM(amount), 0)::text AS spent FROM ledger_entries
          WHERE user_id = ${userId} AND scope = 'run' AND split_part(idempotency_key, ':', 1) = ${runId}`
    })

    const balanceOf = SqlSchema.findOne({
      Request: UserId,
      Result: Schema.Struct({ balance: Schema.BigInt }),
      execute: (userId) => sql`SELECT balance::text AS balance FROM wallets WHERE user_id = ${userId}`
    })

    return {
      /**
       * The wallet's balance as last committed, none before the wallet is first used (it is then made with the
       * signup grant): a read beside the wallet's entity, for a decision that needs no strict order with charges
       * (whether a scheduled firing may start at all).
       */
      balance: (userId: UserId) => balanceOf(userId).pipe(Effect.map(Option.map((row) => row.balance)), Effect.orDie),
      /** Credits spent since `since` (charges of any kind). */
      spentSince: (userId: UserId, since: Date) =>
        spentSinceOf({ userId, since }).pipe(Effect.map((row) => row.spent), Effect.orDie),
      /**
       * Newest first; `before` is the `seq` to page below. Ordered by the table's `seq`: a bare `ORDER BY seq` would
       * name the output column `seq::text` and sort "9" above "10".
       */
      page: (userId: UserId, limit: number, before: bigint | null) =>
        pageOf({ userId, limit, before }).pipe(
          Effect.map((rows) => ({ hasMore: rows.length > limit, lines: rows.slice(0, limit) })),
          Effect.orDie
        ),
      /**
       * What the ledger holds for a run's own steps (scope `run`, keys `<run>:<step>`): what a run whose end was
       * written without its engine's count (runs/Background.ts, after a defect) records as charged.
       */
      runCharged: (userId: UserId, runId: RunId) =>
        runChargedOf({ userId, runId }).pipe(Effect.map((row) => row.spent), Effect.orDie),
      /** Every entry's amount summed, and the wallet's balance: equal, always (tests and audits read this). */
      audit: (userId: UserId) => Effect.orDie(auditOf(userId))
    } as const
  })
}) {}
