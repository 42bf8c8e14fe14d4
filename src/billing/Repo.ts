import { SqlClient } from "@effect/sql"
import { Effect, Option } from "effect"
import type { Micros } from "../platform/Money.js"

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

/** One wallet's batch: its entries and new state, written only if the wallet is still at `fromSeq`. */
export interface WalletCommit {
  readonly userId: string
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
     *  - every other wallet gets its new balance and its entries (`Committed`).
     * The database still checks everything (balance >= 0, unique keys, the chain, ledger = balance at commit): a
     * refusal fails the whole statement, and the caller settles the wallets one by one.
     */
    const commitWallets = (commits: ReadonlyArray<WalletCommit>) =>
      Effect.gen(function*() {
        const wallets = JSON.stringify(commits.map((c) => ({
          user_id: c.userId,
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
          what: "hit" | "moved" | "inserted"
          wallet: string
          userId: string | null
          scope: string | null
          idempotencyKey: string | null
          amount: string | null
          balanceAfter: string | null
        }>`
          WITH w AS (
            SELECT * FROM jsonb_to_recordset(${wallets}::jsonb)
              AS w(user_id text, from_seq bigint, balance bigint, seq bigint)
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
          SELECT 'moved', user_id, NULL, NULL, NULL, NULL, NULL FROM moved
          UNION ALL
          SELECT 'inserted', user_id, NULL, NULL, NULL, count(*)::text, NULL FROM inserted GROUP BY user_id`
        const known = new Map<string, Array<KeyedEntry>>()
        const moved = new Set<string>()
        const inserted = new Map<string, number>()
        for (const row of rows) {
          if (row.what === "hit") {
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

export interface AppRow {
  readonly id: string
  readonly ownerId: string
  readonly name: string
  readonly clientId: string
  readonly clientSecretHash: string
  readonly redirectUris: ReadonlyArray<string>
  readonly dailyCapPerUser: Micros | null
  readonly createdAt: Date
}

export interface MeterRow {
  readonly id: string
  readonly appId: string
  readonly eventName: string
  readonly creditsPerUse: Micros
  readonly disabled: boolean
  readonly createdAt: Date
}

const toApp = (row: any): AppRow => ({
  id: row.id,
  ownerId: row.ownerId,
  name: row.name,
  clientId: row.clientId,
  clientSecretHash: row.clientSecretHash,
  redirectUris: typeof row.redirectUris === "string" ? JSON.parse(row.redirectUris) : row.redirectUris,
  dailyCapPerUser: row.dailyCapPerUser === null ? null : BigInt(row.dailyCapPerUser),
  createdAt: row.createdAt
})

const toMeter = (row: any): MeterRow => ({
  id: row.id,
  appId: row.appId,
  eventName: row.eventName,
  creditsPerUse: BigInt(row.creditsPerUse),
  disabled: row.disabled,
  createdAt: row.createdAt
})

const APP_COLUMNS = "id, owner_id, name, client_id, client_secret_hash, redirect_uris, daily_cap_per_user::text, created_at"
const METER_COLUMNS = "id, app_id, event_name, credits_per_use::text, disabled, created_at"

/** OAuth apps and their meters (spec 2.6). */
export class AppsRepo extends Effect.Service<AppsRepo>()("atrium/billing/AppsRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const one = <A>(rows: ReadonlyArray<any>, f: (row: any) => A) => Option.map(Option.fromNullable(rows[0]), f)

    return {
      insertApp: (app: Omit<AppRow, "createdAt" | "dailyCapPerUser">) =>
        sql`
          INSERT INTO apps (id, owner_id, name, client_id, client_secret_hash, redirect_uris)
          VALUES (${app.id}, ${app.ownerId}, ${app.name}, ${app.clientId}, ${app.clientSecretHash},
                  ${JSON.stringify(app.redirectUris)}::jsonb)
          RETURNING ${sql.literal(APP_COLUMNS)}`.pipe(Effect.map((rows) => toApp(rows[0])), Effect.orDie),
      listApps: (ownerId: string) =>
        sql`SELECT ${sql.literal(APP_COLUMNS)} FROM apps WHERE owner_id = ${ownerId} ORDER BY created_at, id`.pipe(
          Effect.map((rows) => rows.map(toApp)),
          Effect.orDie
        ),
      findApp: (id: string) =>
        sql`SELECT ${sql.literal(APP_COLUMNS)} FROM apps WHERE id = ${id}`.pipe(
          Effect.map((rows) => one(rows, toApp)),
          Effect.orDie
        ),
      findAppByClientId: (clientId: string) =>
        sql`SELECT ${sql.literal(APP_COLUMNS)} FROM apps WHERE client_id = ${clientId}`.pipe(
          Effect.map((rows) => one(rows, toApp)),
          Effect.orDie
        ),
      updateApp: (id: string, patch: {
        readonly name?: string | undefined
        readonly redirectUris?: ReadonlyArray<string> | undefined
        readonly dailyCapPerUser?: Micros | null | undefined
      }) =>
        sql`
          UPDATE apps SET
            name = COALESCE(${patch.name ?? null}, name),
            redirect_uris = COALESCE(${patch.redirectUris === undefined ? null : JSON.stringify(patch.redirectUris)}::jsonb, redirect_uris),
            daily_cap_per_user = CASE WHEN ${patch.dailyCapPerUser !== undefined} THEN ${
          patch.dailyCapPerUser === undefined || patch.dailyCapPerUser === null ? null : String(patch.dailyCapPerUser)
        }::bigint ELSE daily_cap_per_user END,
            updated_at = now()
          WHERE id = ${id} RETURNING ${sql.literal(APP_COLUMNS)}`.pipe(
          Effect.map((rows) => one(rows, toApp)),
          Effect.orDie
        ),
      insertMeter: (meter: Omit<MeterRow, "createdAt" | "disabled">) =>
        sql`
          INSERT INTO meters (id, app_id, event_name, credits_per_use)
          VALUES (${meter.id}, ${meter.appId}, ${meter.eventName}, ${String(meter.creditsPerUse)})
          ON CONFLICT (app_id, event_name) DO NOTHING
          RETURNING ${sql.literal(METER_COLUMNS)}`.pipe(Effect.map((rows) => one(rows, toMeter)), Effect.orDie),
      listMeters: (appId: string) =>
        sql`SELECT ${sql.literal(METER_COLUMNS)} FROM meters WHERE app_id = ${appId} ORDER BY created_at, id`.pipe(
          Effect.map((rows) => rows.map(toMeter)),
          Effect.orDie
        ),
      findMeter: (appId: string, eventName: string) =>
        sql`SELECT ${sql.literal(METER_COLUMNS)} FROM meters WHERE app_id = ${appId} AND event_name = ${eventName}`.pipe(
          Effect.map((rows) => one(rows, toMeter)),
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
          Effect.map((rows) => one(rows, toMeter)),
          Effect.orDie
        )
    } as const
  })
}) {}

export interface LedgerLine {
  readonly seq: bigint
  readonly amount: Micros
  readonly kind: string
  readonly appId: string | null
  readonly event: string | null
  readonly metadata: Record<string, string> | null
  readonly description: string | null
  readonly balanceAfter: Micros
  readonly createdAt: Date
}

/** Read side of the ledger: what a user sees of their wallet. */
export class LedgerReads extends Effect.Service<LedgerReads>()("atrium/billing/LedgerReads", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return {
      /** Credits spent since `since` (charges of any kind). */
      spentSince: (userId: string, since: Date) =>
        sql<{ spent: string }>`
          SELECT COALESCE(-SUM(amount), 0)::text AS spent FROM ledger_entries
          WHERE user_id = ${userId} AND amount < 0 AND created_at >= ${since}`.pipe(
          Effect.map((rows) => BigInt(rows[0]!.spent)),
          Effect.orDie
        ),
      /**
       * Newest first; `before` is the `seq` to page below. Ordered by the table's `seq`: a bare `ORDER BY seq` would
       * name the output column `seq::text` and sort "9" above "10".
       */
      page: (userId: string, limit: number, before: bigint | null) =>
        sql<any>`
          SELECT seq::text, amount::text, kind, app_id, event, metadata, description, balance_after::text, created_at
          FROM ledger_entries
          WHERE user_id = ${userId} ${before === null ? sql`` : sql`AND seq < ${String(before)}`}
          ORDER BY ledger_entries.seq DESC LIMIT ${limit + 1}`.pipe(
          Effect.map((rows) => ({
            hasMore: rows.length > limit,
            lines: rows.slice(0, limit).map((row): LedgerLine => ({
              seq: BigInt(row.seq),
              amount: BigInt(row.amount),
              kind: row.kind,
              appId: row.appId,
              event: row.event,
              metadata: typeof row.metadata === "string" ? JSON.parse(row.metadata) : row.metadata,
              description: row.description,
              balanceAfter: BigInt(row.balanceAfter),
              createdAt: row.createdAt
            }))
          })),
          Effect.orDie
        ),
      /** Every entry's amount summed, and the wallet's balance: equal, always (tests and audits read this). */
      audit: (userId: string) =>
        sql<{ sum: string; balance: string }>`
          SELECT COALESCE((SELECT SUM(amount) FROM ledger_entries WHERE user_id = ${userId}), 0)::text AS sum,
                 COALESCE((SELECT balance FROM wallets WHERE user_id = ${userId}), 0)::text AS balance`.pipe(
          Effect.map((rows) => ({ sum: BigInt(rows[0]!.sum), balance: BigInt(rows[0]!.balance) })),
          Effect.orDie
        )
    } as const
  })
}) {}
