import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect, Layer } from "effect"
import { AtriumApi } from "../Api.js"
import { AppConfig } from "../platform/Config.js"
import { clientAddress } from "../platform/Network.js"
import { ApiKeys } from "./ApiKeys.js"
import { AuthenticationLive } from "./Authentication.js"
import { LoginChallenge } from "./Challenge.js"
import { Login } from "./Login.js"
import { CurrentUser } from "./Domain.js"

const iso = (date: Date) => date.toISOString()

/** The login cookie: not readable by scripts, not sent on other sites' subrequests, as long-lived as the token. */
const cookieOptionsOf = (config: AppConfig) => ({
  httpOnly: true,
  sameSite: "lax",
  secure: config.secureCookies,
  path: "/",
  maxAge: config.login.tokenTtl
} as const)

export const AuthHttp = HttpApiBuilder.group(AtriumApi, "auth", (handlers) =>
  Effect.gen(function*() {
    const config = yield* AppConfig
    const login = yield* Login
    const challenges = yield* LoginChallenge
    const cookieOptions = cookieOptionsOf(config)
    return handlers
      .handle("sendCode", ({ payload }) =>
        Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
          login.sendCode(payload.phone, clientAddress(request, config.trustProxy), payload.challenge)))
      .handle("challenge", () => challenges.create())
      .handle("login", ({ payload }) =>
        Effect.gen(function*() {
          const request = yield* HttpServerRequest.HttpServerRequest
          const result = yield* login.login(payload.phone, payload.code, clientAddress(request, config.trustProxy), payload.challenge)
          return yield* HttpServerResponse.json({ token: result.token, newUser: result.newUser }).pipe(
            Effect.flatMap(HttpServerResponse.setCookie("token", result.token, cookieOptions)),
            Effect.orDie
          )
        }))
  })).pipe(Layer.provide([Login.Default, LoginChallenge.Default, AppConfig.Default]))

export const AccountHttp = HttpApiBuilder.group(AtriumApi, "account", (handlers) =>
  Effect.gen(function*() {
    const config = yield* AppConfig
    const login = yield* Login
    const apiKeys = yield* ApiKeys
    /**
     * One device per user: the new token voids the old one, so a browser that sent the cookie gets the new cookie
     * too (without it, refreshing would log the browser out).
     */
    const refresh = Effect.gen(function*() {
      const user = yield* CurrentUser
      const request = yield* HttpServerRequest.HttpServerRequest
      const token = yield* login.refresh(user)
      if (request.cookies["token"] === undefined) return HttpServerResponse.unsafeJson({ token })
      return yield* HttpServerResponse.json({ token }).pipe(
        Effect.flatMap(HttpServerResponse.setCookie("token", token, cookieOptionsOf(config))),
        Effect.orDie
      )
    })
    return handlers
      .handle("refresh", () => refresh)
      .handle("refreshWithBearer", () => refresh)
      .handle("createApiKey", ({ payload }) =>
        Effect.gen(function*() {
          const user = yield* CurrentUser
          const created = yield* apiKeys.create(user.userId, payload?.name ?? "default")
          return { ...created, created_at: iso(created.createdAt) }
        }))
      .handle("listApiKeys", () =>
        Effect.gen(function*() {
          const user = yield* CurrentUser
          const keys = yield* apiKeys.list(user.userId)
          return {
            data: keys.map((key) => ({
              id: key.id,
              name: key.name,
              prefix: key.prefix,
              last4: key.last4,
              created_at: iso(key.createdAt),
              last_used_at: key.lastUsedAt === null ? null : iso(key.lastUsedAt)
            }))
          }
        }))
      .handle("deleteApiKey", ({ payload }) =>
        Effect.gen(function*() {
          const user = yield* CurrentUser
          yield* apiKeys.revoke(user.userId, payload.id)
          return { deleted: true as const }
        }))
  })).pipe(Layer.provide([Login.Default, ApiKeys.Default, AuthenticationLive, AppConfig.Default]))
