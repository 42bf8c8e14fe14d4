import * as HttpApiMiddleware from "@effect/platform/HttpApiMiddleware"
import * as HttpApiSecurity from "@effect/platform/HttpApiSecurity"
import { Context, type Option, Schema } from "effect"
import { InvalidRequest, Unauthorized, WireError } from "../platform/Errors.js"
import { type ApiKeyId, type AppId, prefixedId, type UserId } from "../platform/Ids.js"

/**
 * The identity domain's contract (docs/architecture.md, "Contracts"): the middleware tags the API groups name, what
 * they provide, and the identity errors on the wire. Imports only `effect`, `@effect/platform` contract modules and
 * other contracts; the middleware's implementation is `Authentication.ts`.
 */

/** An OAuth app's `client_id` (`cid_…`, 24 characters): the app's public name in the authorization flows. */
export const ClientId = prefixedId("cid", "ClientId")
export type ClientId = typeof ClientId.Type

/** One grant's family of rotating refresh tokens (`fam_…`): a leaked token revokes the whole family. */
export const TokenFamilyId = prefixedId("fam", "TokenFamilyId")
export type TokenFamilyId = typeof TokenFamilyId.Type

export interface LoginIdentity {
  readonly userId: UserId
  readonly phone: string
}

/** The user and app behind an OAuth access token. */
export interface AppCallerIdentity {
  readonly userId: UserId
  readonly appId: AppId
  readonly scopes: ReadonlyArray<string>
}

const bearer = HttpApiSecurity.bearer

/** The logged-in end user of an `/api` route. */
export class CurrentUser extends Context.Tag("atrium/identity/CurrentUser")<CurrentUser, LoginIdentity>() {}

/**
 * Who calls `/v1` or `/openapi`, and on whose behalf. The account pays and owns; with an API key, the end user
 * (`X-End-User-Id`) partitions sessions, files and memory inside that account (spec 2.7, 5.1).
 */
export interface CallerIdentity {
  readonly userId: UserId
  /** An OAuth app's caller acts for its user directly: no end user, and only with the `agents:write` scope. */
  readonly via: "api_key" | "login" | "oauth"
  readonly apiKeyId: Option.Option<ApiKeyId>
  readonly endUserId: Option.Option<string>
}

export class Caller extends Context.Tag("atrium/identity/Caller")<Caller, CallerIdentity>() {}

/**
 * One security scheme, not `{ bearer, cookie }`: HttpApi tries the schemes in turn and answers with the last one's
 * failure, so a bearer refused for a good reason (an invalid `X-End-User-Id`, a revoked key) came back as the
 * cookie's "no credentials", and a bad bearer was rescued by a cookie. The bearer handler reads the `token` cookie
 * itself when there is no `Authorization` header (see `credentialOf`).
 */
export class UserAuthentication extends HttpApiMiddleware.Tag<UserAuthentication>()(
  "atrium/identity/UserAuthentication",
  { failure: Unauthorized, provides: CurrentUser, security: { bearer } }
) {}

export class PlatformAuthentication extends HttpApiMiddleware.Tag<PlatformAuthentication>()(
  "atrium/identity/PlatformAuthentication",
  { failure: Schema.Union(Unauthorized, InvalidRequest), provides: Caller, security: { bearer } }
) {}

/** The user and app behind an OAuth access token (spec 4.1: `POST /v1/events`). */
export class AppCaller extends Context.Tag("atrium/identity/AppCaller")<AppCaller, AppCallerIdentity>() {}

/** OAuth access tokens only: an API key or a login token is 401 here (spec 4.1, 5.1 rule 3). */
export class AppAuthentication extends HttpApiMiddleware.Tag<AppAuthentication>()(
  "atrium/identity/AppAuthentication",
  { failure: Unauthorized, provides: AppCaller, security: { bearer } }
) {}

export class ApiKeyAuthentication extends HttpApiMiddleware.Tag<ApiKeyAuthentication>()(
  "atrium/identity/ApiKeyAuthentication",
  { failure: Unauthorized, provides: Caller, security: { bearer } }
) {}

/** Spec 5.1 rule 4: the routes where an API key must say which end user it acts for. */
// `/v1/responses` too: its conversations are sessions (issue 16).
export const END_USER_ROUTES = /^\/v1\/(chat\/|agents\/run(\/|$)|runs(\/|$)|sessions(\/|$)|files(\/|$)|responses(\/|$)|memory(\/|$))/

export const MISSING_END_USER =
  "Missing required header: X-End-User-Id. Requests with an API key to this route must send a stable id of " +
  "your end user (1-128 characters of A-Z a-z 0-9 . _ : @ -), so their sessions, files and memory stay apart."

export class ChallengeRequired extends WireError<ChallengeRequired>()(
  "ChallengeRequired",
  { message: Schema.String },
  { status: 403 }
) {}

/** What `GET /api/auth/challenge` answers: `altcha-lib`'s `createChallenge` output, as the ALTCHA widget expects. */
export const ChallengeSchema = Schema.Struct({
  algorithm: Schema.Literal("SHA-1", "SHA-256", "SHA-512"),
  challenge: Schema.String,
  maxnumber: Schema.optional(Schema.Int),
  salt: Schema.String,
  signature: Schema.String
})

export class InvalidCode extends WireError<InvalidCode>()(
  "InvalidCode",
  { message: Schema.String },
  { status: 401 }
) {}

export class SmsNotDelivered extends WireError<SmsNotDelivered>()(
  "SmsNotDelivered",
  { message: Schema.String },
  { status: 502 }
) {}
