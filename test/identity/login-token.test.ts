import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as Jose from "jose"
import { freshPhone, loginWithSms, request } from "../support/Client.js"
import { TestServer } from "../support/TestServer.js"
import {
  assertError,
  claimsOf,
  fixedNumbers,
  LIVE,
  login,
  loginOk,
  otpSetting,
  secretKey,
  signWith,
  statusWith,
  statusWithCookie
} from "./login-support.js"

/** Login tokens (spec 2.1, 5.2; issue 2 item 6): the JWT, single device, where a token is read, refresh, forgeries. */

const SEVEN_DAYS = 7 * 24 * 3600

// One fixed number per test, so single device in one test never logs out another test's user.
const fixed = fixedNumbers(40)
let nextFixed = 0
const takeFixed = () => {
  const next = fixed[nextFixed++]
  if (next === undefined) throw new Error("out of fixed numbers: raise the count above")
  return next
}

/** A user logged in with a fixed number: its phone and current token. */
const freshUser = Effect.suspend(() => {
  const { code, phone } = takeFixed()
  return Effect.map(loginOk(phone, code), (token) => ({ phone, code, token }))
})

const base64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url")

describe("login tokens", () => {
  layer(TestServer.layer({ SMS_TEST_OTP: otpSetting(fixed) }), LIVE)((it) => {
    it.effect("login answers 200 {token, newUser}; newUser is true only on a phone's first login", () =>
      Effect.gen(function*() {
        // Through a real SMS code...
        const first = yield* loginWithSms(freshPhone())
        assert.isTrue(first.newUser)
        // ...and through a fixed code, twice.
        const { code, phone } = takeFixed()
        const once = yield* login(phone, code)
        assert.strictEqual(once.status, 200, once.text)
        assert.deepStrictEqual(Object.keys(once.body).sort(), ["newUser", "token"])
        assert.isString(once.body.token)
        assert.isTrue(once.body.newUser)
        const twice = yield* login(phone, code)
        assert.strictEqual(twice.status, 200, twice.text)
        assert.deepStrictEqual(Object.keys(twice.body).sort(), ["newUser", "token"])
        assert.isFalse(twice.body.newUser)
        assert.strictEqual(claimsOf(twice.body.token).userId, claimsOf(once.body.token).userId)
      }))

    it.effect("login sets cookie token: HttpOnly, SameSite=Lax, Path=/, Max-Age=604800, not Secure over http", () =>
      Effect.gen(function*() {
        const { code, phone } = takeFixed()
        const reply = yield* login(phone, code)
        assert.strictEqual(reply.status, 200, reply.text)
        const cookies = reply.headers.getSetCookie()
        assert.strictEqual(cookies.length, 1, cookies.join("\n"))
        const [pair, ...attributes] = cookies[0]!.split(";").map((part) => part.trim())
        assert.strictEqual(pair, `token=${reply.body.token}`)
        const lower = attributes.map((a) => a.toLowerCase())
        assert.include(lower, "httponly")
        assert.include(lower, "samesite=lax")
        assert.include(lower, "path=/")
        assert.include(lower, "max-age=604800")
        assert.notInclude(lower, "secure")
      }))

    it.effect("the JWT is HS256 with exactly userId, phone, iat, exp, and exp = iat + 7 days", () =>
      Effect.gen(function*() {
        const { phone, token } = yield* freshUser
        const { payload, protectedHeader } = yield* Effect.promise(() => Jose.jwtVerify(token, secretKey))
        assert.strictEqual(protectedHeader.alg, "HS256")
        assert.deepStrictEqual(Object.keys(payload).sort(), ["exp", "iat", "phone", "userId"])
        assert.strictEqual(payload.phone, phone)
        assert.isString(payload.userId)
        assert.isAbove((payload.userId as string).length, 0)
        assert.isTrue(Number.isInteger(payload.iat) && Number.isInteger(payload.exp))
        assert.strictEqual(payload.exp! - payload.iat!, SEVEN_DAYS)
        // Issued now, not at some other clock's idea of now (a generous window: this is no timing test).
        assert.isBelow(Math.abs(payload.iat! - Date.now() / 1000), 600)
      }))

    it.effect("a token is accepted from Authorization: Bearer and from cookie token; without one, 401", () =>
      Effect.gen(function*() {
        const { token } = yield* freshUser
        assert.strictEqual(yield* statusWith(token), 200)
        assert.strictEqual(yield* statusWithCookie(token), 200)
        // Among other cookies too (this refresh retires the token, so it comes last; with the cookie it is a POST).
        const refreshed = yield* request("POST", "/api/token/refresh", { headers: { cookie: `other=1; token=${token}` } })
        assert.strictEqual(refreshed.status, 200, refreshed.text)
        assertError(yield* request("POST", "/api/user/apiKey/list"), 401, "unauthorized")
        assertError(yield* request("POST", "/api/user/apiKey/list", { token: "" }), 401, "unauthorized")
        assertError(yield* request("POST", "/api/user/apiKey/list", { headers: { cookie: "token=" } }), 401, "unauthorized")
      }))

    it.effect("single device: a second login makes the first token 401 everywhere", () =>
      Effect.gen(function*() {
        const { code, phone, token: first } = yield* freshUser
        assert.strictEqual(yield* statusWith(first), 200)
        const second = yield* loginOk(phone, code)
        assert.notStrictEqual(second, first)
        assertError(yield* request("POST", "/api/user/apiKey/list", { token: first }), 401, "unauthorized")
        assertError(yield* request("GET", "/api/token/refresh", { token: first }), 401, "unauthorized")
        assert.strictEqual(yield* statusWithCookie(first), 401)
        assert.strictEqual(yield* statusWith(second), 200)
      }))

    it.effect("single device holds for logins in the same second: of concurrent logins exactly one token works", () =>
      Effect.gen(function*() {
        const { code, phone, token: before } = yield* freshUser
        // Six at once: some land in one second and some race each other between reserving and taking the slot.
        const tokens = yield* Effect.all(Array.from({ length: 6 }, () => loginOk(phone, code)), { concurrency: "unbounded" })
        // Two tokens of one user never share an issue time, so they can never be the same token.
        assert.strictEqual(new Set(tokens).size, tokens.length)
        assert.strictEqual(new Set(tokens.map((token) => claimsOf(token).iat)).size, tokens.length)
        const working: Array<string> = []
        for (const token of tokens) if ((yield* statusWith(token)) === 200) working.push(token)
        // The survivor is the one issued last.
        const latest = Math.max(...tokens.map((token) => claimsOf(token).iat))
        assert.deepStrictEqual(working.map((token) => claimsOf(token).iat), [latest])
        assert.strictEqual(yield* statusWith(before), 401)
        // And back to back, which on any machine lands in one second more often than not.
        const c = yield* loginOk(phone, code)
        const d = yield* loginOk(phone, code)
        assert.strictEqual(yield* statusWith(c), 401)
        assert.strictEqual(yield* statusWith(d), 200)
      }))

    it.effect("GET /api/token/refresh answers {token}: the new token works and the old one is refused", () =>
      Effect.gen(function*() {
        const { phone, token: old } = yield* freshUser
        const reply = yield* request("GET", "/api/token/refresh", { token: old })
        assert.strictEqual(reply.status, 200, reply.text)
        assert.deepStrictEqual(Object.keys(reply.body), ["token"])
        const fresh = reply.body.token as string
        assert.notStrictEqual(fresh, old)
        const claims = claimsOf(fresh)
        assert.strictEqual(claims.userId, claimsOf(old).userId)
        assert.strictEqual(claims.phone, phone)
        assert.strictEqual(claims.exp - claims.iat, SEVEN_DAYS)
        assert.strictEqual(yield* statusWith(fresh), 200)
        assertError(yield* request("POST", "/api/user/apiKey/list", { token: old }), 401, "unauthorized")
        assertError(yield* request("GET", "/api/token/refresh", { token: old }), 401, "unauthorized")
        assert.strictEqual(yield* statusWith(fresh), 200)
      }))

    describe("forged tokens are 401 unauthorized", () => {
      /** The genuine token works first, so a 401 for the forgery is the forgery's doing. */
      const forge = (make: (genuine: string) => Effect.Effect<string, never, TestServer>) =>
        Effect.gen(function*() {
          const { token } = yield* freshUser
          assert.strictEqual(yield* statusWith(token), 200)
          const forged = yield* make(token)
          assert.notStrictEqual(forged, token)
          assertError(yield* request("POST", "/api/user/apiKey/list", { token: forged }), 401, "unauthorized")
          assertError(yield* request("GET", "/api/token/refresh", { token: forged }), 401, "unauthorized")
          assert.strictEqual(yield* statusWithCookie(forged), 401)
          // The forgery changed nothing for the real holder.
          assert.strictEqual(yield* statusWith(token), 200)
        })

      it.effect("alg: none", () =>
        forge((genuine) => Effect.succeed(new Jose.UnsecuredJWT(claimsOf(genuine)).encode())))

      it.effect("alg: none with the genuine signature kept", () =>
        forge((genuine) => {
          const [, payload, signature] = genuine.split(".")
          return Effect.succeed(`${base64url({ alg: "none", typ: "JWT" })}.${payload}.${signature}`)
        }))

      it.effect("signed with a wrong key", () =>
        forge((genuine) => signWith(claimsOf(genuine), new TextEncoder().encode("not-the-secret-not-the-secret-not-the"))))

      it.effect("expired (right key, exp in the past)", () =>
        forge((genuine) => {
          const now = Math.floor(Date.now() / 1000)
          return signWith({ ...claimsOf(genuine), iat: now - SEVEN_DAYS - 3600, exp: now - 3600 })
        }))

      it.effect("altered claims with the original signature", () =>
        forge((genuine) => {
          const [header, , signature] = genuine.split(".")
          const claims = { ...claimsOf(genuine), phone: freshPhone() }
          return Effect.succeed(`${header}.${base64url(claims)}.${signature}`)
        }))

      it.effect("another user's id with the original signature", () =>
        forge((genuine) =>
          Effect.gen(function*() {
            const victim = yield* freshUser
            const [header, , signature] = genuine.split(".")
            return `${header}.${base64url({ ...claimsOf(genuine), userId: claimsOf(victim.token).userId })}.${signature}`
          })))

      it.effect("extra claims (right key)", () =>
        forge((genuine) => signWith({ ...claimsOf(genuine), role: "admin" })))

      it.effect("right key, but not the user's current token", () =>
        forge((genuine) => {
          const claims = claimsOf(genuine)
          return signWith({ userId: claims.userId, phone: claims.phone, iat: claims.iat + 1, exp: claims.exp + 1 })
        }))

      it.effect("right key and the very same claims, but not the bytes that were issued", () =>
        forge((genuine) => signWith(claimsOf(genuine), undefined, { alg: "HS256" })))

      it.effect("right key, for a user that does not exist", () =>
        forge((genuine) => signWith({ ...claimsOf(genuine), userId: "usr_doesnotexist000000000" })))

      it.effect("garbage", () => forge(() => Effect.succeed("not.a.jwt")))
    })

    it.effect("without a token, only login, sendCode and health answer under /api", () =>
      Effect.gen(function*() {
        assert.strictEqual((yield* request("GET", "/api/health")).status, 200)
        const { code, phone } = takeFixed()
        assert.strictEqual((yield* login(phone, code)).status, 200)
        const sent = yield* request("POST", "/api/auth/sms/sendCode", { body: { phone: freshPhone() } })
        assert.strictEqual(sent.status, 200, sent.text)
        const guarded: ReadonlyArray<readonly [string, string]> = [
          ["GET", "/api/token/refresh"],
          ["POST", "/api/user/apiKey/create"],
          ["POST", "/api/user/apiKey/list"],
          ["POST", "/api/user/apiKey/delete"],
          ["GET", "/api/whatever"],
          ["POST", "/api/whatever"],
          ["GET", "/api/whatever?x=1"],
          ["GET", "/api/auth/other"],
          ["POST", "/api/auth/login/extra"],
          ["POST", "/api/auth/sms/sendCodeX"],
          ["GET", "/api/healthz"],
          ["GET", "/api/health/extra"],
          ["GET", "/api/user/profile"]
        ]
        for (const [method, path] of guarded) {
          const reply = yield* request(method, path)
          assertError(reply, 401, "unauthorized")
          const invalid = yield* request(method, path, { token: "invalid" })
          assertError(invalid, 401, "unauthorized")
        }
      }))

    it.effect("/api/market/* and /api/payment/notify/* need no token", () =>
      Effect.gen(function*() {
        const market = yield* request("GET", "/api/market/agents")
        assert.strictEqual(market.status, 200, market.text)
        assert.deepStrictEqual(Object.keys(market.body).sort(), ["data", "page", "pageSize", "total"])
        // An unknown market route is a plain 404 to anyone, not a demand for a login.
        assertError(yield* request("GET", "/api/market/nothing-here"), 404, "not_found")
        // The payment callback is reached without a login: what refuses this unsigned call is its signature check.
        const notify = yield* request("POST", "/api/payment/notify/alipay", { body: { order_id: "ord_x", status: "paid" } })
        assertError(notify, 401, "unauthorized")
        assert.match(notify.body.error.message, /signature/)
      }))

    it.effect("an unknown /api route with a valid token is 404 not_found", () =>
      Effect.gen(function*() {
        const { code, phone, token } = yield* freshUser
        assertError(yield* request("GET", "/api/whatever", { token }), 404, "not_found")
        assertError(yield* request("POST", "/api/user/nothing", { headers: { cookie: `token=${token}` } }), 404, "not_found")
        // A previous device's token is no valid token: it learns nothing about which routes exist.
        yield* loginOk(phone, code)
        assertError(yield* request("GET", "/api/whatever", { token }), 401, "unauthorized")
      }))
  })
})
