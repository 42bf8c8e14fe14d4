import { HttpApiSchema } from "@effect/platform"
import { Clock, Duration, Effect, Option, Schema } from "effect"
import * as Crypto from "node:crypto"
import { AppConfig } from "../platform/Config.js"
import { RateLimited } from "../platform/Errors.js"
import { KeyValue } from "../platform/KeyValue.js"
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
 * replaced by a resend and void after `SMS_MAX_ATTEMPTS` wrong tries. Sending is limited by a per-phone cooldown,
 * a per-phone daily cap and a per-IP hourly cap. Everything here lives in the key-value store: it may expire.
 */
export class Login extends Effect.Service<Login>()("atrium/identity/Login", {
  effect: Effect.gen(function*() {
    const config = yield* AppConfig
    const { key } = yield* JwtKey
    const kv = yield* KeyValue
    const sender = yield* SmsSender
    const repo = yield* IdentityRepo
    const tokens = yield* Tokens
    const { sms } = config

    const codeKey = (phone: string) => `sms:code:${phone}`
    const attemptsKey = (phone: string) => `sms:attempts:${phone}`
    const cooldownKey = (phone: string) => `sms:cooldown:${phone}`
    const codeHash = (phone: string, code: string) =>
      Crypto.createHmac("sha256", key).update(`sms-code:${phone}:${code}`).digest("hex")

    const rateLimited = (message: string, retryAfterMs: number) =>
      new RateLimited({ message, retry_after: Math.max(1, Math.ceil(retryAfterMs / 1000)) })

    const sendCode = Effect.fn("Login.sendCode")(function*(phone: string, clientIp: string) {
      const now = yield* Clock.currentTimeMillis
      const cooldownFree = yield* kv.setIfAbsent(cooldownKey(phone), "1", sms.cooldown)
      if (!cooldownFree) {
        const left = yield* kv.ttl(cooldownKey(phone))
        return yield* rateLimited(
          "A code was sent to this phone moments ago; wait before asking again.",
          Option.getOrElse(left, () => Duration.toMillis(sms.cooldown))
        )
      }
      const fixedCode = sms.testOtp.get(phone)
      if (fixedCode === undefined) {
        // The caller's own cap first: a caller over it must not use up the day's codes of a phone it names.
        const hour = Math.floor(now / HOUR_MS)
        const fromIp = yield* kv.increment(`sms:ip:${clientIp}:${hour}`, Duration.millis(HOUR_MS))
        if (fromIp > sms.hourlyLimitPerIp) {
          return yield* rateLimited("Too many codes requested from this address.", (hour + 1) * HOUR_MS - now)
        }
        const day = Math.floor(now / DAY_MS)
        const sentToday = yield* kv.increment(`sms:daily:${phone}:${day}`, Duration.millis(DAY_MS))
        if (sentToday > sms.dailyLimitPerPhone) {
          return yield* rateLimited("Too many codes for this phone today.", (day + 1) * DAY_MS - now)
        }
        const code = Crypto.randomInt(0, 1_000_000).toString().padStart(6, "0")
        yield* kv.set(codeKey(phone), codeHash(phone, code), sms.codeTtl)
        yield* kv.delete(attemptsKey(phone))
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

    /** True when `code` is the phone's pending code; uses it up. Counts the attempt first so guesses cannot race. */
    const consumeCode = Effect.fn("Login.consumeCode")(function*(phone: string, code: string) {
      const fixedCode = sms.testOtp.get(phone)
      if (fixedCode !== undefined) {
        if (code !== fixedCode) return yield* invalid("The code does not match.")
        return
      }
      const attempts = yield* kv.increment(attemptsKey(phone), sms.codeTtl)
      const stored = yield* kv.get(codeKey(phone))
      if (Option.isNone(stored)) return yield* invalid("No valid code for this phone: it expired, was used, or was never sent.")
      if (attempts > sms.maxAttempts) {
        yield* kv.delete(codeKey(phone))
        return yield* invalid("Too many wrong attempts: request a new code.")
      }
      const expected = Buffer.from(stored.value, "hex")
      const actual = Buffer.from(codeHash(phone, code), "hex")
      if (expected.length !== actual.length || !Crypto.timingSafeEqual(expected, actual)) {
        if (attempts >= sms.maxAttempts) yield* kv.delete(codeKey(phone))
        return yield* invalid("The code does not match.")
      }
      // Two requests with the right code: only the one that takes it logs in.
      const taken = yield* kv.take(codeKey(phone))
      if (Option.isNone(taken)) return yield* invalid("The code was already used.")
      yield* kv.delete(attemptsKey(phone))
    })

    const login = Effect.fn("Login.login")(function*(phone: string, code: string) {
      yield* consumeCode(phone, code)
      const user = yield* repo.upsertByPhone(phone)
      const token = yield* tokens.issue({ userId: user.id, phone: user.phone })
      return { token, newUser: user.created, userId: user.id }
    })

    const refresh = Effect.fn("Login.refresh")(function*(identity: LoginIdentity) {
      return yield* tokens.issue(identity)
    })

    return { sendCode, login, refresh } as const
  }),
  dependencies: [AppConfig.Default, JwtKey.Default, IdentityRepo.Default, Tokens.Default, SmsSenderLive]
}) {}
