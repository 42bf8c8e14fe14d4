import { assert } from "@effect/vitest"
import { Effect } from "effect"
import * as Jose from "jose"
import { type Reply, request } from "../support/Client.js"
import { pollUntil } from "../support/Poll.js"
import { JWT_SECRET } from "../support/TestServer.js"

/**
 * Helpers shared by the login test files (test/identity/login-*.test.ts). Everything goes over real HTTP through
 * `request`; nothing here reaches into the server.
 */

/**
 * Options for `layer(TestServer.layer(...), LIVE)` (the exported `layer`: `it.layer` does not type them). Without
 * them @effect/vitest builds the server inside its TestClock, so the server's clock stands at 0: tokens are issued in
 * 1970 and TTLs of the in-memory store never run out. These suites are about issue times and expiry, so the server
 * must see real time.
 */
export const LIVE = { excludeTestServices: true } as const

/** A random client address for `X-Forwarded-For`, so each test has a per-IP counter of its own. */
export const freshIp = () =>
  `10.${Math.floor(Math.random() * 256)}.${Math.floor(Math.random() * 256)}.${1 + Math.floor(Math.random() * 254)}`

/** Numbers for `SMS_TEST_OTP` that no other test (and no `freshPhone()`, which starts `+1555`) uses. */
export const fixedNumbers = (count: number) =>
  Array.from({ length: count }, (_, i) => ({
    phone: `+44794600${Math.floor(Math.random() * 1e4).toString().padStart(4, "0")}${i}`,
    code: (100_000 + Math.floor(Math.random() * 900_000)).toString()
  }))

export const otpSetting = (numbers: ReadonlyArray<{ phone: string; code: string }>) =>
  numbers.map(({ code, phone }) => `${phone}=${code}`).join(",")

/** `POST /api/auth/sms/sendCode`, from `ip` when the server trusts `X-Forwarded-For`. */
export const sendCode = (phone: unknown, ip: string = freshIp()) =>
  request("POST", "/api/auth/sms/sendCode", { body: { phone }, headers: { "x-forwarded-for": ip } })

export const login = (phone: unknown, code: unknown) => request("POST", "/api/auth/login", { body: { phone, code } })

/** Logs in and returns the token, failing the test when the login is refused. */
export const loginOk = (phone: string, code: string) =>
  Effect.map(login(phone, code), (reply) => {
    assert.strictEqual(reply.status, 200, reply.text)
    return reply.body.token as string
  })

/** The status an authenticated route gives this token (listing API keys changes nothing). */
export const statusWith = (token: string) =>
  Effect.map(request("POST", "/api/user/apiKey/list", { token }), (reply) => reply.status)

export const statusWithCookie = (token: string) =>
  Effect.map(
    request("POST", "/api/user/apiKey/list", { headers: { cookie: `token=${token}` } }),
    (reply) => reply.status
  )

/** The platform's one error body, `{"error":{"type","message"}}`, and nothing else. */
export const assertError = (reply: Reply, status: number, type: string) => {
  assert.strictEqual(reply.status, status, reply.text)
  assert.deepStrictEqual(Object.keys(reply.body ?? {}), ["error"], reply.text)
  assert.deepStrictEqual(Object.keys(reply.body.error).sort(), ["message", "type"], reply.text)
  assert.strictEqual(reply.body.error.type, type, reply.text)
  assert.isString(reply.body.error.message)
  assert.isAbove(reply.body.error.message.length, 0)
}

/** A different code of six digits. */
export const wrongCode = (code: string) => ((Number(code) + 1) % 1_000_000).toString().padStart(6, "0")

export const secretKey = new TextEncoder().encode(JWT_SECRET)

export const claimsOf = (token: string) =>
  Jose.decodeJwt(token) as { userId: string; phone: string; iat: number; exp: number }

/** A token the test signs itself: the harness's `JWT_SECRET` unless told otherwise. */
export const signWith = (
  claims: Record<string, unknown>,
  key: Uint8Array = secretKey,
  header: Jose.JWTHeaderParameters = { alg: "HS256", typ: "JWT" }
) => Effect.promise(() => new Jose.SignJWT(claims).setProtectedHeader(header).sign(key))

/**
 * `send` answered past the phone's resend cooldown (1 ms where these suites set `SMS_COOLDOWN`, on the server's wall
 * clock): a request the cooldown refuses changes nothing (docs/identity.md, the abuse model), so it is sent again until
 * another answer comes. Polled, not slept: on most tries the cooldown is long over by the time the request arrives.
 */
export const pastCooldown = <R>(send: Effect.Effect<Reply, never, R>) =>
  pollUntil(send, (reply) => !coolingDown(reply), "an answer past the resend cooldown", { every: 5, within: 10_000 })

const coolingDown = (reply: Reply) =>
  reply.status === 429 && String(reply.body?.error?.message ?? "").includes("moments ago")
