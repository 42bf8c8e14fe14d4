import { Effect } from "effect"
import * as Crypto from "node:crypto"
import { requestAt } from "./Client.js"
import { internalAuth, TestServer } from "./TestServer.js"

/** The user id inside a login JWT (its payload is not secret, only signed). */
export const userIdOf = (loginToken: string): string =>
  JSON.parse(Buffer.from(loginToken.split(".")[1]!, "base64url").toString("utf8")).userId

export interface RegisteredApp {
  readonly id: string
  readonly clientId: string
  readonly clientSecret: string
  readonly redirectUri: string
}

/** Registers an app for the owner behind `ownerToken`, with one meter per entry of `meters` (name -> price). */
export const registerApp = (
  ownerToken: string,
  options: { readonly meters?: Record<string, number>; readonly dailyCap?: number | null; readonly base?: string } = {}
) =>
  Effect.gen(function*() {
    const base = options.base ?? (yield* TestServer).url
    const redirectUri = "http://127.0.0.1:9/callback"
    const created = yield* requestAt(base, "POST", "/api/apps", {
      token: ownerToken,
      body: { name: "Test app", redirect_uris: [redirectUri] }
    })
    if (created.status !== 201) throw new Error(`create app: ${created.status} ${created.text}`)
    const app: RegisteredApp = {
      id: created.body.id,
      clientId: created.body.client_id,
      clientSecret: created.body.client_secret,
      redirectUri
    }
    for (const [eventName, price] of Object.entries(options.meters ?? {})) {
      const meter = yield* requestAt(base, "POST", `/api/apps/${app.id}/meters`, {
        token: ownerToken,
        body: { event_name: eventName, credits_per_use: price }
      })
      if (meter.status !== 201) throw new Error(`create meter: ${meter.status} ${meter.text}`)
    }
    if (options.dailyCap !== undefined) {
      const patched = yield* requestAt(base, "PATCH", `/api/apps/${app.id}`, {
        token: ownerToken,
        body: { daily_cap_per_user: options.dailyCap }
      })
      if (patched.status !== 200) throw new Error(`set daily cap: ${patched.status} ${patched.text}`)
    }
    return app
  })

/**
 * The user behind `userToken` authorizes `app` (consent through POST /oauth/authorize with their login token),
 * and the app exchanges the code (PKCE S256, client_secret_post) for tokens.
 */
export const authorizeApp = (userToken: string, app: RegisteredApp, scope = "events", base?: string) =>
  Effect.gen(function*() {
    const url = base ?? (yield* TestServer).url
    const verifier = Crypto.randomBytes(32).toString("base64url")
    const challenge = Crypto.createHash("sha256").update(verifier).digest("base64url")
    const form = new URLSearchParams({
      response_type: "code",
      client_id: app.clientId,
      redirect_uri: app.redirectUri,
      scope,
      state: "s",
      code_challenge: challenge,
      code_challenge_method: "S256",
      decision: "approve"
    })
    const consent = yield* Effect.promise(() =>
      fetch(`${url}/oauth/authorize`, {
        method: "POST",
        redirect: "manual",
        headers: { authorization: `Bearer ${userToken}`, "content-type": "application/x-www-form-urlencoded" },
        body: form
      })
    )
    const location = consent.headers.get("location")
    const code = location === null ? null : new URL(location).searchParams.get("code")
    if (consent.status !== 302 || code === null) throw new Error(`authorize: ${consent.status} ${location}`)
    const tokens = yield* Effect.promise(() =>
      fetch(`${url}/oauth/token`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({
          grant_type: "authorization_code",
          code,
          redirect_uri: app.redirectUri,
          code_verifier: verifier,
          client_id: app.clientId,
          client_secret: app.clientSecret
        })
      }).then(async (r) => ({ status: r.status, body: await r.json() as any }))
    )
    if (tokens.status !== 200) throw new Error(`token: ${tokens.status} ${JSON.stringify(tokens.body)}`)
    return tokens.body as { access_token: string; refresh_token: string; scope: string; expires_in: number }
  })

/** Adds credits to a user's wallet through the private-network grant route. */
export const grantCredits = (userId: string, amount: number, key = Crypto.randomUUID(), base?: string) =>
  Effect.gen(function*() {
    const url = base ?? (yield* TestServer).url
    const reply = yield* requestAt(url, "POST", `/internal/wallets/${userId}/grants`, {
      body: { amount, idempotency_key: key, reason: "test grant" },
      headers: internalAuth
    })
    if (reply.status !== 200) throw new Error(`grant: ${reply.status} ${reply.text}`)
    return reply.body as { balance: number }
  })
