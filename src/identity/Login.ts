import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import { Clock, Duration, Effect, Option, Schema } from "effect"
import * as Crypto from "node:crypto"
import { AppConfig } from "../platform/Config.js"
import { RateLimited } from "../platform/Errors.js"
import { KeyValue } from "../platform/KeyValue.js"
import { ChallengeRequired, LoginChallenge } from "./Challenge.js"
import { IdentityRepo } from "./Repo.js"
import { SmsDeliveryFailed, SmsSender, SmsSenderLive } from "./Sms.js"
import { JwtKey, Tokens, type LoginIdentity } from "./Tokens.js"

export class InvalidCode extends Schema.TaggedError<InvalidCode>()(
  "InvalidCode",
  { message: Schema.String },
  HttpApiSchema.annotations({ status: 401 })
) {}

export class SmsNotDelivered extends Schema.TaggedError<SmsNotDelivered>()(
  "SmsNotDelivered",
  { message: Schema.String },
  HttpApiSchema.annotations({ status: 502 })
) {}

const DAY_MS = 86_400_000
const HOUR_MS = 3_600_000

/**
 * SMS login (spec 4.7, 5.2, 8). A code is 6 digits, valid `SMS_CODE_TTL`, single use, stored only as an HMAC,
 * replaced by a resend; `SMS_MAX_ATTEMPTS` wrong tries lock a client out of it. Sending is limited by a per-phone
 * cooldown, a daily cap per phone and client, a per-IP hourly cap and, past a threshold, a proof-of-work challenge. Everything here lives in the key-value store: it may expire.
 */
export class Login extends Effect.Service<Login>()("atrium/identity/Login", {
  effect: Effect.gen(function*() {
    const config = yield* AppConfig
    const { key } = yield* JwtKey
    const kv = yield* KeyValue
    const sender = yield* SmsSender
    const challenges = yield* LoginChallenge
    const repo = yield* IdentityRepo
    const tokens = yield* Tokens
    const { sms } = config

    const codeKey = (phone: string) => `sms:code:${phone}`
    const cooldownKey = (phone: string) => `sms:cooldown:${phone}`
    const codeHash = (phone: string, code: string) =>
      Crypto.createHmac("sha256", key).update(`sms-code:${phone}:${code}`).digest("hex")
    const count = (key: string) =>
      Effect.map(kv.get(key), Option.match({ onNone: () => 0, onSome: (value) => Number(value) || 0 }))

    const rateLimited = (message: string, retryAfterMs: number) =>
      new RateLimited({ message, retry_after: Math.max(1, Math.ceil(retryAfterMs / 1000)) })

    const coolingDown = (phone: string) =>
      Effect.flatMap(kv.ttl(cooldownKey(phone)), (left) =>
        rateLimited(
          "A code was sent to this phone moments ago; wait before asking again.",
          Option.getOrElse(left, () => Duration.toMillis(sms.cooldown))
        ))

    /**
     * The abuse model (docs/identity.md): a request that is refused changes nothing it did not have to (no cooldown,
     * no code replaced); the daily cap counts codes per phone *and* client address, so a stranger using up a phone's
     * allowance does not lock its owner out; past `SMS_CHALLENGE_AFTER` codes for the phone today or from the
     * client this hour, each further code costs a solved proof-of-work challenge.
     */
    const sendCode = Effect.fn("Login.sendCode")(function*(phone: string, clientIp: string, challenge?: string) {
      const now = yield* Clock.currentTimeMillis
      const fixedCode = sms.testOtp.get(phone)
      if (Option.isSome(yield* kv.get(cooldownKey(phone)))) return yield* coolingDown(phone)
      const hour = Math.floor(now / HOUR_MS)
      const day = Math.floor(now / DAY_MS)
      const ipKey = `sms:ip:${clientIp}:${hour}`
      const phoneKey = `sms:daily:${phone}:${day}`
      const pairKey = `sms:daily:${phone}:${clientIp}:${day}`
      if (fixedCode === undefined) {
        const needed = (yield* count(phoneKey)) >= sms.challengeAfter || (yield* count(ipKey)) >= sms.challengeAfter
        if (needed && !(challenge !== undefined && (yield* challenges.redeem(challenge)))) {
          return yield* new ChallengeRequired({
            message: challenge === undefined
              ? "Solve the challenge from GET /api/auth/challenge and send it as `challenge`."
              : "The challenge solution is invalid, expired or already used: solve a new one."
          })
        }
      }
      if (!(yield* kv.setIfAbsent(cooldownKey(phone), "1", sms.cooldown))) return yield* coolingDown(phone)
      if (fixedCode === undefined) {
        // The caller's own cap first: a caller over it must not use up the day's codes of a phone it names.
        const fromIp = yield* kv.increment(ipKey, Duration.millis(HOUR_MS))
        if (fromIp > sms.hourlyLimitPerIp) {
          yield* kv.delete(cooldownKey(phone))
          return yield* rateLimited("Too many codes requested from this address.", (hour + 1) * HOUR_MS - now)
        }
        const sentToPair = yield* kv.increment(pairKey, Duration.millis(DAY_MS))
        if (sentToPair > sms.dailyLimitPerPhone) {
          yield* kv.delete(cooldownKey(phone))
          return yield* rateLimited(
            "Too many codes for this phone from this address today.",
            (day + 1) * DAY_MS - now
          )
        }
        yield* kv.increment(phoneKey, Duration.millis(DAY_MS))
        const code = Crypto.randomInt(0, 1_000_000).toString().padStart(6, "0")
        yield* kv.set(codeKey(phone), codeHash(phone, code), sms.codeTtl)
        const minutes = Math.round(Duration.toMinutes(sms.codeTtl))
        yield* sender.send(phone, `Your Atrium login code is ${code}. It expires in ${minutes} minutes.`).pipe(
          Effect.tapError(() => kv.delete(codeKey(phone), cooldownKey(phone))),
          Effect.mapError((e: SmsDeliveryFailed) => new SmsNotDelivered({ message: e.message }))
        )
      }
      return {
        sent: true as const,
        expires_in: Math.round(Duration.toSeconds(sms.codeTtl)),
        retry_after: Math.round(Duration.toSeconds(sms.cooldown))
      }
    })

    const invalid = (message: string) => new InvalidCode({ message })

    /**
     * True when `code` is the phone's pending code; uses it up. Wrong guesses are counted per code, per client
     * (`SMS_MAX_ATTEMPTS` locks that client out of this code) and for all clients together
     * (`SMS_MAX_ATTEMPTS_TOTAL` voids the code): one client's guesses cannot void the code another client holds.
     * Counted before comparing so guesses cannot race.
     */
    const consumeCode = Effect.fn("Login.consumeCode")(function*(phone: string, code: string, clientIp: string) {
      const fixedCode = sms.testOtp.get(phone)
      if (fixedCode !== undefined) {
        if (code !== fixedCode) return yield* invalid("The code does not match.")
        return
      }
      const stored = yield* kv.get(codeKey(phone))
      if (Option.isNone(stored)) return yield* invalid("No valid code for this phone: it expired, was used, or was never sent.")
      // The stored hash names this code: a new code starts fresh counters without deleting the old ones.
      const generation = stored.value.slice(0, 16)
      const fromClient = yield* kv.increment(`sms:attempts:${phone}:${generation}:${clientIp}`, sms.codeTtl)
      const fromAll = yield* kv.increment(`sms:attempts:${phone}:${generation}`, sms.codeTtl)
      if (fromAll > sms.maxAttemptsTotal) {
        yield* kv.delete(codeKey(phone))
        return yield* invalid("Too many wrong attempts: request a new code.")
      }
      if (fromClient > sms.maxAttempts) return yield* invalid("Too many wrong attempts: request a new code.")
      const expected = Buffer.from(stored.value, "hex")
      const actual = Buffer.from(codeHash(phone, code), "hex")
      if (expected.length !== actual.length || !Crypto.timingSafeEqual(expected, actual)) {
        if (fromAll >= sms.maxAttemptsTotal) yield* kv.delete(codeKey(phone))
        return yield* invalid("The code does not match.")
      }
      // Two requests with the right code: only the one that takes it logs in.
      const taken = yield* kv.take(codeKey(phone))
      if (Option.isNone(taken) || taken.value !== stored.value) return yield* invalid("The code was already used.")
    })

    const login = Effect.fn("Login.login")(function*(phone: string, code: string, clientIp: string) {
      yield* consumeCode(phone, code, clientIp)
      const user = yield* repo.upsertByPhone(phone)
      const token = yield* tokens.issue({ userId: user.id, phone: user.phone })
      return { token, newUser: user.created, userId: user.id }
    })

    const refresh = Effect.fn("Login.refresh")(function*(identity: LoginIdentity) {
      return yield* tokens.issue(identity)
    })

    return { sendCode, login, refresh } as const
  }),
  dependencies: [AppConfig.Default, JwtKey.Default, IdentityRepo.Default, Tokens.Default, SmsSenderLive, LoginChallenge.Default]
}) {}
