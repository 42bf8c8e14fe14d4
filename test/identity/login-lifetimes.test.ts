import { assert, describe, it, layer } from "@effect/vitest"
import { Effect } from "effect"
import { freshPhone, request, requestAt } from "../support/Client.js"
import { pollUntil, realWait } from "../support/Poll.js"
import {
  makeSmsInbox,
  makeMigratedStorage,
  startServer,
  TEST_CODE,
  TEST_PHONE,
  TestServer
} from "../support/TestServer.js"
import {
  assertError,
  claimsOf,
  LIVE,
  login,
  loginOk,
  sendCode,
  statusWith
} from "./login-support.js"

/**
 * What changes with time and restarts (spec 5.2, 8): code and token expiry, the Secure cookie behind https, and the
 * session store's fallback to JWT verification.
 */

describe("short lifetimes behind https", () => {
  layer(
    TestServer.layer({ SMS_CODE_TTL: "1 second", JWT_TTL: "2 seconds", PUBLIC_URL: "https://example.com" }),
    LIVE
  )((it) => {
    it.effect("a code expires after SMS_CODE_TTL: then it is 401 invalid_code", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const phone = freshPhone()
        const sent = yield* sendCode(phone)
        assert.strictEqual(sent.status, 200, sent.text)
        assert.strictEqual(sent.body.expires_in, 1)
        const code = yield* server.inbox.codeFor(phone)
        // Real wait: the code's 1 s lifetime runs on the server's wall clock.
        yield* realWait(1_500)
        assertError(yield* login(phone, code), 401, "invalid_code")
      }))

    it.effect("a token is refused once its exp has passed, though its session was cached and in use", () =>
      Effect.gen(function*() {
        const token = yield* loginOk(TEST_PHONE, TEST_CODE)
        const { exp } = claimsOf(token)
        assert.strictEqual(yield* statusWith(token), 200)
        // Polled: using it keeps renewing the session, and the JWT's expiry (wall-clock time, checked by the server)
        // must still end it; without that check it would be answered 200 for as long as it is used.
        yield* pollUntil(statusWith(token), (status) => status !== 200, `the token refused after its exp (${exp})`, { every: 100, within: 10_000 })
        assertError(yield* request("POST", "/api/user/apiKey/list", { token }), 401, "unauthorized")
        assertError(yield* request("POST", "/api/user/apiKey/list", { token }), 401, "unauthorized")
      }))

    it.effect("the token cookie is Secure when PUBLIC_URL is https", () =>
      Effect.gen(function*() {
        const reply = yield* login(TEST_PHONE, TEST_CODE)
        assert.strictEqual(reply.status, 200, reply.text)
        const cookie = reply.headers.getSetCookie()[0] ?? ""
        const attributes = cookie.split(";").map((part) => part.trim().toLowerCase())
        assert.include(attributes, "secure")
        assert.include(attributes, "httponly")
        assert.include(attributes, "samesite=lax")
        assert.include(attributes, "max-age=2")
      }))
  })
})

describe("session store fallback", () => {
  it.scopedLive("after the store is emptied, the current token verifies as a JWT; an older one stays refused", () =>
    Effect.gen(function*() {
      const storage = yield* makeMigratedStorage
      const inbox = yield* makeSmsInbox
      // Each run gets a key prefix of its own: with Redis the second server starts on an empty store, exactly
      // like the in-memory store of a restarted process.
      const prefix = storage.env.KEY_PREFIX ?? "atrium:"
      const list = (url: string, token: string) => requestAt(url, "POST", "/api/user/apiKey/list", { token })

      const { current, older } = yield* Effect.scoped(
        Effect.gen(function*() {
          const first = yield* startServer(storage, inbox, { KEY_PREFIX: `${prefix}first:` })
          const loginAt = (url: string) =>
            Effect.map(requestAt(url, "POST", "/api/auth/login", { body: { phone: TEST_PHONE, code: TEST_CODE } }), (r) => {
              assert.strictEqual(r.status, 200, r.text)
              return r.body.token as string
            })
          const older = yield* loginAt(first.url)
          const current = yield* loginAt(first.url)
          assert.strictEqual((yield* list(first.url, older)).status, 401)
          assert.strictEqual((yield* list(first.url, current)).status, 200)
          return { current, older }
        })
      )

      const second = yield* startServer(storage, inbox, { KEY_PREFIX: `${prefix}second:` })
      const accepted = yield* list(second.url, current)
      assert.strictEqual(accepted.status, 200, accepted.text)
      assertError(yield* list(second.url, older), 401, "unauthorized")
      // Cached now, and still the one valid token.
      assert.strictEqual((yield* list(second.url, current)).status, 200)
      assertError(yield* list(second.url, older), 401, "unauthorized")
      // Single device still holds on the restarted server: a new login retires the token that was re-cached.
      const newer = yield* requestAt(second.url, "POST", "/api/auth/login", { body: { phone: TEST_PHONE, code: TEST_CODE } })
      assert.strictEqual(newer.status, 200, newer.text)
      assertError(yield* list(second.url, current), 401, "unauthorized")
      assert.strictEqual((yield* list(second.url, newer.body.token)).status, 200)
    }))
})
