import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import { Effect, Option, Schema } from "effect"
import type { Fence } from "../platform/cluster/Fences.js"
import type { Micros } from "../platform/Money.js"
import { decodeFirst, decodeRows, Json } from "../platform/Rows.js"

/** What a ledger entry records beyond its amount: why, for whom, and the key that makes it happen once. */
export interface EntryInfo {
  readonly kind: string
  /** With `key`, unique forever: an app id for events, `credit:<user>` for /openapi consumes, `grant`, `order`... */
  readonly scope: string
  readonly key: string
  readonly appId: string | null
  readonly event: string | null
  readonly metadata: Readonly<Record<string, string>> | null
  readonly description: string | null
}

export interface NewEntry extends EntryInfo {
  readonly seq: bigint
  readonly amount: Micros
  readonly balanceAfter: Micros
  readonly createdAt: Date
}

/** An entry found by its idempotency key: enough to answer a replay with the original numbers. */
export interface KeyedEntry {
  readonly userId: string
  readonly scope: string
  readonly key: string
  readonly amount: Micros
  readonly balanceAfter: Micros
}

export interface WalletState {
  readonly balance: Micros
  readonly seq: bigint
}

export const entryKey = (scope: string, key: string) => `${scope}\u0000${key}`

/**
 * One wallet's batch: its entries and new state, written only if the wallet is still at `fromSeq` and its owner's
 * `fence` is still its shard's generation (`null`: embedded mode, one runner, nothing to fence).
 */
export interface WalletCommit {
  readonly userId: string
  readonly fence: Fence | null
  readonly fromSeq: bigint
  readonly entries: ReadonlyArray<NewEntry>
  readonly next: WalletState
}

/** What became of one wallet's batch in a shared commit. */
export type CommitOutcome =
  | { readonly _tag: "Committed" }
  /** Some of its keys were already in the ledger (these entries); nothing of this wallet was written. */
  | { readonly _tag: "KeysUsed"; readonly known: ReadonlyArray<KeyedEntry> }
  /** The wallet's row was not at `fromSeq`; nothing of this wallet was written. */
  | { readonly _tag: "Moved" }
  /** Its fence is stale (another runner acquired its shard since this owner started); nothing was written. */
  | { readonly _tag: "Fenced" }

/** The SQL of wallets and their ledger; only the Wallet entity writes through it. SQL errors are defects here. */
export class LedgerRepo extends Effect.Service<LedgerRepo>()("atrium/billing/LedgerRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    /** The wallet of `userId`, created on first use with the signup grant (once: its key is the user id). */
    const load = (userId: string, signupCredits: Micros) =>
      sql.withTransaction(Effect.gen(function*() {
        const created = yield* sql<{ userId: string }>`
          INSERT INTO wallets (user_id) VALUES (${userId}) ON CONFLICT (user_id) DO NOTHING RETURNING user_id`
        if (created.length > 0 && signupCredits > 0n) {
          yield* insertEntries(userId, [{
            seq: 1n,
            amount: signupCredits,
            balanceAfter: signupCredits,
            kind: "signup",
            scope: "signup",
            key: userId,
            appId: null,
            event: null,
            metadata: null,
            description: "Welcome credits",
            createdAt: new Date()
          }])
          yield* sql`UPDATE wallets SET balance = ${String(signupCredits)}, seq = 1 WHERE user_id = ${userId}`
        }
        const rows = yield* sql<{ balance: string; seq: string }>`
          SELECT balance::text, seq::text FROM wallets WHERE user_id = ${userId}`
        return { balance: BigInt(rows[0]!.balance), seq: BigInt(rows[0]!.seq) } satisfies WalletState
      })).pipe(Effect.orDie, Effect.withSpan("LedgerRepo.load"))

    const insertEntries = (userId: string, entries: ReadonlyArray<NewEntry>) =>
      sql`INSERT INTO ledger_entries ${
        sql.insert(entries.map((e) => ({
          userId,
          seq: String(e.seq),
          amount: String(e.amount),
          kind: e.kind,
          scope: e.scope,
          idempotencyKey: e.key,
          appId: e.appId,
          event: e.event,
          metadata: e.metadata === null ? null : JSON.stringify(e.metadata),
          description: e.description,
          balanceAfter: String(e.balanceAfter),
          createdAt: e.createdAt
        })))
      }`

    /** Entries already written under any of these keys, by anyone (one index probe per key, however many rows). */
    const findByKeys = (keys: ReadonlyArray<{ readonly scope: string; readonly key: string }>) =>
      (keys.length === 0
        ? Effect.succeed(new Map<string, KeyedEntry>())
        : sql<{ userId: string; scope: string; idempotencyKey: string; amount: string; balanceAfter: string }>`
          SELECT l.user_id, l.scope, l.idempotency_key, l.amount::text, l.balance_after::text
          FROM unnest(${keys.map((k) => k.scope)}::text[], ${keys.map((k) => k.key)}::text[]) AS k(scope, key)
          CROSS JOIN LATERAL (
            SELECT user_id, scope, idempotency_key, amount, balance_after FROM ledger_entries
            WHERE scope = k.scope AND idempotency_key = k.key LIMIT 1
          ) l`.pipe(
          Effect.map((rows) =>
            new Map(rows.map((row) => [
              entryKey(row.scope, row.idempotencyKey),
              {
                userId: row.userId,
                scope: row.scope,
                key: row.idempotencyKey,
                amount: BigInt(row.amount),
                balanceAfter: BigInt(row.balanceAfter)
              }
            ]))
          )
        )).pipe(Effect.orDie, Effect.withSpan("LedgerRepo.findByKeys"))

    /** What `userId` was charged by `appId` since `since` (for the app's daily cap). */
    const spentWithApp = (userId: string, appId: string, since: Date) =>
      sql<{ spent: string }>`
        SELECT COALESCE(-SUM(amount), 0)::text AS spent FROM ledger_entries
        WHERE user_id = ${userId} AND app_id = ${appId} AND amount < 0 AND created_at >= ${since}`.pipe(
        Effect.map((rows) => BigInt(rows[0]!.spent)),
        Effect.orDie
      )

    /**
     * Writes the batches of many wallets in ONE statement (one round trip, one transaction, one WAL flush), and
     * looks up their idempotency keys in the same statement, so a charge costs no read before its write:
     *  - a wallet any of whose keys is already in the ledger (by anyone) writes nothing and gets those entries back
     *    (`KeysUsed`): it decided them as new, so it decides again with them as replays;
     *  - a wallet whose row is not at the sequence its entity started from writes nothing (`Moved`): another writer
     *    got there first, so the entity must reload, never overwrite;
     *  - a wallet whose owner's fence is not its shard's generation writes nothing (`Fenced`): its runner lost the
     *    shard (migration 0017). The generation's row is locked `FOR SHARE` for the statement, so the next owner's
     *    acquisition waits for this write, or this write sees the new generation;
     *  - every other wallet gets its new balance and its entries (`Committed`).
     * The database still checks everything (balance >= 0, unique keys, the chain, ledger = balance at commit): a
     * refusal fails the whole statement, and the caller settles the wallets one by one.
     */
    const commitWallets = (commits: ReadonlyArray<WalletCommit>) =>
      Effect.gen(function*() {
        const wallets = JSON.stringify(commits.map((c) => ({
          user_id: c.userId,
          shard: c.fence?.shard ?? null,
          generation: c.fence?.generation ?? null,
          from_seq: String(c.fromSeq),
          balance: String(c.next.balance),
          seq: String(c.next.seq)
        })))
        const entries = JSON.stringify(commits.flatMap((c) =>
          c.entries.map((e) => ({
            user_id: c.userId,
            seq: String(e.seq),
            amount: String(e.amount),
            kind: e.kind,
            scope: e.scope,
            idempotency_key: e.key,
            app_id: e.appId,
            event: e.event,
            metadata: e.metadata,
            description: e.description,
            balance_after: String(e.balanceAfter),
            created_at: e.createdAt.toISOString()
          }))
        ))
        const rows = yield* sql<{
          what: "hit" | "moved" | "inserted" | "fenced"
          wallet: string
          userId: string | null
          scope: string | null
          idempotencyKey: string | null
          amount: string | null
          balanceAfter: string | null
        }>`
          WITH w AS (
            SELECT * FROM jsonb_to_recordset(${wallets}::jsonb)
              AS w(user_id text, shard text, generation bigint, from_seq bigint, balance bigint, seq bigint)
          ), fence AS MATERIALIZED (
            SELECT g.shard, g.generation FROM shard_generations g
            WHERE g.shard IN (SELECT w.shard FROM w WHERE w.shard IS NOT NULL)
            ORDER BY g.shard FOR SHARE
          ), fenced AS (
            SELECT w.user_id FROM w WHERE w.shard IS NOT NULL
              AND NOT EXISTS (SELECT 1 FROM fence WHERE fence.shard = w.shard AND fence.generation = w.generation)
          ), e AS (
            SELECT * FROM jsonb_to_recordset(${entries}::jsonb)
              AS e(user_id text, seq bigint, amount bigint, kind text, scope text, idempotency_key text, app_id text,
                   event text, metadata jsonb, description text, balance_after bigint, created_at timestamptz)
          ), hit AS (
            -- One index probe per key, whatever the planner guesses of the batch's size (LIMIT keeps it a probe).
            SELECT e.user_id AS wallet, l.user_id, l.scope, l.idempotency_key, l.amount, l.balance_after
            FROM e CROSS JOIN LATERAL (
              SELECT user_id, scope, idempotency_key, amount, balance_after FROM ledger_entries
              WHERE scope = e.scope AND idempotency_key = e.idempotency_key LIMIT 1
            ) l
          ), moved AS (
            UPDATE wallets SET balance = w.balance, seq = w.seq, updated_at = now()
            FROM w
            WHERE wallets.user_id = w.user_id AND wallets.seq = w.from_seq
              AND NOT EXISTS (SELECT 1 FROM hit WHERE hit.wallet = w.user_id)
              AND NOT EXISTS (SELECT 1 FROM fenced WHERE fenced.user_id = w.user_id)
            RETURNING wallets.user_id
          ), inserted AS (
            INSERT INTO ledger_entries (user_id, seq, amount, kind, scope, idempotency_key, app_id, event, metadata,
                                        description, balance_after, created_at)
            SELECT e.user_id, e.seq, e.amount, e.kind, e.scope, e.idempotency_key, e.app_id, e.event, e.metadata,
                   e.description, e.balance_after, e.created_at
            FROM e JOIN moved ON moved.user_id = e.user_id
            ORDER BY e.user_id, e.seq
            RETURNING user_id
          )
          SELECT 'hit' AS what, wallet, user_id, scope, idempotency_key, amount::text, balance_after::text FROM hit
          UNION ALL
          SELECT 'fenced', user_id, NULL, NULL, NULL, NULL, NULL FROM fenced
          UNION ALL
          SELECT 'moved', user_id, NULL, NULL, NULL, NULL, NULL FROM moved
          UNION ALL
          SELECT 'inserted', user_id, NULL, NULL, NULL, count(*)::text, NULL FROM inserted GROUP BY user_id`
        const known = new Map<string, Array<KeyedEntry>>()
        const moved = new Set<string>()
        const inserted = new Map<string, number>()
        const fenced = new Set<string>()
        for (const row of rows) {
          if (row.what === "fenced") {
            fenced.add(row.wallet)
          } else if (row.what === "hit") {
            const list = known.get(row.wallet) ?? []
            list.push({
              userId: row.userId!,
              scope: row.scope!,
              key: row.idempotencyKey!,
              amount: BigInt(row.amount!),
              balanceAfter: BigInt(row.balanceAfter!)
            })
            known.set(row.wallet, list)
          } else if (row.what === "moved") {
            moved.add(row.wallet)
          } else {
            inserted.set(row.wallet, Number(row.amount))
          }
        }
        return commits.map((c): CommitOutcome => {
          if (fenced.has(c.userId)) return { _tag: "Fenced" }
          const hits = known.get(c.userId)
          if (hits !== undefined) return { _tag: "KeysUsed", known: hits }
          if (!moved.has(c.userId)) return { _tag: "Moved" }
          if ((inserted.get(c.userId) ?? 0) !== c.entries.length) {
            // Cannot happen (the statement inserts all of a moved wallet's entries or fails); refuse to believe it.
            throw new Error(`wallet ${c.userId}: ${inserted.get(c.userId) ?? 0} of ${c.entries.length} entries written`)
          }
          return { _tag: "Committed" }
        })
      }).pipe(Effect.withSpan("LedgerRepo.commitWallets", { attributes: { wallets: commits.length } }))

    const findUser = (userId: string) =>
      sql<{ id: string }>`SELECT id FROM users WHERE id = ${userId}`.pipe(
        Effect.map((rows) => Option.fromNullable(rows[0]?.id)),
        Effect.orDie
      )

    return { load, findByKeys, spentWithApp, commitWallets, findUser } as const
  })
}) {}

const MeterRowSchema = Schema.Struct({
  id: Schema.String,
  appId: Schema.String,
  eventName: Schema.String,
  /** Micro-credits per event. */
  creditsPerUse: Schema.BigInt,
  disabled: Schema.Boolean,
  createdAt: Schema.DateFromSelf
})
export type MeterRow = typeof MeterRowSchema.Type

const meterRows = decodeRows(MeterRowSchema)
const firstMeter = decodeFirst(MeterRowSchema)

const METER_COLUMNS = "id, app_id, event_name, credits_per_use::text, disabled, created_at"

/** The meters of OAuth apps (spec 2.6): what an event of an app costs. The apps are identity's (`identity/oauth`). */
export class MetersRepo extends Effect.Service<MetersRepo>()("atrium/billing/MetersRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return {
      insertMeter: (meter: Omit<MeterRow, "createdAt" | "disabled">) =>
        sql`
          INSERT INTO meters (id, app_id, event_name, credits_per_use)
          VALUES (${meter.id}, ${meter.appId}, ${meter.eventName}, ${String(meter.creditsPerUse)})
          ON CONFLICT (app_id, event_name) DO NOTHING
          RETURNING ${sql.literal(METER_COLUMNS)}`.pipe(Effect.flatMap(firstMeter), Effect.orDie),
      listMeters: (appId: string) =>
        sql`SELECT ${sql.literal(METER_COLUMNS)} FROM meters WHERE app_id = ${appId} ORDER BY created_at, id`.pipe(
          Effect.flatMap(meterRows),
          Effect.orDie
        ),
      findMeter: (appId: string, eventName: string) =>
        sql`SELECT ${sql.literal(METER_COLUMNS)} FROM meters WHERE app_id = ${appId} AND event_name = ${eventName}`.pipe(
          Effect.flatMap(firstMeter),
          Effect.orDie
        ),
      updateMeter: (appId: string, meterId: string, patch: {
        readonly creditsPerUse?: Micros | undefined
        readonly disabled?: boolean | undefined
      }) =>
        sql`
          UPDATE meters SET
            credits_per_use = COALESCE(${patch.creditsPerUse === undefined ? null : String(patch.creditsPerUse)}::bigint, credits_per_use),
            disabled = COALESCE(${patch.disabled ?? null}::boolean, disabled),
            updated_at = now()
          WHERE id = ${meterId} AND app_id = ${appId} RETURNING ${sql.literal(METER_COLUMNS)}`.pipe(
          Effect.flatMap(firstMeter),
          Effect.orDie
        )
    } as const
  })
}) {}

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

/** Read side of the ledger: what a user sees of their wallet. */
export class LedgerReads extends Effect.Service<LedgerReads>()("atrium/billing/LedgerReads", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return {
      /** Credits spent since `since` (charges of any kind). */
      spentSince: (userId: string, since: Date) =>
        sql`
          SELECT COALESCE(-SUM(amount), 0)::text AS spent FROM ledger_entries
          WHERE user_id = ${userId} AND amount < 0 AND created_at >= ${since}`.pipe(
          Effect.flatMap(decodeFirst(Spent)),
          Effect.map((row) => Option.getOrThrow(row).spent),
          Effect.orDie
        ),
      /**
       * Newest first; `before` is the `seq` to page below. Ordered by the table's `seq`: a bare `ORDER BY seq` would
       * name the output column `seq::text` and sort "9" above "10".
       */
      page: (userId: string, limit: number, before: bigint | null) =>
        sql`
          SELECT seq::text, amount::text, kind, app_id, event, metadata, description, balance_after::text, created_at
          FROM ledger_entries
          WHERE user_id = ${userId} ${before === null ? sql`` : sql`AND seq < ${String(before)}`}
          ORDER BY ledger_entries.seq DESC LIMIT ${limit + 1}`.pipe(
          Effect.flatMap(decodeRows(LedgerLineRow)),
          Effect.map((rows) => ({ hasMore: rows.length > limit, lines: rows.slice(0, limit) })),
          Effect.orDie
        ),
      /** Every entry's amount summed, and the wallet's balance: equal, always (tests and audits read this). */
      audit: (userId: string) =>
        sql`
          SELECT COALESCE((SELECT SUM(amount) FROM ledger_entries WHERE user_id = ${userId}), 0)::text AS sum,
                 COALESCE((SELECT balance FROM wallets WHERE user_id = ${userId}), 0)::text AS balance`.pipe(
          Effect.flatMap(decodeFirst(Audit)),
          Effect.map(Option.getOrThrow),
          Effect.orDie
        )
    } as const
  })
}) {}

const OrderRow = Schema.Struct({ userId: Schema.String, amount: Schema.BigInt, status: Schema.String })

/** Top-up orders (`POST /api/payment/createOrder`) and their payment by the provider's callback. */
export class PaymentOrdersRepo extends Effect.Service<PaymentOrdersRepo>()("atrium/billing/PaymentOrdersRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const insert = SqlSchema.single({
      Request: Schema.Struct({ id: Schema.String, userId: Schema.String, amount: Schema.BigInt }),
      Result: Schema.Struct({ createdAt: Schema.DateFromSelf }),
      execute: (order) =>
        sql`
          INSERT INTO payment_orders (id, user_id, amount, status)
          VALUES (${order.id}, ${order.userId}, ${String(order.amount)}, 'pending') RETURNING created_at`
    })

    const find = SqlSchema.findOne({
      Request: Schema.String,
      Result: OrderRow,
      execute: (id) => sql`SELECT user_id, amount::text, status FROM payment_orders WHERE id = ${id}`
    })

    const markPaid = (id: string, provider: string) =>
      sql`
        UPDATE payment_orders SET status = 'paid', provider = ${provider}, paid_at = now()
        WHERE id = ${id} AND status = 'pending'`

    return {
      /** A pending order; answers when it was created. */
      insert: (id: string, userId: string, amount: Micros) =>
        Effect.orDie(Effect.map(insert({ id, userId, amount }), (row) => row.createdAt)),
      find: (id: string) => Effect.orDie(find(id)),
      markPaid: (id: string, provider: string) => Effect.orDie(Effect.asVoid(markPaid(id, provider)))
    } as const
  })
}) {}
