import { Clock, Data, Duration, Effect, Option, Schema } from "effect"
import * as Jose from "jose"
import * as Crypto from "node:crypto"
import { AppId, randomBase62, UserId } from "../../platform/Ids.js"
import { KeyValue } from "../../platform/KeyValue.js"
import { BearerCache } from "../BearerCache.js"
import { JwtKey, sha256, verifyHs256 } from "../Tokens.js"
import { type AppRow, OAuthRepo } from "./Repo.js"
import { type AppCallerIdentity as AppCaller, type ClientId, TokenFamilyId } from "../Domain.js"

/** Scopes an app may ask for (spec 5.1 rule 5: sessions and environments reuse `agents:write`). */
export const SCOPES = ["events", "agents:write"] as const
export type Scope = (typeof SCOPES)[number]

/** An RFC 6749 error: `{"error": code, "error_description": ...}` with its status. */
export class OAuthError extends Data.TaggedError("OAuthError")<{
  readonly error: string
  readonly description: string
  readonly status: number
}> {}

const invalidGrant = (description: string) => new OAuthError({ error: "invalid_grant", description, status: 400 })
const invalidRequest = (description: string) => new OAuthError({ error: "invalid_request", description, status: 400 })

const ACCESS_TTL_SECONDS = 15 * 60
const REFRESH_TTL_MS = 60 * 86_400_000
const CODE_TTL = "10 minutes"

/** The claims of an app's access token; `typ` keeps it apart from login tokens, which have exactly four claims. */
const AccessClaims = Schema.Struct({
  typ: Schema.Literal("oauth_access"),
  sub: UserId.unchecked,
  app: AppId,
  scope: Schema.String,
  iat: Schema.Number,
  exp: Schema.Number
})
const decodeAccessClaims = Schema.decodeUnknownOption(AccessClaims)

/** At most this many verified access tokens are kept (the least recently used go first). */
const ACCESS_TOKENS_CACHED = 10_000

interface PendingCode {
  readonly appId: string
  readonly userId: UserId
  readonly redirectUri: string
  readonly scope: string
  readonly codeChallenge: string
}

/**
 * OAuth 2.0 for third-party apps: authorization code with PKCE S256 (RFC 6749, RFC 7636). Codes live 10 minutes in
 * the key-value store and are taken once; access tokens are 15-minute JWTs; refresh tokens rotate on every use and
 * are stored hashed, and presenting a rotated one revokes its whole family (RFC 6819 5.2.2.3).
 */
export class OAuth extends Effect.Service<OAuth>()("atrium/identity/OAuth", {
  effect: Effect.gen(function*() {
    const apps = yield* OAuthRepo
    const kv = yield* KeyValue
    const { key } = yield* JwtKey

    const parseScope = (raw: string | undefined): Effect.Effect<string, OAuthError> => {
      const requested = (raw ?? "events").split(" ").filter((s) => s.length > 0)
      const unknown = requested.filter((s) => !(SCOPES as ReadonlyArray<string>).includes(s))
      if (requested.length === 0 || unknown.length > 0) {
        return Effect.fail(new OAuthError({
          error: "invalid_scope",
          description: `Unknown scope ${unknown.join(" ")}; use any of: ${SCOPES.join(" ")}.`,
          status: 400
        }))
      }
      return Effect.succeed([...new Set(requested)].join(" "))
    }

    /** The app behind `client_id` when `redirect_uri` is one it registered, exactly. */
    const clientFor = Effect.fn("OAuth.clientFor")(function*(clientId: ClientId, redirectUri: string) {
      const app = yield* apps.findAppByClientId(clientId)
      if (Option.isNone(app)) return yield* invalidRequest("Unknown client_id.")
      if (!app.value.redirectUris.includes(redirectUri)) {
        return yield* invalidRequest("redirect_uri is not registered for this app.")
      }
      return app.value
    })

    const issueCode = Effect.fn("OAuth.issueCode")(function*(pending: PendingCode) {
      const code = randomBase62(43)
      yield* kv.set(`oauth:code:${sha256(code)}`, JSON.stringify(pending), CODE_TTL)
      return code
    })

    /** client_secret_basic or client_secret_post; constant-time on the secret's hash. */
    const authenticateClient = Effect.fn("OAuth.authenticateClient")(function*(clientId: ClientId, secret: string) {
      const app = yield* apps.findAppByClientId(clientId)
      const expected = Buffer.from(Option.match(app, { onNone: () => "0".repeat(64), onSome: (a) => a.clientSecretHash }))
      const actual = Buffer.from(sha256(secret))
      if (Option.isNone(app) || !Crypto.timingSafeEqual(expected, actual)) {
        return yield* new OAuthError({ error: "invalid_client", description: "Client authentication failed.", status: 401 })
      }
      return app.value
    })

    const accessToken = (app: AppRow, userId: UserId, scope: string, now: number) =>
      Effect.promise(() =>
        new Jose.SignJWT({ typ: "oauth_access", app: app.id, scope })
          .setProtectedHeader({ alg: "HS256", typ: "JWT" })
          .setSubject(userId)
          .setIssuedAt(now)
          .setExpirationTime(now + ACCESS_TTL_SECONDS)
          .sign(key)
      )

    const tokens = (app: AppRow, userId: UserId, scope: string, familyId: TokenFamilyId) =>
      Effect.gen(function*() {
        const nowMs = yield* Clock.currentTimeMillis
        const refreshToken = `rt_${randomBase62(48)}`
        yield* apps.insertRefreshToken({
          tokenHash: sha256(refreshToken),
          familyId,
          appId: app.id,
          userId,
          scope,
          expiresAt: new Date(nowMs + REFRESH_TTL_MS)
        })
        return {
          access_token: yield* accessToken(app, userId, scope, Math.floor(nowMs / 1000)),
          token_type: "Bearer" as const,
          expires_in: ACCESS_TTL_SECONDS,
          refresh_token: refreshToken,
          scope
        }
      })

    const exchangeCode = Effect.fn("OAuth.exchangeCode")(function*(
      app: AppRow,
      params: { readonly code: string; readonly redirectUri: string; readonly codeVerifier: string }
    ) {
      const codeHash = sha256(params.code)
      const taken = yield* kv.take(`oauth:code:${codeHash}`)
      if (Option.isNone(taken)) {
        // RFC 6749 4.1.2: a code presented twice was likely stolen; what its first exchange issued is revoked.
        const issued = yield* kv.take(`oauth:used:${codeHash}`)
        if (Option.isSome(issued)) {
          const now = new Date(yield* Clock.currentTimeMillis)
          yield* apps.revokeFamily(TokenFamilyId.make(issued.value), now)
        }
        return yield* invalidGrant("The code is invalid, expired or already used.")
      }
      const pending = JSON.parse(taken.value) as PendingCode
      if (pending.appId !== app.id) return yield* invalidGrant("The code was issued to another client.")
      if (pending.redirectUri !== params.redirectUri) return yield* invalidGrant("redirect_uri does not match the authorization request.")
      const challenge = Crypto.createHash("sha256").update(params.codeVerifier).digest("base64url")
      if (!/^[A-Za-z0-9._~-]{43,128}$/.test(params.codeVerifier) || challenge !== pending.codeChallenge) {
        return yield* invalidGrant("PKCE verification failed.")
      }
      const familyId = TokenFamilyId.random()
      // Kept as long as the refresh tokens live: a replay within that time still finds what to revoke.
      yield* kv.set(`oauth:used:${codeHash}`, familyId, Duration.millis(REFRESH_TTL_MS))
      yield* apps.insertFamily(familyId, app.id, pending.userId)
      return yield* tokens(app, pending.userId, pending.scope, familyId)
    })

    const refresh = Effect.fn("OAuth.refresh")(function*(app: AppRow, refreshToken: string) {
      const now = new Date(yield* Clock.currentTimeMillis)
      const hash = sha256(refreshToken)
      // Rotate atomically: of two requests with one token, only one finds it unrotated. Only the client the token
      // was issued to may rotate it: another client's attempt must not use up (and so later revoke) its grant.
      const rotated = yield* apps.rotate(hash, app.id, now)
      if (Option.isNone(rotated)) {
        // Unknown, another client's, or this client's presented again after rotation: the last means it leaked,
        // so the whole family goes.
        yield* apps.revokeFamilyOf(hash, app.id, now)
        return yield* invalidGrant("The refresh token is invalid, not this client's, or was already used (its grant is then revoked).")
      }
      const row = rotated.value
      if (row.revoked) return yield* invalidGrant("This grant was revoked.")
      if (row.expiresAt.getTime() <= now.getTime()) return yield* invalidGrant("The refresh token expired.")
      return yield* tokens(app, row.userId, row.scope, row.familyId)
    })

    /**
     * Access tokens verified in this process, each kept until it expires (issue 45 item 3): nothing revokes an
     * issued access token before then (docs/billing.md, "OAuth apps"), so a cached one is exactly as valid as a token
     * verified again. Only verified tokens are kept, so no caller can fill it with garbage.
     */
    const verified = new BearerCache<AppCaller>(ACCESS_TOKENS_CACHED)
    /** The user, app and scopes of a valid access token; none for anything else (a login JWT included). */
    const verifyAccessToken = (token: string) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const known = verified.get(token, now)
        if (known !== undefined) return Option.some(known)
        const claims = Option.flatMap(verifyHs256(token, key, Math.floor(now / 1000)), decodeAccessClaims)
        if (Option.isNone(claims)) return Option.none<AppCaller>()
        const caller: AppCaller = { userId: claims.value.sub, appId: claims.value.app, scopes: claims.value.scope.split(" ") }
        verified.set(token, caller, claims.value.exp * 1000)
        return Option.some(caller)
      })
    /** The caller of an access token verified lately in this process; none without verifying (`verifyAccessToken`). */
    const knownAccessToken = (token: string) =>
      Effect.map(Clock.currentTimeMillis, (now) => Option.fromNullable(verified.get(token, now)))

    return { parseScope, clientFor, issueCode, authenticateClient, exchangeCode, refresh, verifyAccessToken, knownAccessToken } as const
  }),
  dependencies: [OAuthRepo.Default, JwtKey.Default]
}) {}
