import { HttpApiMiddleware, HttpApiSecurity, HttpServerRequest } from "@effect/platform"
import { Context, Effect, Layer, Option, Redacted, Schema } from "effect"
import { InvalidRequest, Unauthorized } from "../platform/Errors.js"
import type { ApiKeyId, UserId } from "../platform/Ids.js"
import { API_KEY_PREFIX, ApiKeys } from "./ApiKeys.js"
import { Tokens, type LoginIdentity } from "./Tokens.js"

/** The logged-in end user of an `/api` route. */
export class CurrentUser extends Context.Tag("atrium/identity/CurrentUser")<CurrentUser, LoginIdentity>() {}

/**
 * Who calls `/v1` or `/openapi`, and on whose behalf. The account pays and owns; with an API key, the end user
 * (`X-End-User-Id`) partitions sessions, files and memory inside that account (spec 2.7, 5.1).
 */
export interface CallerIdentity {
  readonly userId: UserId
  readonly via: "api_key" | "login"
  readonly apiKeyId: Option.Option<ApiKeyId>
  readonly endUserId: Option.Option<string>
}
export class Caller extends Context.Tag("atrium/identity/Caller")<Caller, CallerIdentity>() {}

const bearer = HttpApiSecurity.bearer
const cookie = HttpApiSecurity.apiKey({ in: "cookie", key: "token" })

export class UserAuthentication extends HttpApiMiddleware.Tag<UserAuthentication>()(
  "atrium/identity/UserAuthentication",
  { failure: Unauthorized, provides: CurrentUser, security: { bearer, cookie } }
) {}

export class PlatformAuthentication extends HttpApiMiddleware.Tag<PlatformAuthentication>()(
  "atrium/identity/PlatformAuthentication",
  { failure: Schema.Union(Unauthorized, InvalidRequest), provides: Caller, security: { bearer, cookie } }
) {}

export class ApiKeyAuthentication extends HttpApiMiddleware.Tag<ApiKeyAuthentication>()(
  "atrium/identity/ApiKeyAuthentication",
  { failure: Unauthorized, provides: Caller, security: { bearer } }
) {}

/** Spec 5.1 rule 4: the routes where an API key must say which end user it acts for. */
const END_USER_ROUTES = /^\/v1\/(chat\/|agents\/run(\/|$|\?)|sessions(\/|$|\?)|files(\/|$|\?))/
const END_USER_ID = /^[A-Za-z0-9._:@-]{1,128}$/

export const MISSING_END_USER =
  "Missing required header: X-End-User-Id. Requests with an API key to this route must send a stable id of " +
  "your end user (1-128 characters of A-Z a-z 0-9 . _ : @ -), so their sessions, files and memory stay apart."

/**
 * Spec 5.1 rule 4 is a rule of the route family, not of one handler: an API key (`Bearer sk_...`) on these paths
 * without `X-End-User-Id` is refused before routing, so every route added there later obeys it too.
 */
export const missingEndUser = (request: HttpServerRequest.HttpServerRequest): boolean => {
  const header = request.headers["x-end-user-id"]
  return (header === undefined || header === "") &&
    END_USER_ROUTES.test(request.url) &&
    /^Bearer\s+sk_/i.test(request.headers["authorization"] ?? "")
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

export const AuthenticationLive = Layer.effect(
  UserAuthentication,
  Effect.gen(function*() {
    const tokens = yield* Tokens
    const login = (token: Redacted.Redacted) => tokens.authenticate(Redacted.value(token))
    return { bearer: login, cookie: login }
  })
).pipe(
  Layer.merge(Layer.effect(
    PlatformAuthentication,
    Effect.gen(function*() {
      const tokens = yield* Tokens
      const apiKeys = yield* ApiKeys
      const resolve = (token: Redacted.Redacted) =>
        Effect.gen(function*() {
          const request = yield* HttpServerRequest.HttpServerRequest
          const value = Redacted.value(token)
          if (value.length === 0) return yield* noCredentials
          if (value.startsWith(API_KEY_PREFIX)) {
            const key = yield* apiKeys.authenticate(value)
            if (Option.isNone(key)) return yield* new Unauthorized({ message: "Invalid or revoked API key." })
            const endUserId = yield* endUserOf(request)
            return Caller.of({ userId: key.value.userId, via: "api_key", apiKeyId: Option.some(key.value.id), endUserId })
          }
          const identity = yield* tokens.authenticate(value)
          const endUserId = yield* endUserOf(request)
          return Caller.of({ userId: identity.userId, via: "login", apiKeyId: Option.none(), endUserId })
        })
      return { bearer: resolve, cookie: resolve }
    })
  )),
  Layer.merge(Layer.effect(
    ApiKeyAuthentication,
    Effect.gen(function*() {
      const apiKeys = yield* ApiKeys
      return {
        bearer: (token) =>
          Effect.gen(function*() {
            const key = yield* apiKeys.authenticate(Redacted.value(token))
            if (Option.isNone(key)) {
              return yield* new Unauthorized({ message: "A valid API key (sk_...) is required for /openapi routes." })
            }
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
  Layer.provide([Tokens.Default, ApiKeys.Default])
)
