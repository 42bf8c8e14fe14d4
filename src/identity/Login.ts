import { RateLimiter } from "@effect/experimental"
import { Duration, Effect, Either, Option } from "effect"
import * as Crypto from "node:crypto"
import { AppConfig } from "../platform/Config.js"
import { RateLimited } from "../platform/Errors.js"
import { KeyValue } from "../platform/KeyValue.js"
import { LoginChallenge } from "./Challenge.js"
import { IdentityRepo } from "./Repo.js"
import { SmsDeliveryFailed, SmsSender, SmsSenderLive } from "./Sms.js"
import { JwtKey, Tokens } from "./Tokens.js"
import { InvalidCode, SmsNotDelivered, ChallengeRequired, type LoginIdentity } from "./Domain.js"

/**
 * The source a client's counters belong to: its IPv4 address, or the /64 of its IPv6 address (one subscriber gets a
 * whole /64, so counting single IPv6 addresses would give one attacker 2^64 allowances).
 */
export const sourceOf = (address: string): string => {
  if (!address.includes(":") || address.includes(".")) return address
  const [head = "", tail] = address.toLowerCase().split("%", 1)[0]!.split("::")
  const front = head === "" ? [] : head.split(":")
  const back = tail === undefined || tail === "" ? [] : tail.split(":")
  const groups = [...front, ...Array<string>(Math.max(0, 8 - front.length - back.length)).fill("0"), ...back]
  return `${groups.slice(0, 4).map((group) => group.replace(/^0+(?=.)/, "")).join(":")}::/64`
}

/**
 * The counters of the login limits, on `@effect/experimental`'s `RateLimiter`, "fixed-window" and failing past the
 * limit: each request taken adds `window / limit` to its counter's lifetime, so at most `limit` fit in one window
 * (the counter is gone once its time is up), and a refused request takes nothing.
 */
const Limits = Effect.gen(function*() {
  const limiter = yield* RateLimiter.RateLimiter
  interface Limit {
    readonly key: string
    readonly limit: number
    readonly window: Duration.DurationInput
  }
  return {
    /** Takes one: right with the count after it, or left with the time until the limit has room again. */
    take: (limit: Limit) =>
      limiter.consume(limit).pipe(
        Effect.map(({ remaining }): Either.Either<number, Duration.Duration> => Either.right(limit.limit - remaining)),
        Effect.catchIf(
          (error): error is RateLimiter.RateLimitExceeded => error.reason === "Exceeded",
          (exceeded) => Effect.succeed(Either.left(exceeded.retryAfter))
        ),
        // A store failure is a defect at this edge, as for the key-value store (a 500 `internal_error`).
        Effect.orDie
      ),
    /** The count so far, taking nothing. */
    used: (limit: Limit) =>
      limiter.consume({ ...limit, tokens: 0 }).pipe(Effect.map(({ remaining }) => limit.limit - remaining), Effect.orDie)
  }
})

const DAY = Duration.days(1)
const HOUR = Duration.hours(1)

/**
 * SMS login (spec 4.7, 5.2, 8). A code is 6 digits, valid `SMS_CODE_TTL`, single use, stored only as an HMAC,
 * replaced by a resend; `SMS_MAX_ATTEMPTS` wrong tries lock a client out of it. Sending is limited by a per-phone
 * cooldown, a daily cap per phone and client, a per-IP hourly cap and, past a threshold, a proof-of-work challenge.
 * Everything here lives in the key-value store and the rate limiter's store: it may expire.
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
    const limits = yield* Limits
    const { sms } = config

    const codeKey = (phone: string) => `sms:code:${phone}`
    const originKey = (phone: string, generation: string) => `sms:origin:${phone}:${generation}`
    const cooldownKey = (phone: string) => `sms:cooldown:${phone}`
    const codeHash = (phone: string, code: string) =>
      Crypto.createHmac("sha256", key).update(`sms-code:${phone}:${code}`).digest("hex")

    const rateLimited = (message: string, retryAfter: Duration.DurationInput) =>
      new RateLimited({ message, retry_after: Math.max(1, Math.ceil(Duration.toMillis(retryAfter) / 1000)) })

    const coolingDown = (phone: string) =>
      Effect.flatMap(kv.ttl(cooldownKey(phone)), (left) =>
        rateLimited(
          "A code was sent to this phone moments ago; wait before asking again.",
          Option.getOrElse(left, () => sms.cooldown)
        ))

    /**
     * The abuse model (docs/identity.md): a request that is refused changes nothing it did not have to (no cooldown,
     * no code replaced); the daily cap counts codes per phone *and* client address, so a stranger using up a phone's
     * allowance does not lock its owner out; past `SMS_CHALLENGE_AFTER` codes for the phone in a day or from the
     * client in an hour, each further code costs a solved proof-of-work challenge.
     */
    const sendCode = Effect.fn("Login.sendCode")(function*(phone: string, address: string, challenge?: string) {
      const clientIp = sourceOf(address)
      const fixedCode = sms.testOtp.get(phone)
      if (Option.isSome(yield* kv.get(cooldownKey(phone)))) return yield* coolingDown(phone)
      const fromIp = { key: `sms:ip:${clientIp}`, limit: sms.hourlyLimitPerIp, window: HOUR }
      // Counted only up to the challenge threshold: past it, the phone needs a challenge until the count expires.
      const toPhone = { key: `sms:daily:${phone}`, limit: sms.challengeAfter, window: DAY }
      const toPair = { key: `sms:daily:${phone}:${clientIp}`, limit: sms.dailyLimitPerPhone, window: DAY }
      if (fixedCode === undefined) {
        const needed = (yield* limits.used(toPhone)) >= sms.challengeAfter ||
          (yield* limits.used(fromIp)) >= sms.challengeAfter
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
        const ipTaken = yield* limits.take(fromIp)
        if (Either.isLeft(ipTaken)) {
          yield* kv.delete(cooldownKey(phone))
          return yield* rateLimited("Too many codes requested from this address.", ipTaken.left)
        }
        const pairTaken = yield* limits.take(toPair)
        if (Either.isLeft(pairTaken)) {
          yield* kv.delete(cooldownKey(phone))
          return yield* rateLimited("Too many codes for this phone from this address today.", pairTaken.left)
        }
        // Refused past the threshold, which changes nothing: the phone already needs the challenge.
        yield* limits.take(toPhone)
        const code = Crypto.randomInt(0, 1_000_000).toString().padStart(6, "0")
        const hash = codeHash(phone, code)
        // Who asked for this code: past the total of wrong guesses, the one source that may still try it.
        yield* kv.set(originKey(phone, hash.slice(0, 16)), clientIp, sms.codeTtl)
        yield* kv.set(codeKey(phone), hash, sms.codeTtl)
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
     * True when `code` is the phone's pending code; uses it up. Guesses never void a code (that was a login denial
     * of service: issue 26 item 6). They are counted per code and source, and per code in total, before comparing,
     * so concurrent guesses cannot slip past a limit:
     * - `SMS_MAX_ATTEMPTS` from one source lock that source out of this code;
     * - once the code drew `SMS_MAX_ATTEMPTS` from all sources together, the phone is under attack: every further
     *   try, from anyone, costs a solved challenge (a refusal for a missing one counts nothing);
     * - past `SMS_MAX_ATTEMPTS_TOTAL` in total, only the source that asked for the code may still try it, which bounds
     *   what any number of sources can guess, and leaves the owner's right code working.
     */
    const consumeCode = Effect.fn("Login.consumeCode")(function*(phone: string, code: string, clientIp: string, challenge?: string) {
      const fixedCode = sms.testOtp.get(phone)
      if (fixedCode !== undefined) {
        if (code !== fixedCode) return yield* invalid("The code does not match.")
        return
      }
      const stored = yield* kv.get(codeKey(phone))
      if (Option.isNone(stored)) return yield* invalid("No valid code for this phone: it expired, was used, or was never sent.")
      // The stored hash names this code: a new code starts fresh counters without deleting the old ones.
      const generation = stored.value.slice(0, 16)
      const source = sourceOf(clientIp)
      // Each try holds its counter for a whole code lifetime, so the counts outlive the code: the caps are per code,
      // whenever its tries come.
      const perCode = (key: string, limit: number) => ({ key, limit, window: Duration.times(sms.codeTtl, limit) })
      const fromAll = perCode(`sms:attempts:${phone}:${generation}`, sms.maxAttemptsTotal)
      const fromSource = perCode(`sms:attempts:${phone}:${generation}:${source}`, sms.maxAttempts)
      const lockedOut = invalid("Too many wrong attempts from this address: request a new code.")
      // A source that used its tries is told so at once: no challenge would help it.
      if ((yield* limits.used(fromSource)) >= sms.maxAttempts) return yield* lockedOut
      if ((yield* limits.used(fromAll)) >= sms.maxAttempts && !(challenge !== undefined && (yield* challenges.redeem(challenge)))) {
        return yield* new ChallengeRequired({
          message: challenge === undefined
            ? "This phone's code drew many wrong guesses: solve the challenge from GET /api/auth/challenge and send it as `challenge`."
            : "The challenge solution is invalid, expired or already used: solve a new one."
        })
      }
      if (Either.isLeft(yield* limits.take(fromSource))) return yield* lockedOut
      if (Either.isLeft(yield* limits.take(fromAll))) {
        const origin = yield* kv.get(originKey(phone, generation))
        if (Option.getOrUndefined(origin) !== source) {
          return yield* invalid("Too many wrong attempts for this code: only the address that asked for it may still use it.")
        }
      }
      const expected = Buffer.from(stored.value, "hex")
      const actual = Buffer.from(codeHash(phone, code), "hex")
      if (expected.length !== actual.length || !Crypto.timingSafeEqual(expected, actual)) {
        return yield* invalid("The code does not match.")
      }
      // Two requests with the right code: only the one that takes it logs in.
      const taken = yield* kv.take(codeKey(phone))
      if (Option.isNone(taken) || taken.value !== stored.value) return yield* invalid("The code was already used.")
    })

    const login = Effect.fn("Login.login")(function*(phone: string, code: string, clientIp: string, challenge?: string) {
      yield* consumeCode(phone, code, clientIp, challenge)
      const user = yield* repo.upsertByPhone(phone)
      const token = yield* tokens.issue({ userId: user.id, phone: user.phone })
      return { token, newUser: user.created, userId: user.id }
    })

    const refresh = Effect.fn("Login.refresh")(function*(identity: LoginIdentity) {
      return yield* tokens.issue(identity)
    })

    return { sendCode, login, refresh } as const
  }),
  dependencies: [
    AppConfig.Default,
    JwtKey.Default,
    IdentityRepo.Default,
    Tokens.Default,
    SmsSenderLive,
    LoginChallenge.Default,
    RateLimiter.layer
  ]
}) {}
