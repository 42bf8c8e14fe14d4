import * as HttpLayerRouter from "@effect/platform/HttpLayerRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as UrlParams from "@effect/platform/UrlParams"
import { Effect, Layer, Option } from "effect"
import { pageHeaders } from "../../platform/http/Csp.js"
import { credentialOf, credentialText } from "../../platform/http/Bearer.js"
import { OAuth, OAuthError } from "./OAuth.js"
import { Tokens } from "../Tokens.js"
import { ClientId } from "../Domain.js"

/**
 * The OAuth 2.0 endpoints (spec 4.9). They are plain routes, not HttpApi endpoints: RFC 6749 fixes their error shape
 * (`{"error","error_description"}`), `/oauth/token` takes a form body, and `/oauth/authorize` answers with pages and
 * redirects.
 */

const escapeHtml = (text: string) =>
  text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "'": "&#39;" })[c]!)

/**
 * The look of the web app (web/src/style.css: its colours in light and dark, its header, cards and buttons), inline:
 * these pages are written by the server, also when the web app is not built, and load nothing.
 */
const STYLE = `:root{color-scheme:light dark;--bg:#f7f7f9;--fg:#1b1d22;--muted:#5b6170;--card:#fff;--line:#d8dbe2;` +
  `--accent:#3b4fd8;--accent-fg:#fff;--danger:#b42318;--focus:#ff9f1c;` +
  `font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;font-size:16px;line-height:1.5}` +
  `@media (prefers-color-scheme:dark){:root{--bg:#111318;--fg:#e8eaf0;--muted:#a3a9b8;--card:#1b1e26;--line:#343947;` +
  `--accent:#8c9bff;--accent-fg:#0d1024;--danger:#ff8a80}}` +
  `*{box-sizing:border-box}body{margin:0;background:var(--bg);color:var(--fg)}a{color:var(--accent)}` +
  `:focus-visible{outline:3px solid var(--focus);outline-offset:2px}` +
  `header{padding:.6rem 1rem;background:var(--card);border-bottom:1px solid var(--line)}` +
  `.brand{font-weight:700;font-size:1.2rem;text-decoration:none;color:var(--fg)}` +
  `main{max-width:30rem;margin:2.5rem auto;padding:0 1rem}` +
  `.card{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:1.2rem}` +
  `h1{font-size:1.35rem;margin:0 0 .8rem}p{margin:.5rem 0}.muted{color:var(--muted)}.small{font-size:.85rem}` +
  `ul{padding-left:1.2rem}li{margin:.3rem 0}` +
  `.row{display:flex;flex-wrap:wrap;gap:.5rem;margin-top:1rem}` +
  `label{display:flex;flex-direction:column;gap:.25rem;font-weight:600;margin:.6rem 0}` +
  `input{font:inherit;color:inherit;background:var(--bg);border:1px solid var(--line);border-radius:6px;` +
  `padding:.45rem .6rem;min-height:2.5rem}` +
  `button{font:inherit;font-weight:600;border:1px solid var(--accent);background:var(--accent);color:var(--accent-fg);` +
  `border-radius:6px;padding:.45rem 1.2rem;min-height:2.5rem;cursor:pointer}` +
  `button.secondary{background:transparent;color:var(--accent)}.error{color:var(--danger);font-weight:600}`

const page = (title: string, body: string, status = 200) => {
  const html = `<!doctype html><html lang="en"><head><meta charset="utf-8">` +
    `<meta name="viewport" content="width=device-width, initial-scale=1">` +
    `<title>${escapeHtml(title)}</title><style>${STYLE}</style></head><body>` +
    `<header><a class="brand" href="/">Atrium</a></header><main><div class="card">${body}</div></main></body></html>`
  return HttpServerResponse.html(html).pipe(
    HttpServerResponse.setStatus(status),
    HttpServerResponse.setHeader("cache-control", "no-store"),
    // The page policy: a consent or login page inside someone else's frame is a clickjacking setup (never framed),
    // and the fallback login page's one inline script runs by its hash.
    HttpServerResponse.setHeaders(pageHeaders(html))
  )
}

const SCOPE_TEXT: Record<string, string> = {
  events: "Charge your credits for what you use in the app (per its price list)",
  "agents:write": "Create and run experts and sessions on your behalf"
}

const redirectWith = (redirectUri: string, params: Record<string, string | undefined>) => {
  const url = new URL(redirectUri)
  for (const [key, value] of Object.entries(params)) if (value !== undefined) url.searchParams.set(key, value)
  return HttpServerResponse.redirect(url.toString(), { status: 302 })
}

const oauthJson = (body: unknown, status = 200, headers: Record<string, string> = {}) =>
  HttpServerResponse.unsafeJson(body, {
    status,
    headers: { "cache-control": "no-store", pragma: "no-cache", ...headers }
  })

const errorJson = (error: OAuthError, basicAuth: boolean) =>
  oauthJson(
    { error: error.error, error_description: error.description },
    error.status,
    error.error === "invalid_client" && basicAuth ? { "www-authenticate": "Basic realm=\"atrium\"" } : {}
  )

/** The parameters of an authorization request, from the query (GET) or the form (POST). */
const authorizationRequest = (params: UrlParams.UrlParams) => {
  const get = (name: string) => Option.getOrUndefined(UrlParams.getFirst(params, name))
  return {
    responseType: get("response_type"),
    // Unchecked: a client_id of the wrong kind is an unknown client, as before.
    clientId: ClientId.unchecked.make(get("client_id") ?? ""),
    redirectUri: get("redirect_uri") ?? "",
    scope: get("scope"),
    state: get("state"),
    codeChallenge: get("code_challenge"),
    codeChallengeMethod: get("code_challenge_method"),
    decision: get("decision")
  }
}

export const OAuthRoutes = Layer.effectDiscard(Effect.gen(function*() {
  const router = yield* HttpLayerRouter.HttpRouter
  const oauth = yield* OAuth
  const tokens = yield* Tokens

  /** The logged-in user of a browser request (cookie) or an API call (Bearer login token). */
  const loginOf = (request: HttpServerRequest.HttpServerRequest) => {
    return Effect.option(tokens.authenticate(credentialText(credentialOf(request))))
  }

  /**
   * Checks an authorization request. Errors about the client or its redirect URI are shown as a page (we must
   * never redirect to an unverified address); the others go back to the app (RFC 6749 4.1.2.1).
   */
  const validate = (params: ReturnType<typeof authorizationRequest>) =>
    Effect.gen(function*() {
      const app = yield* oauth.clientFor(params.clientId, params.redirectUri)
      const back = (error: string, description: string) =>
        Effect.fail(redirectWith(params.redirectUri, { error, error_description: description, state: params.state }))
      if (params.responseType !== "code") return yield* back("unsupported_response_type", "Only response_type=code is supported.")
      if (params.codeChallengeMethod !== "S256" || !params.codeChallenge || !/^[A-Za-z0-9_-]{43}$/.test(params.codeChallenge)) {
        return yield* back("invalid_request", "PKCE is required: code_challenge with code_challenge_method=S256.")
      }
      const scope = yield* oauth.parseScope(params.scope).pipe(
        Effect.catchTag("OAuthError", (e) => back(e.error, e.description))
      )
      return { app, scope, codeChallenge: params.codeChallenge }
    }).pipe(
      Effect.catchTag("OAuthError", (e) =>
        Effect.fail(page(
          "Authorization error",
          `<h1>This app's request is invalid</h1><p class="error">${escapeHtml(e.description)}</p>` +
            `<p class="muted">Go back to the app and try again, or tell its developer. <a href="/">Go to Atrium</a></p>`,
          400
        )))
    )

  yield* router.add("GET", "/oauth/authorize", Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const params = authorizationRequest(UrlParams.fromInput(new URL(request.url, "http://localhost").searchParams))
    const checked = yield* validate(params)
    const user = yield* loginOf(request)
    if (Option.isNone(user)) {
      return HttpServerResponse.redirect(`/login?next=${encodeURIComponent(request.url)}`, { status: 302 })
    }
    const hidden = Object.entries({
      client_id: params.clientId,
      redirect_uri: params.redirectUri,
      scope: checked.scope,
      state: params.state ?? "",
      code_challenge: checked.codeChallenge,
      code_challenge_method: "S256",
      response_type: "code"
    }).map(([name, value]) => `<input type="hidden" name="${name}" value="${escapeHtml(value)}">`).join("")
    return page(
      `Authorize ${checked.app.name}`,
      `<h1>${escapeHtml(checked.app.name)} wants access to your Atrium account</h1>` +
        `<p class="muted small">Signed in as ${escapeHtml(user.value.phone)}.</p><p>It asks to:</p><ul>` +
        checked.scope.split(" ").map((s) => `<li>${escapeHtml(SCOPE_TEXT[s] ?? s)}</li>`).join("") +
        `</ul><p class="muted small">You go back to ${escapeHtml(new URL(params.redirectUri).host)}, whichever you choose.</p>` +
        `<form method="post" action="/oauth/authorize">${hidden}<div class="row">` +
        `<button name="decision" value="approve">Allow</button>` +
        `<button class="secondary" name="decision" value="deny">Deny</button></div></form>`
    )
  }).pipe(Effect.catchAll(Effect.succeed)))

  yield* router.add("POST", "/oauth/authorize", Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const form = yield* Effect.orElseSucceed(request.urlParamsBody, () => UrlParams.empty)
    const params = authorizationRequest(form)
    const checked = yield* validate(params)
    const user = yield* loginOf(request)
    if (Option.isNone(user)) {
      return HttpServerResponse.unsafeJson(
        { error: { type: "unauthorized", message: "Log in before authorizing an app." } },
        { status: 401 }
      )
    }
    if (params.decision !== "approve") {
      return redirectWith(params.redirectUri, { error: "access_denied", state: params.state })
    }
    const code = yield* oauth.issueCode({
      appId: checked.app.id,
      userId: user.value.userId,
      redirectUri: params.redirectUri,
      scope: checked.scope,
      codeChallenge: checked.codeChallenge
    })
    return redirectWith(params.redirectUri, { code, state: params.state })
  }).pipe(Effect.catchAll(Effect.succeed)))

  yield* router.add("POST", "/oauth/token", Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const form = yield* Effect.orElseSucceed(request.urlParamsBody, () => UrlParams.empty)
    const field = (name: string) => Option.getOrUndefined(UrlParams.getFirst(form, name))
    const basic = request.headers["authorization"]?.match(/^Basic\s+(.+)$/i)?.[1]
    let clientId = field("client_id")
    let clientSecret = field("client_secret")
    if (basic !== undefined) {
      // RFC 6749 2.3.1: both parts are form-urlencoded before base64.
      const decoded = Buffer.from(basic, "base64").toString("utf8")
      const colon = decoded.indexOf(":")
      const decode = (s: string) => {
        try {
          return decodeURIComponent(s.replace(/\+/g, " "))
        } catch {
          return s
        }
      }
      clientId = decode(colon < 0 ? decoded : decoded.slice(0, colon))
      clientSecret = decode(colon < 0 ? "" : decoded.slice(colon + 1))
    }
    return yield* Effect.gen(function*() {
      if (!clientId || !clientSecret) {
        return yield* new OAuthError({ error: "invalid_client", description: "Client authentication is required.", status: 401 })
      }
      const app = yield* oauth.authenticateClient(ClientId.unchecked.make(clientId), clientSecret)
      const grantType = field("grant_type")
      if (!grantType) {
        // RFC 6749 5.2: a missing parameter is invalid_request; unsupported_grant_type is for a type we do not know.
        return yield* new OAuthError({ error: "invalid_request", description: "grant_type is required.", status: 400 })
      }
      if (grantType === "authorization_code") {
        const code = field("code")
        const redirectUri = field("redirect_uri")
        const codeVerifier = field("code_verifier")
        if (!code || !redirectUri || !codeVerifier) {
          return yield* new OAuthError({
            error: "invalid_request",
            description: "code, redirect_uri and code_verifier are required.",
            status: 400
          })
        }
        return oauthJson(yield* oauth.exchangeCode(app, { code, redirectUri, codeVerifier }))
      }
      if (grantType === "refresh_token") {
        const refreshToken = field("refresh_token")
        if (!refreshToken) {
          return yield* new OAuthError({ error: "invalid_request", description: "refresh_token is required.", status: 400 })
        }
        return oauthJson(yield* oauth.refresh(app, refreshToken))
      }
      return yield* new OAuthError({
        error: "unsupported_grant_type",
        description: "Use authorization_code or refresh_token.",
        status: 400
      })
    }).pipe(Effect.catchTag("OAuthError", (e) => Effect.succeed(errorJson(e, basic !== undefined))))
  }))
})).pipe(Layer.provide([OAuth.Default, Tokens.Default]))

/**
 * Where a browser logs in (SMS code) before coming back to `next` (already checked to be a path on this site) when
 * the web app is not built; the built app's `/login` replaces it (src/platform/WebApp.ts).
 */
export const fallbackLoginPage = (next: string) =>
  page(
    "Log in to Atrium",
    `<h1>Log in to Atrium</h1>
<form id="phone-form"><label>Phone (E.164) <input id="phone" name="phone" placeholder="+8613800000000" required></label>
<button>Send code</button></form>
<form id="code-form" hidden><label>Code <input id="code" name="code" inputmode="numeric" maxlength="6" required></label>
<button>Log in</button></form><p id="message" role="status"></p>
<script>
const next = ${JSON.stringify(next).replace(/</g, "\\u003c")};
const say = (text) => { document.getElementById("message").textContent = text };
const post = (path, body) => fetch(path, { method: "POST", headers: { "content-type": "application/json" },
  credentials: "same-origin", body: JSON.stringify(body) }).then(async (r) => ({ ok: r.ok, body: await r.json() }));
document.getElementById("phone-form").onsubmit = async (e) => {
  e.preventDefault();
  const r = await post("/api/auth/sms/sendCode", { phone: document.getElementById("phone").value });
  if (r.ok) { document.getElementById("code-form").hidden = false; say("Code sent.") } else say(r.body.error.message);
};
document.getElementById("code-form").onsubmit = async (e) => {
  e.preventDefault();
  const r = await post("/api/auth/login", { phone: document.getElementById("phone").value, code: document.getElementById("code").value });
  if (r.ok) location.assign(next); else say(r.body.error.message);
};
</script>`
  )


