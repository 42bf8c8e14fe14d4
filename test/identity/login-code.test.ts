import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { freshPhone } from "../support/Client.js"
import { TestServer } from "../support/TestServer.js"
import {
  assertError,
  fixedNumbers,
  freshIp,
  LIVE,
  login,
  loginOk,
  otpSetting,
  pastCooldown,
  sendCode,
  wrongCode
} from "./login-support.js"

/** SMS codes (spec 4.7, 5.2, 8; issue 2 item 6): sending, limits, and the life of a code. */

const assertRetryAfter = (headers: Headers, max: number) => {
  const raw = headers.get("retry-after")
  assert.isNotNull(raw, "429 without Retry-After")
  assert.match(raw!, /^\d+$/, "Retry-After must be whole seconds")
  assert.isAtLeast(Number(raw), 1)
  assert.isAtMost(Number(raw), max)
}

const messagesTo = (phone: string) => Effect.map(TestServer, (server) => server.inbox.messages.filter((m) => m.to === phone))

const codeFor = (phone: string) => Effect.flatMap(TestServer, (server) => server.inbox.codeFor(phone))

const fixed = fixedNumbers(3)

describe("SMS codes, default limits", () => {
  // TRUST_PROXY lets each test send from an address of its own, so the per-IP cap never couples tests.
  layer(TestServer.layer({ TRUST_PROXY: "true", SMS_TEST_OTP: otpSetting(fixed) }), LIVE)((it) => {
    it.effect("sendCode refuses a phone that is not E.164 with 400 invalid_request naming the field", () =>
      Effect.gen(function*() {
        for (const phone of ["13800000000", "+0123456789", "+123", "+1234567890123456", "+86 1380000000", "phone", 8613800000000]) {
          const reply = yield* sendCode(phone)
          assertError(reply, 400, "invalid_request")
          assert.include(reply.body.error.message, "phone")
        }
        assertError(yield* sendCode(undefined), 400, "invalid_request")
      }))

    it.effect("login refuses a malformed phone or a missing code with 400 invalid_request naming the field", () =>
      Effect.gen(function*() {
        const badPhone = yield* login("13800000000", "123456")
        assertError(badPhone, 400, "invalid_request")
        assert.include(badPhone.body.error.message, "phone")
        const noCode = yield* login(freshPhone(), undefined)
        assertError(noCode, 400, "invalid_request")
        assert.include(noCode.body.error.message, "code")
      }))

    it.effect("sendCode answers exactly {sent, expires_in: 300, retry_after: 60} and texts a 6-digit code", () =>
      Effect.gen(function*() {
        const phone = freshPhone()
        const reply = yield* sendCode(phone)
        assert.strictEqual(reply.status, 200, reply.text)
        assert.deepStrictEqual(reply.body, { sent: true, expires_in: 300, retry_after: 60 })
        const messages = yield* messagesTo(phone)
        assert.strictEqual(messages.length, 1)
        // Exactly one run of digits, six long: the code, and nothing a reader could mistake for it.
        assert.deepStrictEqual(messages[0]!.text.match(/\d+/g)?.filter((run) => run.length >= 6).map((run) => run.length), [6])
        assert.strictEqual((yield* loginOk(phone, yield* codeFor(phone))).split(".").length, 3)
      }))

    it.effect("the http provider authenticates to the gateway with Bearer SMS_HTTP_TOKEN", () =>
      Effect.gen(function*() {
        const phone = freshPhone()
        assert.strictEqual((yield* sendCode(phone)).status, 200)
        const [message] = yield* messagesTo(phone)
        assert.strictEqual(message?.authorization, "Bearer sms-gateway-token")
      }))

    it.effect("a second sendCode within the cooldown is 429 rate_limited with Retry-After, and sends nothing", () =>
      Effect.gen(function*() {
        const phone = freshPhone()
        assert.strictEqual((yield* sendCode(phone)).status, 200)
        const code = yield* codeFor(phone)
        // The cooldown belongs to the phone: another address does not get around it.
        for (const ip of [freshIp(), freshIp()]) {
          const again = yield* sendCode(phone, ip)
          assertError(again, 429, "rate_limited")
          assertRetryAfter(again.headers, 60)
        }
        assert.strictEqual((yield* messagesTo(phone)).length, 1)
        // The refused resend left the first code in place.
        yield* loginOk(phone, code)
      }))

    it.effect("a code logs in once: the same code again is 401 invalid_code", () =>
      Effect.gen(function*() {
        const phone = freshPhone()
        yield* sendCode(phone)
        const code = yield* codeFor(phone)
        yield* loginOk(phone, code)
        assertError(yield* login(phone, code), 401, "invalid_code")
      }))

    it.effect("a wrong code is 401 invalid_code, and a code does not log in another phone", () =>
      Effect.gen(function*() {
        const phone = freshPhone()
        const other = freshPhone()
        yield* sendCode(phone)
        const code = yield* codeFor(phone)
        assertError(yield* login(phone, wrongCode(code)), 401, "invalid_code")
        assertError(yield* login(other, code), 401, "invalid_code")
        assertError(yield* login(freshPhone(), "123456"), 401, "invalid_code")
        yield* loginOk(phone, code)
      }))

    it.effect("after 5 wrong attempts from one address, that address is locked out of the code: the right code fails from it", () =>
      Effect.gen(function*() {
        const phone = freshPhone()
        yield* sendCode(phone)
        const code = yield* codeFor(phone)
        for (let i = 0; i < 5; i++) assertError(yield* login(phone, wrongCode(code)), 401, "invalid_code")
        assertError(yield* login(phone, code), 401, "invalid_code")
      }))

    it.effect("four wrong attempts leave the code usable", () =>
      Effect.gen(function*() {
        const phone = freshPhone()
        yield* sendCode(phone)
        const code = yield* codeFor(phone)
        for (let i = 0; i < 4; i++) assertError(yield* login(phone, wrongCode(code)), 401, "invalid_code")
        yield* loginOk(phone, code)
      }))

    it.effect("an SMS_TEST_OTP number takes its fixed code without sendCode, repeatedly, and nothing is sent", () =>
      Effect.gen(function*() {
        const { code, phone } = fixed[0]!
        for (let i = 0; i < 3; i++) yield* loginOk(phone, code)
        assertError(yield* login(phone, wrongCode(code)), 401, "invalid_code")
        // Wrong guesses do not lock a test number either.
        for (let i = 0; i < 5; i++) yield* login(phone, wrongCode(code))
        yield* loginOk(phone, code)
        assert.strictEqual((yield* messagesTo(phone)).length, 0)
      }))

    it.effect("an SMS_TEST_OTP number's sendCode sends nothing, keeps the cooldown, and the fixed code still works", () =>
      Effect.gen(function*() {
        const { code, phone } = fixed[1]!
        const sent = yield* sendCode(phone)
        assert.strictEqual(sent.status, 200, sent.text)
        assert.deepStrictEqual(sent.body, { sent: true, expires_in: 300, retry_after: 60 })
        const again = yield* sendCode(phone)
        assertError(again, 429, "rate_limited")
        assertRetryAfter(again.headers, 60)
        yield* loginOk(phone, code)
        yield* loginOk(phone, code)
        assertError(yield* login(phone, wrongCode(code)), 401, "invalid_code")
        assert.strictEqual((yield* messagesTo(phone)).length, 0)
      }))

    it.effect("a failed delivery is 502 sms_not_delivered and releases the cooldown", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const phone = freshPhone()
        const ip = freshIp()
        server.inbox.setStatus(500)
        const failed = yield* sendCode(phone, ip).pipe(Effect.ensuring(Effect.sync(() => server.inbox.setStatus(200))))
        assertError(failed, 502, "sms_not_delivered")
        // The gateway is back: the retry is not held back by a cooldown for an SMS that never left.
        const retry = yield* sendCode(phone, ip)
        assert.strictEqual(retry.status, 200, retry.text)
        assert.strictEqual((yield* messagesTo(phone)).length, 1)
        yield* loginOk(phone, yield* codeFor(phone))
      }))
  })
})

describe("SMS codes, short cooldown and small caps", () => {
  layer(
    TestServer.layer({
      TRUST_PROXY: "true",
      SMS_COOLDOWN: "1 millis",
      SMS_DAILY_LIMIT: "3",
      SMS_IP_HOURLY_LIMIT: "3",
      // These cases are about the caps; the challenge that comes first past its threshold is test/security's.
      SMS_CHALLENGE_AFTER: "1000"
    }),
    LIVE
  )((it) => {
    it.effect("a resend replaces the earlier code: the old one is 401, the new one logs in", () =>
      Effect.gen(function*() {
        const phone = freshPhone()
        assert.strictEqual((yield* sendCode(phone)).status, 200)
        const first = yield* codeFor(phone)
        let second = first
        // One resend in a million repeats the code; only a different code shows the old one is gone.
        while (second === first) {
          assert.strictEqual((yield* pastCooldown(sendCode(phone))).status, 200)
          second = yield* codeFor(phone)
        }
        assertError(yield* login(phone, first), 401, "invalid_code")
        yield* loginOk(phone, second)
      }))

    // Issue 15 item 3 changed this on purpose: the daily cap counts per phone and client address, so one address
    // using up a phone's codes does not lock its owner out (test/security/sms.test.ts).
    it.effect("the daily cap per phone and address answers 429 rate_limited; other phones still get codes", () =>
      Effect.gen(function*() {
        const phone = freshPhone()
        const ip = freshIp()
        for (let i = 0; i < 3; i++) {
          const reply = yield* pastCooldown(sendCode(phone, ip))
          assert.strictEqual(reply.status, 200, reply.text)
        }
        const capped = yield* pastCooldown(sendCode(phone, ip))
        assertError(capped, 429, "rate_limited")
        assertRetryAfter(capped.headers, 86_400)
        assert.strictEqual((yield* messagesTo(phone)).length, 3)
        assert.strictEqual((yield* sendCode(freshPhone(), freshIp())).status, 200)
      }))

    it.effect("the per-IP hourly cap answers 429 rate_limited; other addresses still get codes", () =>
      Effect.gen(function*() {
        const ip = freshIp()
        for (let i = 0; i < 3; i++) {
          const reply = yield* sendCode(freshPhone(), ip)
          assert.strictEqual(reply.status, 200, reply.text)
        }
        const phone = freshPhone()
        const capped = yield* sendCode(phone, ip)
        assertError(capped, 429, "rate_limited")
        assertRetryAfter(capped.headers, 3_600)
        assert.strictEqual((yield* messagesTo(phone)).length, 0)
        assert.strictEqual((yield* pastCooldown(sendCode(phone, freshIp()))).status, 200)
      }))

    it.effect("requests refused by the per-IP cap do not use up the phone's daily allowance", () =>
      Effect.gen(function*() {
        const ip = freshIp()
        for (let i = 0; i < 3; i++) assert.strictEqual((yield* sendCode(freshPhone(), ip)).status, 200)
        // A caller over its own cap keeps asking for someone else's phone...
        const victim = freshPhone()
        for (let i = 0; i < 4; i++) {
          assertError(yield* pastCooldown(sendCode(victim, ip)), 429, "rate_limited")
        }
        // ...and the phone's owner still gets every code of the day.
        for (let i = 0; i < 3; i++) {
          const reply = yield* pastCooldown(sendCode(victim, freshIp()))
          assert.strictEqual(reply.status, 200, reply.text)
        }
      }))
  })
})
