import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Crypto from "node:crypto"
import { authorizeApp, registerApp, userIdOf } from "../support/Billing.js"
import { requestAt } from "../support/Client.js"
import { freePorts } from "../support/Local.js"
import { freePort, launchPlatform } from "../support/Process.js"
import { adminQuery } from "../support/Templates.js"
import { internalAuth, type SmsInbox, TestServer } from "../support/TestServer.js"
import { CODE, makeShared, settled, total } from "./support.js"

/**
 * Issue 28 item 4: under `WORKERS=2` a wallet's charges taken by the worker that does not own it reach the owner in
 * batches, one `Charges` message (one request and reply on the runner socket, nothing stored) per batch. Real
 * `dist/main.js` with `WORKERS=2` on PostgreSQL, many concurrent `POST /v1/events` on one wallet through the shared
 * port (node:cluster hands the connections to both workers), read back from the ledger, the cluster's message table
 * and each worker's Prometheus metrics. Services mode only: embedded mode is one process.
 */

const PHONES = Array.from({ length: 2 }, (_, i) => `+1555${Crypto.randomInt(1e6).toString().padStart(6, "0")}${i}`)
/** Concurrent charges on the one wallet. */
const CHARGES = 240
/** Each charge's price, in micro-credits (the meter's 0.01). */
const PRICE_MICROS = 10_000

/** A port P with P, P + 1 and P + 2 free: the primary's metrics and each of the two workers' (METRICS_PORT + 1 + i). */
const metricsPorts = Effect.promise(() => freePorts(3))

describe("a wallet charged through the worker that does not own it (issue 28 item 4)", () => {
  it.scopedLive("WORKERS=2: every charge once, the non-owner's in batches over the runner socket, no message stored", () =>
    Effect.gen(function*() {
      const shared = yield* makeShared("wallet_remote", { fromTemplate: true, phones: PHONES })
      const metricsPort = yield* metricsPorts
      const platform = yield* launchPlatform({
        ...shared.env,
        WORKERS: "2",
        METRICS_PORT: String(metricsPort),
        RUNNER_PORT: String(yield* freePort)
      })
      yield* settled(shared, 2)
      const base = platform.url

      // An app with a meter, authorized by the user who pays: `POST /v1/events` as a third-party app sends it.
      const login = (phone: string) =>
        Effect.map(requestAt(base, "POST", "/api/auth/login", { body: { phone, code: CODE } }), (reply) => {
          assert.strictEqual(reply.status, 200, reply.text)
          return reply.body.token as string
        })
      const developer = yield* login(PHONES[0]!)
      const payerToken = yield* login(PHONES[1]!)
      const payer = userIdOf(payerToken)
      // The helpers take their server from `TestServer`; here that is the process.
      const atPlatform = Effect.provideService(TestServer, {
        url: base,
        inbox: undefined as unknown as SmsInbox,
        query: () => Effect.dieMessage("not used")
      })
      const app = yield* atPlatform(registerApp(developer, { meters: { "api.call": PRICE_MICROS / 1e6 } }))
      const tokens = yield* atPlatform(authorizeApp(payerToken, app, "events"))
      const granted = yield* requestAt(base, "POST", `/internal/wallets/${payer}/grants`, {
        body: { amount: "1000", idempotency_key: Crypto.randomUUID(), reason: "wallet-remote test" },
        headers: internalAuth
      })
      assert.strictEqual(granted.status, 200, granted.text)
      const before = Math.round((granted.body.balance as number) * 1e6)

      // All at once on the one wallet, each on a connection of its own so that node:cluster deals them to both
      // workers: about half are taken by the worker that does not own the wallet.
      const keys = Array.from({ length: CHARGES }, () => Crypto.randomUUID())
      const replies = yield* Effect.all(
        keys.map((key) =>
          requestAt(base, "POST", "/v1/events", {
            token: tokens.access_token,
            body: { event: "api.call", idempotency_key: key },
            headers: { connection: "close" }
          })
        ),
        { concurrency: "unbounded" }
      )
      assert.deepStrictEqual(replies.filter((r) => r.status !== 200).map((r) => `${r.status} ${r.text}`), [])
      // Exactly once: no charge answered as a replay, and the balances after them are every step from the
      // balance before down to CHARGES prices less, each once (a charge lost or doubled would skip or repeat one).
      assert.deepStrictEqual(replies.filter((r) => r.body.idempotent_replay !== undefined).map((r) => r.text), [])
      const after = replies.map((r) => Math.round((r.body.balance_remaining as number) * 1e6)).sort((x, y) => y - x)
      assert.deepStrictEqual(after, keys.map((_, i) => before - (i + 1) * PRICE_MICROS))

      // The ledger holds each key once, and the wallet's balance is what its entries say.
      const [ledger] = yield* Effect.promise(() =>
        adminQuery(
          shared.databaseUrl,
          `SELECT count(*)::int AS entries, count(DISTINCT idempotency_key)::int AS keys, coalesce(sum(amount), 0)::bigint AS sum
           FROM ledger_entries WHERE user_id = $1 AND idempotency_key = ANY($2::text[])`,
          [payer, keys]
        )
      )
      assert.deepStrictEqual(ledger, { entries: CHARGES, keys: CHARGES, sum: String(-CHARGES * PRICE_MICROS) })
      const [wallet] = yield* Effect.promise(() => adminQuery(shared.databaseUrl, `SELECT balance FROM wallets WHERE user_id = $1`, [payer]))
      assert.strictEqual(Number(wallet!.balance), before - CHARGES * PRICE_MICROS)

      // No wallet message went through the cluster's message storage (@effect/cluster's SqlMessageStorage, prefix
      // "cluster"): `Charges` is not `Persisted`, so it travels as an RPC on the runner socket only.
      const stored = yield* Effect.promise(() =>
        adminQuery(
          shared.databaseUrl,
          `SELECT tag, count(*)::int AS n FROM cluster_messages WHERE entity_type = 'Wallet' GROUP BY tag`
        )
      )
      assert.deepStrictEqual(stored, [])

      // Each worker's metrics: how its charges reached the wallet.
      const scrapes = yield* Effect.promise(() =>
        Promise.all([1, 2].map((i) => fetch(`http://127.0.0.1:${metricsPort + i}/metrics`).then((r) => r.text())))
      )
      const sum = (metric: string, labels: Record<string, string>) =>
        scrapes.reduce((n, text) => n + total(text, metric, labels), 0)
      // Every charge counted once, by one of the three ways (nothing was resent: no shard moved).
      assert.strictEqual(sum("wallet_charges_total", {}), CHARGES, scrapes.join("\n"))
      // One road (issue 45): every charge went in a message, none around the cluster. One worker owns the wallet
      // and sends its own charges to itself; the other sends all of its own over the runner socket.
      assert.strictEqual(sum("wallet_charges_total", { via: "direct" }), 0, "a charge went around the cluster")
      const here = scrapes.map((text) => total(text, "wallet_charges_total", { via: "message", to: "this_runner" }))
      const away = scrapes.map((text) => total(text, "wallet_charges_total", { via: "message", to: "another_runner" }))
      const owner = here[0]! > here[1]! ? 0 : 1
      const other = 1 - owner
      assert.strictEqual(away[owner], 0, "the owner sent charges to another runner")
      assert.strictEqual(here[other], 0, "the worker without the wallet sent charges to itself")
      // Enough of them went through the other worker for the batching to show (node:cluster deals connections
      // round-robin, so about half).
      assert.isAtLeast(away[other]!, CHARGES / 5, "too few charges reached the worker that does not own the wallet")
      // Batched: the other worker's charges went in at most half as many messages. One message per charge (no
      // caller-side batching, `makeEntityBatcher`) would make these equal.
      const messages = total(scrapes[other]!, "wallet_charge_messages_total", { to: "another_runner" })
      assert.isAtLeast(messages, 1)
      assert.isAtMost(messages, away[other]! / 2, `${away[other]} charges in ${messages} messages`)
      console.log(`wallet-remote: the non-owner sent ${away[other]} charges in ${messages} messages`)
    }), { timeout: 300_000 })
})
