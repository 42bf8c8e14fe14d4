import { assert } from "@effect/vitest"
import { Effect } from "effect"
import * as Crypto from "node:crypto"
import { createApiKey, loginWithSms, type Reply, request } from "../support/Client.js"
import { authorizeApp, registerApp, userIdOf } from "../support/Billing.js"

/**
 * Helpers shared by the billing test files (test/billing/{events,credits,wallet,concurrency}.test.ts). Everything
 * goes over real HTTP; nothing here reaches into the server.
 */

/** Options for `layer(...)`: the server must run on the real clock (see test/identity/login-support.ts). */
export const LIVE = { excludeTestServices: true } as const

/** Settings every billing test server gets: enough SMS codes from 127.0.0.1 for many users per file. */
export const BILLING_ENV = { SMS_IP_HOURLY_LIMIT: "100000", SMS_DAILY_LIMIT: "1000" } as const

/** The platform's one error body, `{"error":{"type","message"}}`, and nothing else. */
export const assertError = (reply: Reply, status: number, type: string) => {
  assert.strictEqual(reply.status, status, reply.text)
  assert.deepStrictEqual(Object.keys(reply.body ?? {}), ["error"], reply.text)
  assert.strictEqual(reply.body.error.type, type, reply.text)
  assert.isString(reply.body.error.message)
}

/** Credits as integer micro-credits, so sums over many JSON numbers stay exact. */
export const micros = (credits: number): number => Math.round(credits * 1_000_000)

export interface User {
  readonly token: string
  readonly userId: string
}

/** A new user, logged in through a real SMS code. */
export const newUser = Effect.gen(function*() {
  const { token } = yield* loginWithSms()
  return { token, userId: userIdOf(token) } satisfies User
})

export interface Billed {
  /** The app's owner (a user of their own). */
  readonly owner: User
  /** The user the app bills. */
  readonly user: User
  readonly app: { readonly id: string; readonly clientId: string; readonly clientSecret: string; readonly redirectUri: string }
  /** The app's OAuth access token for `user`, with the `events` scope. */
  readonly accessToken: string
}

/** An owner registers an app with `meters`; a new user authorizes it; the app holds an `events` access token. */
export const billedUser = (
  options: { readonly meters?: Record<string, number>; readonly dailyCap?: number | null } = {}
) =>
  Effect.gen(function*() {
    const owner = yield* newUser
    const user = yield* newUser
    const app = yield* registerApp(owner.token, options)
    const tokens = yield* authorizeApp(user.token, app, "events")
    return { owner, user, app, accessToken: tokens.access_token } satisfies Billed
  })

/** Another user authorizes the same app; returns that user and the app's access token for them. */
export const authorizeAnother = (billed: Billed) =>
  Effect.gen(function*() {
    const user = yield* newUser
    const tokens = yield* authorizeApp(user.token, billed.app, "events")
    return { user, accessToken: tokens.access_token }
  })

/** `POST /v1/events`. */
export const reportEvent = (
  accessToken: string,
  body: unknown
) => request("POST", "/v1/events", { token: accessToken, body })

/** `POST /openapi/credit/consume` with an API key. */
export const consume = (apiKey: string, body: unknown) =>
  request("POST", "/openapi/credit/consume", { token: apiKey, body })

/** `GET /api/wallet`, checked. */
export const walletOf = (token: string) =>
  Effect.gen(function*() {
    const reply = yield* request("GET", "/api/wallet", { token })
    assert.strictEqual(reply.status, 200, reply.text)
    assert.deepStrictEqual(Object.keys(reply.body).sort(), ["available", "balance", "held", "today_spent"], reply.text)
    // What a new charge or hold may take: never more than the balance less what holds reserve.
    assert.strictEqual(Math.round(reply.body.available * 1e6), Math.round(reply.body.balance * 1e6) - Math.round(reply.body.held * 1e6), reply.text)
    return reply.body as { balance: number; held: number; available: number; today_spent: number }
  })

export const balanceOf = (token: string) => Effect.map(walletOf(token), (wallet) => wallet.balance)

export interface LedgerLine {
  readonly seq: number
  readonly amount: number
  readonly kind: string
  readonly app: string | null
  readonly event: string | null
  readonly metadata: Record<string, string> | null
  readonly description: string | null
  readonly balance_after: number
  readonly created_at: string
}

/** Every entry of the user's ledger, newest first, read page by page through `GET /api/wallet/ledger`. */
export const fullLedger = (token: string, limit = 200) =>
  Effect.gen(function*() {
    const lines: Array<LedgerLine> = []
    let before: number | null = null
    for (let page = 0; page < 10_000; page++) {
      const path: string = `/api/wallet/ledger?limit=${limit}${before === null ? "" : `&before=${before}`}`
      const reply: Reply = yield* request("GET", path, { token })
      assert.strictEqual(reply.status, 200, reply.text)
      lines.push(...reply.body.data)
      if (!reply.body.has_more) {
        assert.strictEqual(reply.body.next_before, null)
        return lines
      }
      before = reply.body.next_before
    }
    throw new Error("the ledger never ended")
  })

/**
 * The promise of the ledger, checked through the API: its entries sum to the balance, each entry's `balance_after`
 * is the running sum, no `balance_after` is negative, and the newest entry's `balance_after` is the balance.
 */
export const assertLedgerAddsUp = (token: string) =>
  Effect.gen(function*() {
    const lines = yield* fullLedger(token)
    const balance = yield* balanceOf(token)
    const oldestFirst = [...lines].reverse()
    let running = 0
    oldestFirst.forEach((line, i) => {
      assert.strictEqual(line.seq, i + 1, "entries are numbered 1, 2, 3... without gaps")
      running += micros(line.amount)
      assert.strictEqual(micros(line.balance_after), running, `balance_after of entry ${line.seq}`)
      assert.isAtLeast(line.balance_after, 0)
    })
    assert.strictEqual(running, micros(balance), "the ledger sums to the balance")
    return { lines, balance }
  })

/** `sha256=<hex>` of the raw body under `secret`, as a payment provider signs its callback. */
export const signature = (raw: string, secret: string) =>
  `sha256=${Crypto.createHmac("sha256", secret).update(raw).digest("hex")}`

/** An API key of `user`. */
export const apiKeyOf = (user: User) => Effect.map(createApiKey(user.token), (created) => created.key)

/** A key no test used before. */
export const freshKey = (prefix = "k") => `${prefix}-${Crypto.randomUUID()}`

/** Runs `n` effects at once (each one real fetch), results in order. */
export const concurrently = <A, E, R>(n: number, f: (i: number) => Effect.Effect<A, E, R>) =>
  Effect.all(Array.from({ length: n }, (_, i) => f(i)), { concurrency: "unbounded" })

/** Seconds from `ms` to the next 00:00 UTC. */
export const secondsToMidnight = (ms: number) => (Math.floor(ms / 86_400_000) + 1) * 86_400 - ms / 1000
