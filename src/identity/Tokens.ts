import { Clock, Duration, Effect, Option, Redacted, Schema } from "effect"
import * as Jose from "jose"
import * as Crypto from "node:crypto"
import { AppConfig } from "../platform/Config.js"
import { randomBase62 } from "../platform/Ids.js"
import { UserId } from "../platform/Ids.js"
import { Unauthorized } from "../platform/Errors.js"
import { KeyValue } from "../platform/KeyValue.js"
import { IdentityRepo, PlatformSecretsRepo } from "./Repo.js"
import type { LoginIdentity } from "./Domain.js"
import { BearerCache } from "./BearerCache.js"

/**
 * How long this process trusts a login token it verified (issue 45 item 3), at most until the token expires: a login
 * through this process drops its user's earlier tokens here at once; one through another process (single device)
 * stops the earlier token here within this. The session store is renewed on use at most this often.
 */
export const LOGIN_CACHE_MS = 2_000

export const sha256 = (text: string) => Crypto.createHash("sha256").update(text).digest("hex")

/** The claims of spec 2.1, exactly: no more (an altered or padded token fails), no fewer. */
const LoginClaims = Schema.Struct({
  userId: UserId,
  phone: Schema.String,
  iat: Schema.Int,
  exp: Schema.Int
})
const decodeClaims = Schema.decodeUnknownOption(LoginClaims, { onExcessProperty: "error" })

/** A session-store entry: the identity, and the token's `exp`, which no renewal may outlive. */
const Session = Schema.parseJson(Schema.Struct({ userId: UserId, phone: Schema.String, exp: Schema.Int }))
const decodeSession = Schema.decodeUnknownOption(Session)
const encodeSession = Schema.encodeSync(Session)

/**
 * The HS256 key: `JWT_SECRET`, or one generated on first start and kept in the database (so it lives in
 * `DATA_DIR` in embedded mode and is shared by every process of a cluster).
 */
export class JwtKey extends Effect.Service<JwtKey>()("atrium/identity/JwtKey", {
  effect: Effect.gen(function*() {
    const config = yield* AppConfig
    const secrets = yield* PlatformSecretsRepo
    const secret = yield* Option.match(config.jwtSecret, {
      onSome: (secret) => Effect.succeed(Redacted.value(secret)),
      onNone: () => secrets.keep("jwt_secret", randomBase62(64))
    })
    return { key: new TextEncoder().encode(secret) }
  }),
  dependencies: [AppConfig.Default, PlatformSecretsRepo.Default]
}) {}

const HS256_HEADER_KEYS = new Set(["alg", "typ", "kid"])

/**
 * The payload of a compact HS256 JWT signed with `key` that has not expired at `nowSeconds` (and is not used before
 * its `nbf`), or none. Synchronous on purpose: every `/v1/events` call verifies one, and jose's promise-based
 * `jwtVerify` (a WebCrypto HMAC per token) cost more than the wallet's whole share of a charge. The checks are
 * jose's: the header names HS256 and nothing it does not understand, the signature is exactly the canonical
 * base64url of the HMAC (compared in constant time), the payload is a JSON object with numeric times.
 */
export const verifyHs256 = (token: string, key: Uint8Array, nowSeconds: number): Option.Option<Record<string, unknown>> => {
  const parts = token.split(".")
  if (parts.length !== 3 || !parts.every((part) => /^[A-Za-z0-9_-]+$/.test(part))) return Option.none()
  const [head, body, signature] = parts as [string, string, string]
  const expected = Crypto.createHmac("sha256", key).update(`${head}.${body}`).digest("base64url")
  if (expected.length !== signature.length || !Crypto.timingSafeEqual(Buffer.from(expected), Buffer.from(signature))) {
    return Option.none()
  }
  const header = parseJsonObject(head)
  if (header === undefined || header.alg !== "HS256" || !Object.keys(header).every((k) => HS256_HEADER_KEYS.has(k))) {
    return Option.none()
  }
  const payload = parseJsonObject(body)
  if (payload === undefined) return Option.none()
  for (const claim of ["exp", "nbf", "iat"] as const) {
    if (claim in payload && (typeof payload[claim] !== "number" || !Number.isFinite(payload[claim]))) return Option.none()
  }
  if (typeof payload.exp === "number" && payload.exp <= nowSeconds) return Option.none()
  if (typeof payload.nbf === "number" && payload.nbf > nowSeconds) return Option.none()
  return Option.some(payload)
}

/** The `exp` claim a token says, not verified: only to renew its session-store entry in the read (`authenticate`). */
const unverifiedExp = (token: string): number | undefined => {
  const body = token.split(".")[1]
  const exp = body === undefined ? undefined : parseJsonObject(body)?.exp
  return typeof exp === "number" && Number.isFinite(exp) ? exp : undefined
}

const parseJsonObject = (segment: string): Record<string, unknown> | undefined => {
  try {
    const value: unknown = JSON.parse(Buffer.from(segment, "base64url").toString("utf8"))
    return typeof value === "object" && value !== null && !Array.isArray(value) ? value as Record<string, unknown> : undefined
  } catch {
    return undefined
  }
}

/**
 * Login tokens (spec 2.1, 5.2): a JWT per login, one valid token per user (single device), and a session store
 * in the key-value store that lives 24 h and is renewed on each use. A token missing from the store is verified as
 * a JWT and must still be the user's current token before it is cached again.
 */
export class Tokens extends Effect.Service<Tokens>()("atrium/identity/Tokens", {
  effect: Effect.gen(function*() {
    const config = yield* AppConfig
    const { key } = yield* JwtKey
    const repo = yield* IdentityRepo
    const kv = yield* KeyValue
    const sessionKey = (tokenHash: string) => `login:${tokenHash}`
    const tokenTtlSeconds = Math.floor(Duration.toSeconds(config.login.tokenTtl))

    /** The session lives `LOGIN_SESSION_TTL` from now, but never past the token's own expiry. */
    const lifetime = (exp: number, now: number) =>
      Duration.min(config.login.sessionTtl, Duration.millis(exp * 1000 - now))

    const cache = Effect.fn("Tokens.cache")(function*(tokenHash: string, identity: LoginIdentity, exp: number) {
      const now = yield* Clock.currentTimeMillis
      if (exp * 1000 <= now) return
      yield* kv.set(
        sessionKey(tokenHash),
        encodeSession({ userId: identity.userId, phone: identity.phone, exp }),
        lifetime(exp, now)
      )
    })

    /** Login tokens verified lately in this process, by the token: a repeated token costs no store round trip. */
    const verified = new BearerCache<LoginIdentity>(10_000)
    /** Logins so far: a verification that a login overtook does not cache what it found. */
    let logins = 0

    const issue = Effect.fn("Tokens.issue")(function*(identity: LoginIdentity) {
      // The user's earlier tokens stop here and now (single device), before the new one exists.
      logins += 1
      verified.deleteWhere((known) => known.userId === identity.userId)
      const now = Math.floor((yield* Clock.currentTimeMillis) / 1000)
      const iat = yield* repo.reserveTokenIat(identity.userId, now)
      const token = yield* Effect.promise(() =>
        new Jose.SignJWT({ userId: identity.userId, phone: identity.phone })
          .setProtectedHeader({ alg: "HS256", typ: "JWT" })
          .setIssuedAt(iat)
          .setExpirationTime(iat + tokenTtlSeconds)
          .sign(key)
      )
      const tokenHash = sha256(token)
      const replaced = yield* repo.setCurrentToken(identity.userId, tokenHash, iat)
      // Only the login that still holds the newest issue time becomes current; a token that lost that race is
      // returned but already stale, exactly as if the other login had come a moment later.
      // And again once it is current: a verification of an earlier token may have finished meanwhile.
      verified.deleteWhere((known) => known.userId === identity.userId)
      if (Option.isSome(replaced)) {
        yield* cache(tokenHash, identity, iat + tokenTtlSeconds)
        const previous = replaced.value.previous
        if (previous !== null && previous !== tokenHash) yield* kv.delete(sessionKey(previous))
      }
      return token
    })

    const verifyJwt = (token: string) =>
      Effect.map(
        Clock.currentTimeMillis,
        (now) => Option.flatMap(verifyHs256(token, key, Math.floor(now / 1000)), decodeClaims)
      )

    const unauthorized = new Unauthorized({ message: "A valid login token is required." })

    /** `verify`, remembered in this process for `LOGIN_CACHE_MS` (never past the token's own expiry). */
    const authenticate = (token: string) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const known = verified.get(token, now)
        if (known !== undefined) return Effect.succeed(known)
        const before = logins
        return Effect.tap(verify(token), (identity) => {
          const exp = unverifiedExp(token)
          if (logins === before && exp !== undefined) verified.set(token, identity, Math.min(exp * 1000, now + LOGIN_CACHE_MS))
        })
      })

    const verify = Effect.fn("Tokens.authenticate")(function*(token: string) {
      if (token.length === 0 || token.length > 4096) return yield* unauthorized
      const tokenHash = sha256(token)
      const now = yield* Clock.currentTimeMillis
      // An entry is keyed by its token's hash and holds that token's `exp`, which the token itself says unverified:
      // so the entry is read and renewed in one round trip (`getAndTouch`) when that `exp` is still ahead, and only
      // read otherwise (an entry whose `exp` has passed is no session and must not be renewed).
      const exp = unverifiedExp(token)
      const stored = exp !== undefined && exp * 1000 > now
        ? yield* kv.getAndTouch(sessionKey(tokenHash), lifetime(exp, now))
        : yield* kv.get(sessionKey(tokenHash))
      const cached = Option.flatMap(stored, decodeSession)
      // Renewal on use must not carry a session past its JWT's expiry: an expired (or unreadable) entry is no
      // session, and the token goes through full verification, where an expired JWT fails.
      if (Option.isSome(cached) && cached.value.exp * 1000 > now) {
        if (cached.value.exp !== exp) yield* kv.touch(sessionKey(tokenHash), lifetime(cached.value.exp, now))
        return { userId: cached.value.userId, phone: cached.value.phone }
      }
      const claims = yield* verifyJwt(token)
      if (Option.isNone(claims)) return yield* unauthorized
      const identity: LoginIdentity = { userId: claims.value.userId, phone: claims.value.phone }
      const isCurrent = Effect.map(
        repo.currentToken(identity.userId),
        Option.exists((current) => current === tokenHash)
      )
      if (!(yield* isCurrent)) return yield* unauthorized
      yield* cache(tokenHash, identity, claims.value.exp)
      // A login may have replaced this token between the check and the cache write: look again, so a stale token
      // never sits in the store for a day.
      if (!(yield* isCurrent)) {
        yield* kv.delete(sessionKey(tokenHash))
        return yield* unauthorized
      }
      return identity
    })

    return { issue, authenticate } as const
  }),
  dependencies: [AppConfig.Default, JwtKey.Default, IdentityRepo.Default]
}) {}
