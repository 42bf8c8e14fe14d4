import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import { Effect, Layer, Option } from "effect"
import { InvalidRequest, Unauthorized } from "../platform/Errors.js"
import { bearerTokenOf, credentialOf as credentialOfRequest, credentialText, isMalformed } from "../platform/http/Bearer.js"
import { routePath } from "../platform/Network.js"
import { noteAccount } from "../platform/telemetry/AccessLog.js"
import type { UserId } from "../platform/Ids.js"
import { API_KEY_PREFIX, ApiKeys } from "./ApiKeys.js"
import { OAuth } from "./oauth/OAuth.js"
import { Tokens } from "./Tokens.js"
import { Caller, UserAuthentication, PlatformAuthentication, AppCaller, AppAuthentication, ApiKeyAuthentication, END_USER_ROUTES, MISSING_END_USER } from "./Domain.js"
import type { AppCallerIdentity } from "./Domain.js"

/** Judged on the path as the router will match it (decoded, `//` collapsed, case folded), not the raw URL. */
const isEndUserRoute = (url: string) => END_USER_ROUTES.test(routePath(url))
const END_USER_ID = /^[A-Za-z0-9._:@-]{1,128}$/

/**
 * Spec 5.1 rule 4 is a rule of the route family, not of one handler: an API key (`Bearer sk_...`) on these paths
 * without `X-End-User-Id` is refused before routing, so every route added there later obeys it too.
 */
export const missingEndUser = (request: HttpServerRequest.HttpServerRequest): boolean => {
  const header = request.headers["x-end-user-id"]
  return (header === undefined || header === "") &&
    isEndUserRoute(request.url) &&
    bearerTokenOf(request)?.startsWith(API_KEY_PREFIX) === true
}

/** The end user an authenticated caller acts for, when it names one. */
const endUserOf = (request: HttpServerRequest.HttpServerRequest) => {
  const raw = request.headers["x-end-user-id"]
  if (raw === undefined || raw === "") return Effect.succeed(Option.none<string>())
  return END_USER_ID.test(raw)
    ? Effect.succeed(Option.some(raw))
    : Effect.fail(
      new InvalidRequest({
        message: "Invalid header X-End-User-Id: use 1-128 characters of A-Z a-z 0-9 . _ : @ -."
      })
    )
}

const noCredentials = new Unauthorized({ message: "Authentication required: send Authorization: Bearer <API key>." })

/**
 * HttpApi's bearer decoder cuts seven characters off any `Authorization` header, whatever its scheme, so the token
 * it hands the middlewares is not used: the header is read again by the platform's one parser (`Bearer.ts`), and
 * only a real `Bearer` counts (otherwise `Token: sk_...` would authenticate while passing unseen by the check of
 * `missingEndUser`, which looks for a Bearer API key).
 */
const wrongScheme = new Unauthorized({ message: "Use the Authorization scheme Bearer: Authorization: Bearer <token>." })

/** The credential of a request: the bearer token, or the `token` cookie when no `Authorization` is sent. */
const credentialOf = (request: HttpServerRequest.HttpServerRequest) => {
  const credential = credentialOfRequest(request)
  if (credential._tag === "Malformed") return Effect.fail(wrongScheme)
  return Effect.succeed({ value: credentialText(credential), fromCookie: credential._tag !== "Bearer" })
}

/**
 * The account a request acts for, by the same credentials the middlewares accept (a login token or the `token`
 * cookie, an API key, an OAuth access token); none when it carries none that is valid. For what must be keyed by
 * account before a route runs (`Idempotency-Key`); the route's own middleware still decides whether it may.
 */
export const accountOf = (request: HttpServerRequest.HttpServerRequest) =>
  Effect.gen(function*() {
    const credential = credentialText(credentialOfRequest(request))
    if (credential.length === 0) return Option.none<string>()
    if (credential.startsWith(API_KEY_PREFIX)) {
      return Option.map(yield* (yield* ApiKeys).authenticate(credential), (key) => key.userId as string)
    }
    const login = yield* Effect.option((yield* Tokens).authenticate(credential))
    if (Option.isSome(login)) return Option.some(login.value.userId as string)
    return Option.map(yield* (yield* OAuth).verifyAccessToken(credential), (app) => app.userId)
  })

export const AuthenticationLive = Layer.effect(
  UserAuthentication,
  Effect.gen(function*() {
    const tokens = yield* Tokens
    return {
      bearer: () =>
        HttpServerRequest.HttpServerRequest.pipe(
          Effect.flatMap(credentialOf),
          Effect.flatMap((credential) => tokens.authenticate(credential.value)),
          Effect.tap((identity) => noteAccount(identity.userId))
        )
    }
  })
).pipe(
  Layer.merge(Layer.effect(
    PlatformAuthentication,
    Effect.gen(function*() {
      const tokens = yield* Tokens
      const apiKeys = yield* ApiKeys
      const oauth = yield* OAuth
      const resolve = Effect.gen(function*() {
        const request = yield* HttpServerRequest.HttpServerRequest
        const { fromCookie, value } = yield* credentialOf(request)
        if (value.length === 0) return yield* noCredentials
        if (value.startsWith(API_KEY_PREFIX)) {
          // The cookie is the login session's; an API key there would also pass unseen by the end-user check.
          if (fromCookie) {
            return yield* new Unauthorized({ message: "Send an API key as Authorization: Bearer, not as a cookie." })
          }
          const key = yield* apiKeys.authenticate(value)
          if (Option.isNone(key)) return yield* new Unauthorized({ message: "Invalid or revoked API key." })
          const endUserId = yield* endUserOf(request)
          // Spec 5.1 rule 4 again, after authentication: the global check in platform/http/Edge.ts refuses it before routing,
          // this keeps the rule true of every route behind this middleware whatever reaches it.
          if (Option.isNone(endUserId) && isEndUserRoute(request.url)) {
            return yield* new InvalidRequest({ message: MISSING_END_USER })
          }
          return Caller.of({ userId: key.value.userId, via: "api_key", apiKeyId: Option.some(key.value.id), endUserId })
        }
        // Spec 5.1 rules 4-5: an OAuth app's access token works on /v1 with the `agents:write` scope, for its
        // user and no one else (no end-user partition, so `X-End-User-Id` is not read).
        const asApp = (app: AppCallerIdentity) =>
          app.scopes.includes("agents:write")
            ? Effect.succeed(Caller.of({ userId: app.userId as UserId, via: "oauth", apiKeyId: Option.none(), endUserId: Option.none() }))
            : Effect.fail(new Unauthorized({ message: "This OAuth access token lacks the agents:write scope." }))
        // An access token this process verified lately is known at once: it skips the login token's lookup, which
        // it would fail (issue 45 item 3).
        const known = fromCookie ? Option.none() : yield* oauth.knownAccessToken(value)
        if (Option.isSome(known)) return yield* asApp(known.value)
        const identity = yield* Effect.either(tokens.authenticate(value))
        if (identity._tag === "Left") {
          const app = fromCookie ? Option.none() : yield* oauth.verifyAccessToken(value)
          if (Option.isNone(app)) return yield* identity.left
          return yield* asApp(app.value)
        }
        const endUserId = yield* endUserOf(request)
        return Caller.of({ userId: identity.right.userId, via: "login", apiKeyId: Option.none(), endUserId })
      })
      return { bearer: () => Effect.tap(resolve, (caller) => noteAccount(caller.userId)) }
    })
  )),
  Layer.merge(Layer.effect(
    ApiKeyAuthentication,
    Effect.gen(function*() {
      const apiKeys = yield* ApiKeys
      return {
        bearer: () =>
          Effect.gen(function*() {
            const request = yield* HttpServerRequest.HttpServerRequest
            if (isMalformed(request)) return yield* wrongScheme
            const key = yield* apiKeys.authenticate(bearerTokenOf(request) ?? "")
            if (Option.isNone(key)) {
              return yield* new Unauthorized({ message: "A valid API key (sk_...) is required for /openapi routes." })
            }
            yield* noteAccount(key.value.userId)
            return Caller.of({
              userId: key.value.userId,
              via: "api_key",
              apiKeyId: Option.some(key.value.id),
              endUserId: Option.none()
            })
          })
      }
    })
  )),
  Layer.merge(Layer.effect(
    AppAuthentication,
    Effect.gen(function*() {
      const oauth = yield* OAuth
      const refused = new Unauthorized({
        message: "An OAuth access token is required (POST /oauth/token); API keys and login tokens are not accepted."
      })
      return {
        bearer: () =>
          Effect.gen(function*() {
            const request = yield* HttpServerRequest.HttpServerRequest
            if (isMalformed(request)) return yield* wrongScheme
            const caller = yield* oauth.verifyAccessToken(bearerTokenOf(request) ?? "")
            if (Option.isNone(caller)) return yield* refused
            yield* noteAccount(caller.value.userId)
            return AppCaller.of(caller.value)
          })
      }
    })
  )),
  Layer.provide([Tokens.Default, ApiKeys.Default, OAuth.Default])
)
