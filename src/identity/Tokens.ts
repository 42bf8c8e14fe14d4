import { SqlClient } from "@effect/sql"
import { Clock, Duration, Effect, Option, Redacted, Schema } from "effect"
import * as Jose from "jose"
import * as Crypto from "node:crypto"
import { AppConfig } from "../platform/Config.js"
import { randomBase62 } from "../platform/Ids.js"
import { UserId } from "../platform/Ids.js"
import { Unauthorized } from "../platform/Errors.js"
import { KeyValue } from "../platform/KeyValue.js"
import { IdentityRepo } from "./Repo.js"

export const sha256 = (text: string) => Crypto.createHash("sha256").update(text).digest("hex")

/** The claims of spec 2.1, exactly: no more (an altered or padded token fails), no fewer. */
const LoginClaims = Schema.Struct({
  userId: UserId,
  phone: Schema.String,
  iat: Schema.Int,
  exp: Schema.Int
})
const decodeClaims = Schema.decodeUnknownOption(LoginClaims, { onExcessProperty: "error" })

export interface LoginIdentity {
  readonly userId: UserId
  readonly phone: string
}

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
    const sql = yield* SqlClient.SqlClient
    const secret = yield* Option.match(config.jwtSecret, {
      onSome: (secret) => Effect.succeed(Redacted.value(secret)),
      onNone: () =>
        Effect.gen(function*() {
          const candidate = randomBase62(64)
          yield* sql`
            INSERT INTO platform_secrets (name, value) VALUES ('jwt_secret', ${candidate})
            ON CONFLICT (name) DO NOTHING`
          const rows = yield* sql<{ value: string }>`SELECT value FROM platform_secrets WHERE name = 'jwt_secret'`
          return rows[0]!.value
        }).pipe(Effect.orDie)
    })
    return { key: new TextEncoder().encode(secret) }
  }),
  dependencies: [AppConfig.Default]
}) {}

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

    const issue = Effect.fn("Tokens.issue")(function*(identity: LoginIdentity) {
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
      if (Option.isSome(replaced)) {
        yield* cache(tokenHash, identity, iat + tokenTtlSeconds)
        const previous = replaced.value.previous
        if (previous !== null && previous !== tokenHash) yield* kv.delete(sessionKey(previous))
      }
      return token
    })

    const verifyJwt = (token: string) =>
      Effect.tryPromise(() => Jose.jwtVerify(token, key, { algorithms: ["HS256"] })).pipe(
        Effect.flatMap(({ payload }) => decodeClaims(payload)),
        Effect.option
      )

    const unauthorized = new Unauthorized({ message: "A valid login token is required." })

    const authenticate = Effect.fn("Tokens.authenticate")(function*(token: string) {
      if (token.length === 0 || token.length > 4096) return yield* unauthorized
      const tokenHash = sha256(token)
      const now = yield* Clock.currentTimeMillis
      const cached = Option.flatMap(yield* kv.get(sessionKey(tokenHash)), decodeSession)
      // Renewal on use must not carry a session past its JWT's expiry: an expired (or unreadable) entry is no
      // session, and the token goes through full verification, where an expired JWT fails.
      if (Option.isSome(cached) && cached.value.exp * 1000 > now) {
        yield* kv.touch(sessionKey(tokenHash), lifetime(cached.value.exp, now))
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
