import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Jose from "jose"
import * as Crypto from "node:crypto"
import * as oauth from "oauth4webapi"
import { userIdOf } from "../support/Billing.js"
import { createApiKey, loginWithSms, type Reply, request } from "../support/Client.js"
import { JWT_SECRET, TestServer } from "../support/TestServer.js"

/**
 * OAuth 2.0 for apps (issue 3 item 5; spec 4.9, 5.1 rule 3 and 5): the authorization code flow with PKCE S256,
 * completed by a real client library (oauth4webapi) with client_secret_basic and client_secret_post; the consent
 * page and its redirects; the token endpoint's RFC 6749 errors; refresh token rotation and reuse detection; and
 * where an access token is (POST /v1/events) and is not (/api, /v1/models) accepted.
 *
 * Not tested here: a code older than 10 minutes and an access token older than 15 minutes issued by the server (the
 * server runs on the real clock and those lifetimes cannot be waited out in a test). The expiry check of access
 * tokens is covered with a token signed here with an `exp` in the past.
 */

const FORM = "application/x-www-form-urlencoded"

interface App {
  readonly id: string
  readonly clientId: string
  readonly clientSecret: string
  readonly redirectUri: string
  /** A second registered redirect URI. */
  readonly otherRedirectUri: string
}

interface RawReply extends Reply {
  readonly location: string | null
}

/** One request with Node's fetch, redirects not followed. */
const raw = (method: string, path: string, options: { headers?: Record<string, string>; body?: string } = {}) =>
  Effect.flatMap(TestServer, (server) =>
    Effect.promise(async (): Promise<RawReply> => {
      const response = await fetch(server.url + path, {
        method,
        redirect: "manual",
        headers: options.headers ?? {},
        ...(options.body !== undefined ? { body: options.body } : {})
      })
      const text = await response.text()
      let body: unknown
      try {
        body = JSON.parse(text)
      } catch {
        body = undefined
      }
      return { status: response.status, headers: response.headers, text, body, location: response.headers.get("location") }
    }))

const makeApp = (ownerToken: string, name = "Test app", meters: Record<string, number> = { search: 2 }) =>
  Effect.gen(function*() {
    const redirectUri = `https://client-${Crypto.randomUUID().slice(0, 8)}.example.com/callback`
    const created = yield* request("POST", "/api/apps", {
      token: ownerToken,
      body: { name, redirect_uris: [redirectUri, `${redirectUri}/second`] }
    })
    assert.strictEqual(created.status, 201, created.text)
    for (const [event_name, credits_per_use] of Object.entries(meters)) {
      const meter = yield* request("POST", `/api/apps/${created.body.id}/meters`, {
        token: ownerToken,
        body: { event_name, credits_per_use }
      })
      assert.strictEqual(meter.status, 201, meter.text)
    }
    return {
      id: created.body.id,
      clientId: created.body.client_id,
      clientSecret: created.body.client_secret,
      redirectUri,
      otherRedirectUri: `${redirectUri}/second`
    } satisfies App
  })

const pkce = () => {
  const verifier = Crypto.randomBytes(32).toString("base64url")
  return { verifier, challenge: Crypto.createHash("sha256").update(verifier).digest("base64url") }
}

/** The query of an authorization request for `app`, with `overrides` (undefined removes a parameter). */
const authorizeParams = (app: App, challenge: string, overrides: Record<string, string | undefined> = {}) => {
  const params: Record<string, string | undefined> = {
    response_type: "code",
    client_id: app.clientId,
    redirect_uri: app.redirectUri,
    scope: "events",
    state: "state-123",
    code_challenge: challenge,
    code_challenge_method: "S256",
    ...overrides
  }
  const search = new URLSearchParams()
  for (const [key, value] of Object.entries(params)) if (value !== undefined) search.set(key, value)
  return search
}

const getAuthorize = (search: URLSearchParams, headers: Record<string, string> = {}) =>
  raw("GET", `/oauth/authorize?${search}`, { headers })

const postAuthorize = (form: URLSearchParams, headers: Record<string, string> = {}) =>
  raw("POST", "/oauth/authorize", { headers: { "content-type": FORM, ...headers }, body: form.toString() })

/** The user behind `userToken` approves; returns the code from the redirect. */
const approve = (userToken: string, app: App, challenge: string, overrides: Record<string, string | undefined> = {}) =>
  Effect.gen(function*() {
    const form = authorizeParams(app, challenge, overrides)
    form.set("decision", "approve")
    const reply = yield* postAuthorize(form, { authorization: `Bearer ${userToken}` })
    assert.strictEqual(reply.status, 302, reply.text)
    const code = new URL(reply.location!).searchParams.get("code")
    assert.isString(code)
    return code!
  })

const basicAuth = (clientId: string, secret: string) =>
  `Basic ${Buffer.from(`${encodeURIComponent(clientId)}:${encodeURIComponent(secret)}`).toString("base64")}`

const tokenRequest = (form: Record<string, string>, headers: Record<string, string> = {}) =>
  raw("POST", "/oauth/token", { headers: { "content-type": FORM, ...headers }, body: new URLSearchParams(form).toString() })

/** A code for `app` exchanged (client_secret_post) for tokens. */
const grant = (userToken: string, app: App, scope = "events") =>
  Effect.gen(function*() {
    const { challenge, verifier } = pkce()
    const code = yield* approve(userToken, app, challenge, { scope })
    const reply = yield* tokenRequest({
      grant_type: "authorization_code",
      code,
      redirect_uri: app.redirectUri,
      code_verifier: verifier,
      client_id: app.clientId,
      client_secret: app.clientSecret
    })
    assert.strictEqual(reply.status, 200, reply.text)
    return reply.body as { access_token: string; refresh_token: string; scope: string; expires_in: number; token_type: string }
  })

const refresh = (app: App, refreshToken: string) =>
  tokenRequest({
    grant_type: "refresh_token",
    refresh_token: refreshToken,
    client_id: app.clientId,
    client_secret: app.clientSecret
  })

/** An RFC 6749 error body: `{"error", "error_description"}`, never cached. */
const assertOAuthError = (reply: RawReply, status: number, error: string) => {
  assert.strictEqual(reply.status, status, reply.text)
  assert.strictEqual(reply.body?.error, error, reply.text)
  assert.isString(reply.body.error_description)
  assert.strictEqual(reply.headers.get("cache-control"), "no-store")
}

const assertPlatformError = (reply: Reply, status: number, type: string) => {
  assert.strictEqual(reply.status, status, reply.text)
  assert.strictEqual(reply.body?.error?.type, type, reply.text)
}

/** An error that goes back to the app: 302 to the registered redirect URI with `error` and the request's state. */
const assertRedirectError = (reply: RawReply, app: App, error: string, state: string | null = "state-123") => {
  assert.strictEqual(reply.status, 302, reply.text)
  const location = new URL(reply.location!)
  assert.strictEqual(`${location.origin}${location.pathname}`, app.redirectUri)
  assert.strictEqual(location.searchParams.get("error"), error, reply.location!)
  assert.strictEqual(location.searchParams.get("state"), state)
  assert.isNull(location.searchParams.get("code"))
}

/** An error about the client itself: a page, never a redirect (the redirect URI is not to be trusted). */
const assertErrorPage = (reply: RawReply) => {
  assert.strictEqual(reply.status, 400, reply.text)
  assert.isNull(reply.location)
  assert.include(reply.headers.get("content-type") ?? "", "text/html")
}

const jwtParts = (token: string) => {
  const [header, payload] = token.split(".").slice(0, 2).map((part) => JSON.parse(Buffer.from(part!, "base64url").toString("utf8")))
  return { header, payload }
}

/** The hidden fields of the consent page's form, as a browser would submit them. */
const consentForm = (html: string) => {
  const form = new URLSearchParams()
  const unescape = (s: string) =>
    s.replace(/&quot;/g, "\"").replace(/&#39;/g, "'").replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&")
  for (const match of html.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)) {
    form.set(match[1]!, unescape(match[2]!))
  }
  return form
}

const charge = (accessToken: string, event = "search", key: string = Crypto.randomUUID()) =>
  request("POST", "/v1/events", { token: accessToken, body: { event, idempotency_key: key } })

/**
 * The whole flow with oauth4webapi as the app: the browser shows the consent page (login cookie) and the user
 * submits its form (here with the login token as Bearer); the library validates the callback, exchanges the code
 * with the chosen client authentication, and later refreshes. `sent` records what the library put on the wire.
 */
const withLibrary = (userToken: string, app: App, method: "basic" | "post", scope = "events") =>
  Effect.gen(function*() {
    const server = yield* TestServer
    const as: oauth.AuthorizationServer = {
      issuer: server.url,
      authorization_endpoint: `${server.url}/oauth/authorize`,
      token_endpoint: `${server.url}/oauth/token`
    }
    const client: oauth.Client = { client_id: app.clientId }
    const clientAuth = method === "basic" ? oauth.ClientSecretBasic(app.clientSecret) : oauth.ClientSecretPost(app.clientSecret)
    const sent: Array<{ authorization: string | null; body: URLSearchParams }> = []
    const options = {
      [oauth.allowInsecureRequests]: true,
      [oauth.customFetch]: (url: string, init: oauth.CustomFetchOptions<"POST", URLSearchParams>) => {
        sent.push({ authorization: new Headers(init.headers).get("authorization"), body: new URLSearchParams(init.body) })
        return fetch(url, init)
      }
    }

    const verifier = oauth.generateRandomCodeVerifier()
    const challenge = yield* Effect.promise(() => oauth.calculatePKCECodeChallenge(verifier))
    const state = oauth.generateRandomState()
    const authorizationUrl = new URL(as.authorization_endpoint!)
    authorizationUrl.search = new URLSearchParams({
      response_type: "code",
      client_id: app.clientId,
      redirect_uri: app.redirectUri,
      scope,
      state,
      code_challenge: challenge,
      code_challenge_method: "S256"
    }).toString()

    const page = yield* raw("GET", authorizationUrl.pathname + authorizationUrl.search, { headers: { cookie: `token=${userToken}` } })
    assert.strictEqual(page.status, 200, page.text)
    const form = consentForm(page.text)
    form.set("decision", "approve")
    const decision = yield* postAuthorize(form, { authorization: `Bearer ${userToken}` })
    assert.strictEqual(decision.status, 302, decision.text)

    const callback = oauth.validateAuthResponse(as, client, new URL(decision.location!), state)
    const tokens = yield* Effect.promise(async () =>
      oauth.processAuthorizationCodeResponse(
        as,
        client,
        await oauth.authorizationCodeGrantRequest(as, client, clientAuth, callback, app.redirectUri, verifier, options)
      )
    )
    const refreshWith = (refreshToken: string) =>
      Effect.tryPromise(async () =>
        oauth.processRefreshTokenResponse(
          as,
          client,
          await oauth.refreshTokenGrantRequest(as, client, clientAuth, refreshToken, options)
        )
      )
    return { tokens, refreshWith, sent }
  })

describe("OAuth 2.0", () => {
  it.layer(TestServer.layer({ SMS_IP_HOURLY_LIMIT: "10000" }))((it) => {
    for (const method of ["basic", "post"] as const) {
      it.effect(`oauth4webapi completes the code flow with PKCE and client_secret_${method}, charges an event and refreshes`, () =>
        Effect.gen(function*() {
          const owner = yield* loginWithSms()
          const user = yield* loginWithSms()
          const app = yield* makeApp(owner.token)
          const { refreshWith, sent, tokens } = yield* withLibrary(user.token, app, method)

          // The library authenticated the way it was told to; the server accepted it.
          assert.strictEqual(sent.length, 1)
          if (method === "basic") {
            assert.match(sent[0]!.authorization ?? "", /^Basic /)
            assert.isNull(sent[0]!.body.get("client_secret"))
          } else {
            assert.isNull(sent[0]!.authorization)
            assert.strictEqual(sent[0]!.body.get("client_secret"), app.clientSecret)
          }
          assert.strictEqual(tokens.token_type, "bearer")
          assert.strictEqual(tokens.scope, "events")
          assert.strictEqual(tokens.expires_in, 900)
          assert.isString(tokens.refresh_token)

          const charged = yield* charge(tokens.access_token)
          assert.strictEqual(charged.status, 200, charged.text)
          assert.deepStrictEqual(charged.body, { charged: 2, balance_remaining: 98 })

          const refreshed = yield* refreshWith(tokens.refresh_token!)
          assert.strictEqual(sent.length, 2)
          assert.notStrictEqual(refreshed.refresh_token, tokens.refresh_token)
          assert.strictEqual(refreshed.scope, "events")
          const again = yield* charge(refreshed.access_token)
          assert.deepStrictEqual(again.body, { charged: 2, balance_remaining: 96 })

          // The library sees the reuse of the rotated token as the RFC 6749 error it is.
          const reused = yield* Effect.flip(refreshWith(tokens.refresh_token!))
          const cause = (reused as { error: unknown }).error
          assert.instanceOf(cause, oauth.ResponseBodyError)
          assert.strictEqual((cause as oauth.ResponseBodyError).error, "invalid_grant")
          assert.strictEqual((cause as oauth.ResponseBodyError).status, 400)
        }))
    }

    it.effect("the library sees a wrong secret as invalid_client; with Basic the 401 carries WWW-Authenticate", () =>
      Effect.gen(function*() {
        const owner = yield* loginWithSms()
        const app = yield* makeApp(owner.token)
        const { challenge, verifier } = pkce()
        const code = yield* approve(owner.token, app, challenge)
        const server = yield* TestServer
        const as: oauth.AuthorizationServer = { issuer: server.url, token_endpoint: `${server.url}/oauth/token` }
        const client: oauth.Client = { client_id: app.clientId }
        const callback = oauth.validateAuthResponse(as, client, new URL(`${app.redirectUri}?code=${code}&state=s`), "s")
        const failure = yield* Effect.flip(Effect.tryPromise(async () =>
          oauth.processAuthorizationCodeResponse(
            as,
            client,
            await oauth.authorizationCodeGrantRequest(as, client, oauth.ClientSecretBasic("cs_wrong"), callback, app.redirectUri, verifier, {
              [oauth.allowInsecureRequests]: true
            })
          )
        ))
        const cause = (failure as { error: unknown }).error
        assert.instanceOf(cause, oauth.WWWAuthenticateChallengeError)
        assert.strictEqual((cause as oauth.WWWAuthenticateChallengeError).response.status, 401)
        assert.strictEqual((cause as oauth.WWWAuthenticateChallengeError).cause[0]!.scheme, "basic")
      }))

    it.effect("the token response is {access_token, token_type: Bearer, expires_in, refresh_token, scope}, no-store; the access token is a JWT naming the user, the app and the scopes", () =>
      Effect.gen(function*() {
        const owner = yield* loginWithSms()
        const user = yield* loginWithSms()
        const app = yield* makeApp(owner.token)
        const { challenge, verifier } = pkce()
        const code = yield* approve(user.token, app, challenge, { scope: "agents:write events agents:write" })
        const reply = yield* tokenRequest({
          grant_type: "authorization_code",
          code,
          redirect_uri: app.redirectUri,
          code_verifier: verifier,
          client_id: app.clientId,
          client_secret: app.clientSecret
        })
        assert.strictEqual(reply.status, 200, reply.text)
        assert.strictEqual(reply.headers.get("cache-control"), "no-store")
        assert.include(reply.headers.get("content-type") ?? "", "application/json")
        assert.deepStrictEqual(Object.keys(reply.body).sort(), ["access_token", "expires_in", "refresh_token", "scope", "token_type"])
        assert.strictEqual(reply.body.token_type, "Bearer")
        assert.strictEqual(reply.body.expires_in, 900)
        assert.strictEqual(reply.body.scope, "agents:write events")

        const { header, payload } = jwtParts(reply.body.access_token)
        assert.strictEqual(header.alg, "HS256")
        assert.strictEqual(payload.typ, "oauth_access")
        assert.strictEqual(payload.sub, userIdOf(user.token))
        assert.strictEqual(payload.app, app.id)
        assert.strictEqual(payload.scope, "agents:write events")
        assert.strictEqual(payload.exp - payload.iat, 900)
        assert.isTrue(Math.abs(payload.iat - Date.now() / 1000) < 60)
        // It verifies under the platform's key.
        yield* Effect.promise(() => Jose.jwtVerify(reply.body.access_token, new TextEncoder().encode(JWT_SECRET)))

        // Without a scope parameter the grant is `events`.
        const defaulted = yield* grant(user.token, app, "events")
        assert.strictEqual(jwtParts(defaulted.access_token).payload.scope, "events")
        const { challenge: c2, verifier: v2 } = pkce()
        const noScope = yield* approve(user.token, app, c2, { scope: undefined })
        const noScopeTokens = yield* tokenRequest({
          grant_type: "authorization_code",
          code: noScope,
          redirect_uri: app.redirectUri,
          code_verifier: v2,
          client_id: app.clientId,
          client_secret: app.clientSecret
        })
        assert.strictEqual(noScopeTokens.body.scope, "events")
      }))

    it.effect("GET /oauth/authorize without a login sends the browser to /login?next=<the same request>", () =>
      Effect.gen(function*() {
        const owner = yield* loginWithSms()
        const app = yield* makeApp(owner.token)
        const search = authorizeParams(app, pkce().challenge)
        for (const headers of [{}, { cookie: "token=not-a-token" }, { cookie: "token=" }]) {
          const reply = yield* getAuthorize(search, headers)
          assert.strictEqual(reply.status, 302, reply.text)
          const location = new URL(reply.location!, "http://x")
          assert.strictEqual(location.pathname, "/login")
          assert.strictEqual(location.searchParams.get("next"), `/oauth/authorize?${search}`)
        }
        // And the login page sends it back there.
        const login = yield* raw("GET", `/login?next=${encodeURIComponent(`/oauth/authorize?${search}`)}`)
        assert.strictEqual(login.status, 200)
        assert.strictEqual(nextOf(login.text), `/oauth/authorize?${search}`)
      }))

    it.effect("GET /oauth/authorize with the login cookie is a consent page naming the app (escaped) and each scope", () =>
      Effect.gen(function*() {
        const owner = yield* loginWithSms()
        const user = yield* loginWithSms()
        const name = `<img src=x onerror="alert(1)"> & Co's app`
        const app = yield* makeApp(owner.token, name)
        const { challenge } = pkce()
        const state = `s"><script>alert(2)</script>`
        const reply = yield* getAuthorize(authorizeParams(app, challenge, { scope: "events agents:write", state }), {
          cookie: `token=${user.token}`
        })
        assert.strictEqual(reply.status, 200, reply.text)
        assert.include(reply.headers.get("content-type") ?? "", "text/html")
        assert.strictEqual(reply.headers.get("cache-control"), "no-store")
        assert.include(reply.text, "&lt;img src=x onerror=&quot;alert(1)&quot;&gt; &amp; Co&#39;s app")
        assert.notInclude(reply.text, "<img")
        assert.notInclude(reply.text, "<script>alert(2)")
        assert.include(reply.text, "Charge your credits")
        assert.include(reply.text, "Create and run experts")
        assert.include(reply.text, user.phone)
        // The form carries the request on, exactly.
        const form = consentForm(reply.text)
        assert.strictEqual(form.get("client_id"), app.clientId)
        assert.strictEqual(form.get("redirect_uri"), app.redirectUri)
        assert.strictEqual(form.get("state"), state)
        assert.strictEqual(form.get("code_challenge"), challenge)
        assert.strictEqual(form.get("code_challenge_method"), "S256")
        assert.strictEqual(form.get("scope"), "events agents:write")
        assert.include(reply.text, `name="decision" value="approve"`)
        assert.include(reply.text, `name="decision" value="deny"`)

        // One scope only: the page lists that one.
        const single = yield* getAuthorize(authorizeParams(app, challenge), { cookie: `token=${user.token}` })
        assert.include(single.text, "Charge your credits")
        assert.notInclude(single.text, "Create and run experts")
        // A Bearer login token works as well as the cookie.
        const bearer = yield* getAuthorize(authorizeParams(app, challenge), { authorization: `Bearer ${user.token}` })
        assert.strictEqual(bearer.status, 200, bearer.text)
      }))

    it.effect("an unknown client_id or a redirect_uri the app did not register is a 400 page, never a redirect", () =>
      Effect.gen(function*() {
        const owner = yield* loginWithSms()
        const app = yield* makeApp(owner.token)
        const other = yield* makeApp(owner.token)
        const { challenge } = pkce()
        const cases: Array<Record<string, string | undefined>> = [
          { client_id: "cid_unknown" },
          { client_id: undefined },
          { redirect_uri: "https://evil.example.com/callback" },
          { redirect_uri: `${app.redirectUri}/` },
          { redirect_uri: `${app.redirectUri}?x=1` },
          { redirect_uri: other.redirectUri },
          { redirect_uri: undefined },
          // Even when the rest of the request is also wrong, the app's address is not trusted.
          { redirect_uri: "https://evil.example.com/callback", response_type: "token" },
          { redirect_uri: "https://evil.example.com/callback", scope: "admin" }
        ]
        for (const overrides of cases) {
          const search = authorizeParams(app, challenge, overrides)
          for (const headers of [{}, { cookie: `token=${owner.token}` }]) {
            assertErrorPage(yield* getAuthorize(search, headers))
          }
          search.set("decision", "approve")
          assertErrorPage(yield* postAuthorize(search, { authorization: `Bearer ${owner.token}` }))
        }
      }))

    it.effect("response_type other than code goes back with error=unsupported_response_type and the state", () =>
      Effect.gen(function*() {
        const owner = yield* loginWithSms()
        const app = yield* makeApp(owner.token)
        const { challenge } = pkce()
        for (const response_type of ["token", "code id_token", "", undefined]) {
          const search = authorizeParams(app, challenge, { response_type })
          assertRedirectError(yield* getAuthorize(search, { cookie: `token=${owner.token}` }), app, "unsupported_response_type")
          assertRedirectError(yield* getAuthorize(search), app, "unsupported_response_type")
          search.set("decision", "approve")
          assertRedirectError(yield* postAuthorize(search, { authorization: `Bearer ${owner.token}` }), app, "unsupported_response_type")
        }
      }))

    it.effect("missing PKCE, method plain or a malformed challenge goes back with error=invalid_request", () =>
      Effect.gen(function*() {
        const owner = yield* loginWithSms()
        const app = yield* makeApp(owner.token)
        const { challenge, verifier } = pkce()
        const cases: Array<Record<string, string | undefined>> = [
          { code_challenge: undefined, code_challenge_method: undefined },
          { code_challenge: undefined },
          { code_challenge_method: undefined },
          { code_challenge_method: "plain" },
          { code_challenge_method: "plain", code_challenge: verifier },
          { code_challenge: "short" },
          { code_challenge: `${challenge}A` },
          { code_challenge: `${challenge.slice(0, 42)}=` }
        ]
        for (const overrides of cases) {
          const search = authorizeParams(app, challenge, overrides)
          assertRedirectError(yield* getAuthorize(search, { cookie: `token=${owner.token}` }), app, "invalid_request")
          search.set("decision", "approve")
          assertRedirectError(yield* postAuthorize(search, { authorization: `Bearer ${owner.token}` }), app, "invalid_request")
        }
      }))

    it.effect("an unknown scope goes back with error=invalid_scope; without a state none is added", () =>
      Effect.gen(function*() {
        const owner = yield* loginWithSms()
        const app = yield* makeApp(owner.token)
        const { challenge } = pkce()
        for (const scope of ["admin", "events admin", "sessions:write", "environments:write", "EVENTS"]) {
          const search = authorizeParams(app, challenge, { scope })
          assertRedirectError(yield* getAuthorize(search, { cookie: `token=${owner.token}` }), app, "invalid_scope")
          search.set("decision", "approve")
          assertRedirectError(yield* postAuthorize(search, { authorization: `Bearer ${owner.token}` }), app, "invalid_scope")
        }
        const noState = authorizeParams(app, challenge, { scope: "admin", state: undefined })
        assertRedirectError(yield* getAuthorize(noState, { cookie: `token=${owner.token}` }), app, "invalid_scope", null)
      }))

    it.effect("POST /oauth/authorize: approve redirects with code and state; deny with error=access_denied and state", () =>
      Effect.gen(function*() {
        const owner = yield* loginWithSms()
        const app = yield* makeApp(owner.token)
        const { challenge } = pkce()
        const approved = authorizeParams(app, challenge, { state: "a b&c=d" })
        approved.set("decision", "approve")
        const yes = yield* postAuthorize(approved, { authorization: `Bearer ${owner.token}` })
        assert.strictEqual(yes.status, 302, yes.text)
        const location = new URL(yes.location!)
        assert.strictEqual(`${location.origin}${location.pathname}`, app.redirectUri)
        assert.strictEqual(location.searchParams.get("state"), "a b&c=d")
        assert.match(location.searchParams.get("code") ?? "", /^[A-Za-z0-9]{32,}$/)
        // The login cookie is as good as the Bearer token; the other registered redirect URI too.
        const byCookie = authorizeParams(app, challenge, { redirect_uri: app.otherRedirectUri })
        byCookie.set("decision", "approve")
        const cookieReply = yield* postAuthorize(byCookie, { cookie: `token=${owner.token}` })
        assert.strictEqual(cookieReply.status, 302, cookieReply.text)
        assert.isTrue(cookieReply.location!.startsWith(`${app.otherRedirectUri}?`))
        assert.isString(new URL(cookieReply.location!).searchParams.get("code"))

        for (const decision of ["deny", "", "yes", undefined]) {
          const denied = authorizeParams(app, challenge)
          if (decision !== undefined) denied.set("decision", decision)
          assertRedirectError(yield* postAuthorize(denied, { authorization: `Bearer ${owner.token}` }), app, "access_denied")
        }
      }))

    it.effect("POST /oauth/authorize without a login is 401 and issues nothing; an access token is no login", () =>
      Effect.gen(function*() {
        const owner = yield* loginWithSms()
        const app = yield* makeApp(owner.token)
        const tokens = yield* grant(owner.token, app, "events agents:write")
        const key = yield* createApiKey(owner.token)
        const form = authorizeParams(app, pkce().challenge)
        form.set("decision", "approve")
        for (
          const headers of [
            {},
            { authorization: "Bearer not-a-token" },
            { cookie: "token=not-a-token" },
            { authorization: `Bearer ${tokens.access_token}` },
            { cookie: `token=${tokens.access_token}` },
            { authorization: `Bearer ${key.key}` }
          ]
        ) {
          const reply = yield* postAuthorize(form, headers)
          assert.strictEqual(reply.status, 401, reply.text)
          assert.isNull(reply.location)
          assert.strictEqual(reply.body?.error?.type, "unauthorized")
        }
        const deny = authorizeParams(app, pkce().challenge)
        deny.set("decision", "deny")
        assert.strictEqual((yield* postAuthorize(deny)).status, 401)
      }))

    it.effect("a code is single-use: the second exchange is 400 invalid_grant", () =>
      Effect.gen(function*() {
        const owner = yield* loginWithSms()
        const app = yield* makeApp(owner.token)
        const { challenge, verifier } = pkce()
        const code = yield* approve(owner.token, app, challenge)
        const form = {
          grant_type: "authorization_code",
          code,
          redirect_uri: app.redirectUri,
          code_verifier: verifier,
          client_id: app.clientId,
          client_secret: app.clientSecret
        }
        const first = yield* tokenRequest(form)
        assert.strictEqual(first.status, 200, first.text)
        assertOAuthError(yield* tokenRequest(form), 400, "invalid_grant")
        // Two exchanges at once: exactly one wins.
        const code2 = yield* approve(owner.token, app, challenge)
        const both = yield* Effect.all([tokenRequest({ ...form, code: code2 }), tokenRequest({ ...form, code: code2 })], {
          concurrency: 2
        })
        assert.deepStrictEqual(both.map((r) => r.status).sort(), [200, 400])
        assertOAuthError(yield* tokenRequest({ ...form, code: "not-a-code" }), 400, "invalid_grant")
      }))

    it.effect("the exchange needs the same redirect_uri, the right code_verifier and the app the code was issued to", () =>
      Effect.gen(function*() {
        const owner = yield* loginWithSms()
        const app = yield* makeApp(owner.token)
        const other = yield* makeApp(owner.token)
        const exchange = (overrides: Record<string, string>, as: App = app) =>
          Effect.gen(function*() {
            const { challenge, verifier } = pkce()
            const code = yield* approve(owner.token, app, challenge)
            return yield* tokenRequest({
              grant_type: "authorization_code",
              code,
              redirect_uri: app.redirectUri,
              code_verifier: verifier,
              client_id: as.clientId,
              client_secret: as.clientSecret,
              ...overrides
            })
          })
        // Registered, but not the one of the authorization request.
        assertOAuthError(yield* exchange({ redirect_uri: app.otherRedirectUri }), 400, "invalid_grant")
        assertOAuthError(yield* exchange({ redirect_uri: "https://evil.example.com/callback" }), 400, "invalid_grant")
        assertOAuthError(yield* exchange({ code_verifier: pkce().verifier }), 400, "invalid_grant")
        assertOAuthError(yield* exchange({ code_verifier: "x".repeat(43) }), 400, "invalid_grant")
        // The code of `app` presented by `other`, correctly authenticated as itself.
        assertOAuthError(yield* exchange({}, other), 400, "invalid_grant")
        // Missing parameters are invalid_request.
        for (const field of ["code", "redirect_uri", "code_verifier"]) {
          assertOAuthError(yield* exchange({ [field]: "" }), 400, "invalid_request")
        }
        // The control: the same request, unaltered, succeeds.
        assert.strictEqual((yield* exchange({})).status, 200)
      }))

    it.effect("a wrong client secret or an unknown client is 401 invalid_client; with Basic it carries WWW-Authenticate", () =>
      Effect.gen(function*() {
        const owner = yield* loginWithSms()
        const app = yield* makeApp(owner.token)
        const other = yield* makeApp(owner.token)
        const { challenge, verifier } = pkce()
        const code = yield* approve(owner.token, app, challenge)
        const base = { grant_type: "authorization_code", code, redirect_uri: app.redirectUri, code_verifier: verifier }

        const viaPost = yield* tokenRequest({ ...base, client_id: app.clientId, client_secret: "cs_wrong" })
        assertOAuthError(viaPost, 401, "invalid_client")
        const swapped = yield* tokenRequest({ ...base, client_id: app.clientId, client_secret: other.clientSecret })
        assertOAuthError(swapped, 401, "invalid_client")
        const unknown = yield* tokenRequest({ ...base, client_id: "cid_unknown", client_secret: app.clientSecret })
        assertOAuthError(unknown, 401, "invalid_client")
        assertOAuthError(yield* tokenRequest({ ...base, client_id: app.clientId }), 401, "invalid_client")
        assertOAuthError(yield* tokenRequest(base), 401, "invalid_client")

        const viaBasic = yield* tokenRequest(base, { authorization: basicAuth(app.clientId, "cs_wrong") })
        assertOAuthError(viaBasic, 401, "invalid_client")
        assert.match(viaBasic.headers.get("www-authenticate") ?? "", /^Basic /)
        const basicUnknown = yield* tokenRequest(base, { authorization: basicAuth("cid_unknown", app.clientSecret) })
        assertOAuthError(basicUnknown, 401, "invalid_client")
        assert.match(basicUnknown.headers.get("www-authenticate") ?? "", /^Basic /)

        // None of those used up the code: the right credentials still exchange it, with Basic.
        const ok = yield* tokenRequest(base, { authorization: basicAuth(app.clientId, app.clientSecret) })
        assert.strictEqual(ok.status, 200, ok.text)
      }))

    it.effect("an unsupported grant_type is 400 unsupported_grant_type; a missing one is invalid_request", () =>
      Effect.gen(function*() {
        const owner = yield* loginWithSms()
        const app = yield* makeApp(owner.token)
        for (const grant_type of ["password", "client_credentials", "implicit", "urn:ietf:params:oauth:grant-type:device_code"]) {
          const reply = yield* tokenRequest({
            grant_type,
            username: "u",
            password: "p",
            client_id: app.clientId,
            client_secret: app.clientSecret
          })
          assertOAuthError(reply, 400, "unsupported_grant_type")
        }
        // A missing parameter is invalid_request (RFC 6749 5.2), grant_type included.
        assertOAuthError(
          yield* tokenRequest({ grant_type: "refresh_token", client_id: app.clientId, client_secret: app.clientSecret }),
          400,
          "invalid_request"
        )
        assertOAuthError(yield* tokenRequest({ client_id: app.clientId, client_secret: app.clientSecret }), 400, "invalid_request")
        assertOAuthError(
          yield* tokenRequest({ grant_type: "", client_id: app.clientId, client_secret: app.clientSecret }),
          400,
          "invalid_request"
        )
      }))

    it.effect("refresh tokens rotate: each refresh gives a new one, and a used one is refused", () =>
      Effect.gen(function*() {
        const owner = yield* loginWithSms()
        const user = yield* loginWithSms()
        const app = yield* makeApp(owner.token)
        const first = yield* grant(user.token, app, "events agents:write")
        const seen = new Set([first.refresh_token])
        let current = first.refresh_token
        for (let i = 0; i < 3; i++) {
          const reply = yield* refresh(app, current)
          assert.strictEqual(reply.status, 200, reply.text)
          assert.strictEqual(reply.headers.get("cache-control"), "no-store")
          assert.deepStrictEqual(Object.keys(reply.body).sort(), ["access_token", "expires_in", "refresh_token", "scope", "token_type"])
          assert.strictEqual(reply.body.token_type, "Bearer")
          assert.strictEqual(reply.body.scope, "events agents:write")
          assert.isFalse(seen.has(reply.body.refresh_token))
          seen.add(reply.body.refresh_token)
          const { payload } = jwtParts(reply.body.access_token)
          assert.strictEqual(payload.sub, userIdOf(user.token))
          assert.strictEqual(payload.app, app.id)
          current = reply.body.refresh_token
        }
        assertOAuthError(yield* refresh(app, first.refresh_token), 400, "invalid_grant")
        assertOAuthError(yield* refresh(app, "rt_unknown"), 400, "invalid_grant")
      }))

    it.effect("reusing a rotated refresh token revokes the whole family: its newest token is refused too, other grants are not", () =>
      Effect.gen(function*() {
        const owner = yield* loginWithSms()
        const user = yield* loginWithSms()
        const app = yield* makeApp(owner.token)
        const family = yield* grant(user.token, app)
        const bystander = yield* grant(user.token, app)
        const second = yield* refresh(app, family.refresh_token)
        assert.strictEqual(second.status, 200, second.text)
        const third = yield* refresh(app, second.body.refresh_token)
        assert.strictEqual(third.status, 200, third.text)

        assertOAuthError(yield* refresh(app, second.body.refresh_token), 400, "invalid_grant")
        assertOAuthError(yield* refresh(app, third.body.refresh_token), 400, "invalid_grant")
        assertOAuthError(yield* refresh(app, family.refresh_token), 400, "invalid_grant")
        // Access tokens already issued stay valid until they expire (docs/billing.md).
        assert.strictEqual((yield* charge(third.body.access_token)).status, 200)
        // Another authorization of the same user and app is its own family.
        const unaffected = yield* refresh(app, bystander.refresh_token)
        assert.strictEqual(unaffected.status, 200, unaffected.text)

        // Two refreshes with one token at once: one rotates, the other is a reuse and revokes the family.
        const racing = yield* grant(user.token, app)
        const both = yield* Effect.all([refresh(app, racing.refresh_token), refresh(app, racing.refresh_token)], {
          concurrency: 2
        })
        assert.deepStrictEqual(both.map((r) => r.status).sort(), [200, 400])
        const winner = both.find((r) => r.status === 200)!
        assertOAuthError(yield* refresh(app, winner.body.refresh_token), 400, "invalid_grant")
      }))

    it.effect("a refresh token of app A presented by app B is invalid_grant, and A's token keeps working", () =>
      Effect.gen(function*() {
        const owner = yield* loginWithSms()
        const user = yield* loginWithSms()
        const appA = yield* makeApp(owner.token)
        const appB = yield* makeApp(owner.token)
        const tokens = yield* grant(user.token, appA)
        assertOAuthError(yield* refresh(appB, tokens.refresh_token), 400, "invalid_grant")
        assertOAuthError(
          yield* tokenRequest(
            { grant_type: "refresh_token", refresh_token: tokens.refresh_token },
            { authorization: basicAuth(appB.clientId, appB.clientSecret) }
          ),
          400,
          "invalid_grant"
        )
        // B's attempt neither rotated nor revoked A's grant.
        const own = yield* refresh(appA, tokens.refresh_token)
        assert.strictEqual(own.status, 200, own.text)
        assert.strictEqual(jwtParts(own.body.access_token).payload.app, appA.id)
        // And A's secret cannot be used to refresh it as B.
        assertOAuthError(
          yield* tokenRequest({
            grant_type: "refresh_token",
            refresh_token: own.body.refresh_token,
            client_id: appB.clientId,
            client_secret: appA.clientSecret
          }),
          401,
          "invalid_client"
        )
      }))

    it.effect("POST /v1/events takes OAuth access tokens only: a login token, an API key or a forged or expired token is 401", () =>
      Effect.gen(function*() {
        const owner = yield* loginWithSms()
        const user = yield* loginWithSms()
        const app = yield* makeApp(owner.token)
        const key = yield* createApiKey(user.token)
        const body = { event: "search", idempotency_key: Crypto.randomUUID() }
        for (const token of [user.token, owner.token, key.key, "not-a-token"]) {
          assertPlatformError(yield* request("POST", "/v1/events", { token, body }), 401, "unauthorized")
        }
        assertPlatformError(yield* request("POST", "/v1/events", { body }), 401, "unauthorized")
        assertPlatformError(yield* request("POST", "/v1/events", { body, headers: { cookie: `token=${user.token}` } }), 401, "unauthorized")

        const sign = (claims: Record<string, unknown>, exp: number, secret = JWT_SECRET) =>
          Effect.promise(() =>
            new Jose.SignJWT(claims)
              .setProtectedHeader({ alg: "HS256", typ: "JWT" })
              .setSubject(userIdOf(user.token))
              .setIssuedAt(Math.floor(Date.now() / 1000) - 1000)
              .setExpirationTime(exp)
              .sign(new TextEncoder().encode(secret))
          )
        const claims = { typ: "oauth_access", app: app.id, scope: "events" }
        const now = Math.floor(Date.now() / 1000)
        const expired = yield* sign(claims, now - 10)
        const forged = yield* sign(claims, now + 600, "another-secret-another-secret-another-secret")
        const untyped = yield* sign({ app: app.id, scope: "events" }, now + 600)
        for (const token of [expired, forged, untyped]) {
          assertPlatformError(yield* request("POST", "/v1/events", { token, body }), 401, "unauthorized")
        }
        // The control: the same claims, unexpired, under the platform's key, are accepted.
        const valid = yield* sign(claims, now + 600)
        assert.strictEqual((yield* request("POST", "/v1/events", { token: valid, body })).status, 200)
      }))

    it.effect("an access token without the events scope is 403 insufficient_scope on POST /v1/events", () =>
      Effect.gen(function*() {
        const owner = yield* loginWithSms()
        const user = yield* loginWithSms()
        const app = yield* makeApp(owner.token)
        const agentsOnly = yield* grant(user.token, app, "agents:write")
        const reply = yield* charge(agentsOnly.access_token)
        assertPlatformError(reply, 403, "insufficient_scope")
        const refreshed = yield* refresh(app, agentsOnly.refresh_token)
        assert.strictEqual(refreshed.body.scope, "agents:write")
        assertPlatformError(yield* charge(refreshed.body.access_token), 403, "insufficient_scope")
        const wallet = yield* request("GET", "/api/wallet", { token: user.token })
        assert.strictEqual(wallet.body.balance, 100, "nothing was charged")
        const both = yield* grant(user.token, app, "agents:write events")
        assert.strictEqual((yield* charge(both.access_token)).status, 200)
      }))

    it.effect("an access token is not a login token: /api routes answer 401; /v1 needs the agents:write scope", () =>
      Effect.gen(function*() {
        const owner = yield* loginWithSms()
        const app = yield* makeApp(owner.token)
        const tokens = yield* grant(owner.token, app, "events agents:write")
        // Spec 5.1 rule 5: an app's token reaches /v1 with agents:write (and only as a bearer); with events alone, 401.
        assert.strictEqual((yield* request("GET", "/v1/models", { token: tokens.access_token })).status, 200)
        assertPlatformError(
          yield* request("GET", "/v1/models", { headers: { cookie: `token=${tokens.access_token}` } }),
          401,
          "unauthorized"
        )
        const eventsOnly = yield* grant(owner.token, app, "events")
        assertPlatformError(yield* request("GET", "/v1/models", { token: eventsOnly.access_token }), 401, "unauthorized")
        for (const [method, path] of [["GET", "/api/apps"], ["GET", "/api/wallet"], ["POST", "/api/user/apiKey/list"]] as const) {
          assertPlatformError(yield* request(method, path, { token: tokens.access_token }), 401, "unauthorized")
          assertPlatformError(
            yield* request(method, path, { headers: { cookie: `token=${tokens.access_token}` } }),
            401,
            "unauthorized"
          )
        }
        assertPlatformError(
          yield* request("POST", "/api/apps", { token: tokens.access_token, body: { name: "x", redirect_uris: ["https://x.example.com/cb"] } }),
          401,
          "unauthorized"
        )
        // The control: the owner's login token is accepted on the same routes.
        assert.strictEqual((yield* request("GET", "/api/apps", { token: owner.token })).status, 200)
        assert.strictEqual((yield* request("GET", "/v1/models", { token: owner.token })).status, 200)
      }))

    it.effect("GET /login renders the login page; next stays on this site and cannot break out of its script", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const origin = new URL(server.url).origin
        const page = yield* raw("GET", "/login?next=%2Fstudio%3Ftab%3D1")
        assert.strictEqual(page.status, 200)
        assert.include(page.headers.get("content-type") ?? "", "text/html")
        assert.include(page.text, "/api/auth/sms/sendCode")
        assert.include(page.text, "/api/auth/login")
        assert.strictEqual(nextOf(page.text), "/studio?tab=1")
        assert.strictEqual(nextOf((yield* raw("GET", "/login")).text), "/")

        const offSite = [
          "//evil.com",
          "//evil.com/path",
          "https://evil.com",
          "http://evil.com/oauth/authorize",
          "javascript:alert(1)",
          "/\\evil.com",
          "\\\\evil.com",
          "/\t/evil.com",
          "/\n/evil.com",
          "/\r\n/evil.com",
          "/\t\\evil.com",
          "evil.com",
          ""
        ]
        for (const next of offSite) {
          const reply = yield* raw("GET", `/login?next=${encodeURIComponent(next)}`)
          assert.strictEqual(reply.status, 200)
          const target = nextOf(reply.text)
          // Where `location.assign(next)` would take the browser, by the URL parser every browser uses.
          assert.strictEqual(new URL(target, server.url).origin, origin, `${JSON.stringify(next)} -> ${JSON.stringify(target)}`)
        }
        assert.strictEqual(nextOf((yield* raw("GET", `/login?next=${encodeURIComponent("//evil.com")}`)).text), "/")
        assert.strictEqual(nextOf((yield* raw("GET", `/login?next=${encodeURIComponent("https://evil.com")}`)).text), "/")

        const hostile = "/x</script><script>alert(1)</script><!--"
        const escaped = yield* raw("GET", `/login?next=${encodeURIComponent(hostile)}`)
        assert.strictEqual(escaped.status, 200)
        assert.strictEqual(escaped.text.split("</script>").length, 2, "only the page's own </script>")
        assert.notInclude(escaped.text, "<script>alert")
        assert.notInclude(escaped.text, "<!--")
        // It still leads where it said, on this site.
        const target = new URL(nextOf(escaped.text), server.url)
        assert.strictEqual(target.origin, origin)
        assert.strictEqual(target.pathname, new URL(hostile, server.url).pathname)
      }))
  })
})

/** The value the login page's script goes to after logging in. */
function nextOf(html: string): string {
  const match = /const next = (.*);\n/.exec(html)
  assert.isNotNull(match, "the login page declares next")
  return JSON.parse(match![1]!)
}
