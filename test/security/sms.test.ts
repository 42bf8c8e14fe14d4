import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { freshPhone, request, solvedChallenge } from "../support/Client.js"
import { TestServer } from "../support/TestServer.js"
import { assertError, freshIp, LIVE, login, loginOk, pastCooldown, sendCode, wrongCode } from "../identity/login-support.js"

// `pastCooldown` below: a send answered past the server's 1 ms resend cooldown (SMS_COOLDOWN), on its wall clock.

/**
 * Issue 15 item 3, replayed: a stranger must not lock a phone out of login or flood it. Wrong guesses count per
 * phone and client, the daily cap per phone and client, a refused request starts no cooldown, and past
 * `SMS_CHALLENGE_AFTER` codes a proof-of-work challenge (altcha) is required.
 */

const messagesTo = (phone: string) => Effect.map(TestServer, (server) => server.inbox.messages.filter((m) => m.to === phone))
const codeFor = (phone: string) => Effect.flatMap(TestServer, (server) => server.inbox.codeFor(phone))
const url = Effect.map(TestServer, (server) => server.url)

const sendWith = (phone: string, ip: string, challenge: string) =>
  request("POST", "/api/auth/sms/sendCode", { body: { phone, challenge }, headers: { "x-forwarded-for": ip } })
const loginFrom = (phone: string, code: string, ip: string) =>
  request("POST", "/api/auth/login", { body: { phone, code }, headers: { "x-forwarded-for": ip } })

describe("security: SMS login abuse", () => {
  layer(TestServer.layer({ TRUST_PROXY: "true", SMS_COOLDOWN: "1 millis", SMS_DAILY_LIMIT: "3", SMS_CHALLENGE_AFTER: "2" }), LIVE)(
    (it) => {
      it.effect("wrong guesses from one client do not void the code its owner holds", () =>
        Effect.gen(function*() {
          const phone = freshPhone()
          assert.strictEqual((yield* sendCode(phone)).status, 200)
          const code = yield* codeFor(phone)
          const attacker = freshIp()
          for (let i = 0; i < 10; i++) assertError(yield* loginFrom(phone, wrongCode(code), attacker), 401, "invalid_code")
          // The attacker is locked out of this code, even with the right digits...
          assertError(yield* loginFrom(phone, code, attacker), 401, "invalid_code")
          // ...its owner is not. The phone is under attack now, so the owner solves the challenge first (issue 26 item 6).
          assertError(yield* login(phone, code), 403, "challenge_required")
          const owner = yield* request("POST", "/api/auth/login", { body: { phone, code, challenge: yield* solvedChallenge(yield* url) } })
          assert.strictEqual(owner.status, 200, owner.text)
        }))

      it.effect("the daily cap counts per phone and client: a stranger using it up does not lock the owner out", () =>
        Effect.gen(function*() {
          const base = yield* url
          const victim = freshPhone()
          const attacker = freshIp()
          for (let i = 0; i < 2; i++) {
            assert.strictEqual((yield* pastCooldown(sendCode(victim, attacker))).status, 200)
          }
          // Past SMS_CHALLENGE_AFTER codes for the phone, the next one costs a solved challenge, from anyone.
          assertError(yield* pastCooldown(sendCode(victim, attacker)), 403, "challenge_required")
          assert.strictEqual((yield* sendWith(victim, attacker, yield* solvedChallenge(base))).status, 200)
          assertError(yield* pastCooldown(sendWith(victim, attacker, yield* solvedChallenge(base))), 429, "rate_limited")
          assert.strictEqual((yield* messagesTo(victim)).length, 3)
          // The owner, from their own address, still gets a code and logs in.
          const owner = freshIp()
          const reply = yield* pastCooldown(sendWith(victim, owner, yield* solvedChallenge(base)))
          assert.strictEqual(reply.status, 200, reply.text)
          assert.strictEqual((yield* login(victim, yield* codeFor(victim))).status, 200)
        }))
    }
  )

  layer(TestServer.layer({ TRUST_PROXY: "true", SMS_IP_HOURLY_LIMIT: "4" }), LIVE)((it) => {
    it.effect("GET /api/auth/challenge is an altcha challenge: algorithm, challenge, maxnumber, salt, signature", () =>
      Effect.gen(function*() {
        const reply = yield* request("GET", "/api/auth/challenge")
        assert.strictEqual(reply.status, 200, reply.text)
        assert.deepStrictEqual(Object.keys(reply.body).sort(), ["algorithm", "challenge", "maxnumber", "salt", "signature"])
        assert.strictEqual(reply.body.algorithm, "SHA-256")
        assert.match(reply.body.salt, /expires=\d+/)
      }))

    it.effect("past SMS_CHALLENGE_AFTER codes from a client, sendCode needs a solution; refusals change nothing", () =>
      Effect.gen(function*() {
        const base = yield* url
        const ip = freshIp()
        for (let i = 0; i < 3; i++) assert.strictEqual((yield* sendCode(freshPhone(), ip)).status, 200)
        const phone = freshPhone()
        assertError(yield* sendCode(phone, ip), 403, "challenge_required")
        assertError(yield* sendWith(phone, ip, "not-a-solution"), 403, "challenge_required")
        const solved = yield* solvedChallenge(base)
        const tampered = JSON.parse(Buffer.from(solved, "base64").toString())
        tampered.number = tampered.number + 1
        assertError(yield* sendWith(phone, ip, Buffer.from(JSON.stringify(tampered)).toString("base64")), 403, "challenge_required")
        assert.strictEqual((yield* messagesTo(phone)).length, 0)
        // No cooldown was started and no counter moved: the solved request goes through at once (60 s cooldown).
        const reply = yield* sendWith(phone, ip, solved)
        assert.strictEqual(reply.status, 200, reply.text)
        assert.strictEqual((yield* messagesTo(phone)).length, 1)
        // A solution is good once.
        assertError(yield* sendWith(freshPhone(), ip, solved), 403, "challenge_required")
      }))
  })

  // The caps alone (the challenge out of the way): what a refusal must not start.
  layer(TestServer.layer({ TRUST_PROXY: "true", SMS_IP_HOURLY_LIMIT: "3", SMS_CHALLENGE_AFTER: "1000" }), LIVE)((it) => {
    it.effect("a request refused by the client's hourly cap starts no cooldown for the phone it named", () =>
      Effect.gen(function*() {
        const ip = freshIp()
        for (let i = 0; i < 3; i++) assert.strictEqual((yield* sendCode(freshPhone(), ip)).status, 200)
        const victim = freshPhone()
        assertError(yield* sendCode(victim, ip), 429, "rate_limited")
        // Before the fix the refused request had started the victim's 60 s cooldown.
        const reply = yield* sendCode(victim, freshIp())
        assert.strictEqual(reply.status, 200, reply.text)
      }))
  })

  layer(TestServer.layer({ TRUST_PROXY: "true", SMS_COOLDOWN: "1 millis", SMS_DAILY_LIMIT: "2", SMS_CHALLENGE_AFTER: "1000" }), LIVE)(
    (it) => {
      it.effect("one address using up a phone's daily codes does not lock its owner out", () =>
        Effect.gen(function*() {
          const victim = freshPhone()
          const attacker = freshIp()
          for (let i = 0; i < 2; i++) {
            assert.strictEqual((yield* pastCooldown(sendCode(victim, attacker))).status, 200)
          }
          assertError(yield* pastCooldown(sendCode(victim, attacker)), 429, "rate_limited")
          const reply = yield* pastCooldown(sendCode(victim, freshIp()))
          assert.strictEqual(reply.status, 200, reply.text)
          yield* loginOk(victim, yield* codeFor(victim))
        }))
    }
  )
})
