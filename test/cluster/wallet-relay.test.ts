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
 * Issue 45 item 4: a runner's charges for several wallets of another runner travel together, one `Relay` message on
 * the runner socket per batch (billing/WalletRelay.ts), each wallet's charges still decided by its own entity. Real
 * `dist/main.js` with `WORKERS=2` on PostgreSQL: many payers charged at once through the shared port (node:cluster
 * deals the connections to both workers), each payer's charges one after another; read back from the replies, the
 * ledger and each worker's Prometheus metrics. Services mode only.
 */

const PAYERS = 16
/** Charges per payer, one after another. */
const CHARGES = 10
const PRICE_MICROS = 10_000
const PHONES = Array.from({ length: PAYERS + 1 }, (_, i) => `+1556${Crypto.randomInt(1e6).toString().padStart(6, "0")}${i.toString().padStart(2, "0")}`)

describe("charges for many wallets of another runner (issue 45 item 4)", () => {
  it.scopedLive("WORKERS=2: relayed together, every charge answered once, in order per wallet", () =>
    Effect.gen(function*() {
      const shared = yield* makeShared("wallet_relay", { fromTemplate: true, phones: PHONES })
      const metricsPort = yield* Effect.promise(() => freePorts(3))
      const platform = yield* launchPlatform({
        ...shared.env,
        WORKERS: "2",
        METRICS_PORT: String(metricsPort),
        RUNNER_PORT: String(yield* freePort)
      })
      yield* settled(shared, 2)
      const base = platform.url
      const login = (phone: string) =>
        Effect.map(requestAt(base, "POST", "/api/auth/login", { body: { phone, code: CODE } }), (reply) => {
          assert.strictEqual(reply.status, 200, reply.text)
          return reply.body.token as string
        })
      const atPlatform = Effect.provideService(TestServer, {
        url: base,
        inbox: undefined as unknown as SmsInbox,
        query: () => Effect.dieMessage("not used")
      })
      const developer = yield* login(PHONES[0]!)
      const app = yield* atPlatform(registerApp(developer, { meters: { "api.call": PRICE_MICROS / 1e6 } }))
      const payers = yield* Effect.forEach(PHONES.slice(1), (phone) =>
        Effect.gen(function*() {
          const token = yield* login(phone)
          const tokens = yield* atPlatform(authorizeApp(token, app, "events"))
          const userId = userIdOf(token)
          const granted = yield* requestAt(base, "POST", `/internal/wallets/${userId}/grants`, {
            body: { amount: "1000", idempotency_key: Crypto.randomUUID(), reason: "wallet-relay test" },
            headers: internalAuth
          })
          assert.strictEqual(granted.status, 200, granted.text)
          return { userId, access: tokens.access_token as string, before: Math.round((granted.body.balance as number) * 1e6) }
        }))

      // Every payer at once, each one's charges one after another, each on a connection of its own.
      const runs = yield* Effect.forEach(payers, (payer) =>
        Effect.forEach(Array.from({ length: CHARGES }, () => Crypto.randomUUID()), (key) =>
          Effect.map(
            requestAt(base, "POST", "/v1/events", {
              token: payer.access,
              body: { event: "api.call", idempotency_key: key },
              headers: { connection: "close" }
            }),
            (reply) => ({ key, reply })
          )).pipe(Effect.map((charges) => ({ payer, charges }))), { concurrency: "unbounded" })

      for (const { charges, payer } of runs) {
        assert.deepStrictEqual(charges.filter((c) => c.reply.status !== 200).map((c) => `${c.reply.status} ${c.reply.text}`), [])
        assert.deepStrictEqual(charges.filter((c) => c.reply.body.idempotent_replay !== undefined).map((c) => c.reply.text), [])
        // In order, each once: the balance after each charge is one price below the one before it.
        assert.deepStrictEqual(
          charges.map((c) => Math.round((c.reply.body.balance_remaining as number) * 1e6)),
          charges.map((_, i) => payer.before - (i + 1) * PRICE_MICROS)
        )
        const [ledger] = yield* Effect.promise(() =>
          adminQuery(
            shared.databaseUrl,
            `SELECT count(*)::int AS entries, count(DISTINCT idempotency_key)::int AS keys FROM ledger_entries
             WHERE user_id = $1 AND idempotency_key = ANY($2::text[])`,
            [payer.userId, charges.map((c) => c.key)]
          )
        )
        assert.deepStrictEqual(ledger, { entries: CHARGES, keys: CHARGES })
      }

      const scrapes = yield* Effect.promise(() =>
        Promise.all([1, 2].map((i) => fetch(`http://127.0.0.1:${metricsPort + i}/metrics`).then((r) => r.text())))
      )
      const sum = (metric: string, labels: Record<string, string>) => scrapes.reduce((n, text) => n + total(text, metric, labels), 0)
      assert.strictEqual(sum("wallet_charges_total", {}), PAYERS * CHARGES, scrapes.join("\n"))
      // Each payer's charges go one after another, so a message per wallet would carry one charge: fewer messages
      // than charges to the other runner is charges of several wallets travelling together.
      const away = sum("wallet_charges_total", { via: "message", to: "another_runner" })
      const messages = sum("wallet_charge_messages_total", { to: "another_runner" })
      assert.isAtLeast(away, (PAYERS * CHARGES) / 5, "too few charges crossed runners")
      assert.isBelow(messages, away, `${away} charges in ${messages} messages to the other runner`)
      console.log(`wallet-relay: ${away} charges to the other runner in ${messages} messages`)
    }), { timeout: 300_000 })
})
