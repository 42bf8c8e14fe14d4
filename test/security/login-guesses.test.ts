import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { sourceOf } from "../../src/identity/Login.js"
import { freshPhone, request, solvedChallenge } from "../support/Client.js"
import { TestServer } from "../support/TestServer.js"
import { assertError, freshIp, LIVE, sendCode, statusWith, wrongCode } from "../identity/login-support.js"

/**
 * Issue 26 item 6, replayed: 11 addresses x 5 wrong guesses made the owner's right code fail (the total voided it).
 * Wrong guesses count per phone and source; a phone under attack asks for the challenge instead of voiding the
 * code, and the owner's right code still works.
 */

const url = Effect.map(TestServer, (server) => server.url)
const codeFor = (phone: string) => Effect.flatMap(TestServer, (server) => server.inbox.codeFor(phone))

const loginFrom = (phone: string, code: string, ip: string, challenge?: string) =>
  request("POST", "/api/auth/login", {
    body: { phone, code, ...(challenge === undefined ? {} : { challenge }) },
    headers: { "x-forwarded-for": ip }
  })

/** A login as a client that solves the challenge when asked. */
const loginSolving = (phone: string, code: string, ip: string) =>
  Effect.gen(function*() {
    const first = yield* loginFrom(phone, code, ip)
    if (first.status !== 403) return { reply: first, solved: false }
    assertError(first, 403, "challenge_required")
    return { reply: yield* loginFrom(phone, code, ip, yield* solvedChallenge(yield* url)), solved: true }
  })

describe("security: guessing a login code", () => {
  layer(TestServer.layer({ TRUST_PROXY: "true" }), LIVE)((it) => {
    it.effect("11 sources x 5 wrong guesses: the phone asks for the challenge, and the owner's right code still works", () =>
      Effect.gen(function*() {
        const phone = freshPhone()
        const owner = freshIp()
        assert.strictEqual((yield* sendCode(phone, owner)).status, 200)
        const code = yield* codeFor(phone)
        const attackers = Array.from({ length: 11 }, () => freshIp()).filter((ip) => ip !== owner)
        let challenged = 0
        for (const ip of attackers) {
          for (let i = 0; i < 5; i++) {
            const { reply, solved } = yield* loginSolving(phone, wrongCode(code), ip)
            assertError(reply, 401, "invalid_code")
            if (solved) challenged++
          }
          // That source used its tries: even the right code fails from it.
          assertError(yield* loginFrom(phone, code, ip, yield* solvedChallenge(yield* url)), 401, "invalid_code")
        }
        // The first source's guesses came before the attack was visible; every later one cost a solved challenge.
        assert.strictEqual(challenged, (attackers.length - 1) * 5)
        // Past SMS_MAX_ATTEMPTS_TOTAL, a new source cannot try the code even with the right digits and a solution...
        assertError((yield* loginSolving(phone, code, freshIp())).reply, 401, "invalid_code")
        // ...while the owner (the source that asked for the code) is asked for the challenge, and then logs in.
        assertError(yield* loginFrom(phone, code, owner), 403, "challenge_required")
        const reply = yield* loginFrom(phone, code, owner, yield* solvedChallenge(yield* url))
        assert.strictEqual(reply.status, 200, reply.text)
        assert.strictEqual(yield* statusWith(reply.body.token), 200)
      }))

    it.effect("the addresses of one IPv6 /64 are one source", () =>
      Effect.gen(function*() {
        assert.strictEqual(sourceOf("2001:db8:1:2::a"), sourceOf("2001:db8:1:2:ffff:1:2:3"))
        assert.notStrictEqual(sourceOf("2001:db8:1:2::a"), sourceOf("2001:db8:1:3::a"))
        assert.strictEqual(sourceOf("1:2::3:4:5:6:7"), "1:2:0:3::/64")
        assert.strictEqual(sourceOf("10.1.2.3"), "10.1.2.3")
        const phone = freshPhone()
        assert.strictEqual((yield* sendCode(phone, freshIp())).status, 200)
        const code = yield* codeFor(phone)
        for (let i = 0; i < 5; i++) {
          assertError((yield* loginSolving(phone, wrongCode(code), `2001:db8:77:1::${i + 1}`)).reply, 401, "invalid_code")
        }
        assertError((yield* loginSolving(phone, code, "2001:db8:77:1:abcd::9")).reply, 401, "invalid_code")
      }))
  })
})
