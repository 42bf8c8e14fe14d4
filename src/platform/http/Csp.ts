import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Crypto from "node:crypto"

/**
 * The Content-Security-Policy of every HTML page the platform serves (the web app, its login page, the OAuth consent
 * and fallback login pages, the API reference at `/docs`), set in one place: the global middleware gives it to any
 * `text/html` answer (docs/http.md, issue 26 item 7).
 *
 * - Nothing loads from another host: scripts, styles, fonts, images, workers and fetches are this origin's (or
 *   `data:`/`blob:` the page made itself). An injected `<script src=https://evil>` or a beacon goes nowhere.
 * - Inline scripts run only when the page itself carries them: each is allowed by its SHA-256, computed from the
 *   answer (the login page's `next`, Scalar's bundle and its configuration at `/docs`). Inline styles are allowed:
 *   React and Scalar set style attributes, and CSS cannot run code.
 * - `frame-ancestors 'none'` (and `X-Frame-Options: DENY` for old browsers): no page is framed (clickjacking).
 * - No `form-action`: the consent form's answer is a redirect to the app's own `redirect_uri`, another origin, which
 *   browsers check against `form-action` too.
 */

const INLINE_SCRIPT = /<script\b([^>]*)>([\s\S]*?)<\/script\s*>/gi

/** `'sha256-…'` of each inline script the browser would run (not `src=` ones, not JSON data blocks). */
export const inlineScriptHashes = (html: string): Array<string> => {
  const hashes = new Set<string>()
  for (const [, attributes = "", content = ""] of html.matchAll(INLINE_SCRIPT)) {
    if (/\bsrc\s*=/i.test(attributes)) continue
    const type = /\btype\s*=\s*["']?([^"'\s>]+)/i.exec(attributes)?.[1]?.toLowerCase()
    if (type !== undefined && type !== "module" && !/javascript|ecmascript/.test(type)) continue
    hashes.add(`'sha256-${Crypto.createHash("sha256").update(content, "utf8").digest("base64")}'`)
  }
  return [...hashes]
}

/**
 * The policy of a page with this HTML. `wasm`: the page compiles WebAssembly (Scalar's reference at `/docs` does),
 * which `'wasm-unsafe-eval'` allows without allowing JavaScript's `eval`.
 */
export const pagePolicy = (html: string, wasm = false): string =>
  [
    "default-src 'self'",
    ["script-src 'self'", ...(wasm ? ["'wasm-unsafe-eval'"] : []), ...inlineScriptHashes(html)].join(" "),
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data: blob:",
    "font-src 'self' data:",
    "connect-src 'self'",
    "worker-src 'self' blob:",
    "object-src 'none'",
    "base-uri 'none'",
    "frame-ancestors 'none'"
  ].join("; ")

/** Computed once per answer body: `/docs` and the app's pages answer the same body every time. */
const policies = new WeakMap<object, string>()

const isHtml = (response: HttpServerResponse.HttpServerResponse) => {
  const type = response.headers["content-type"] ?? (response.body._tag === "Uint8Array" ? response.body.contentType : "")
  return /^text\/html\b/i.test(type)
}

/**
 * An HTML answer with the page policy (replacing a narrower one a route set), `X-Frame-Options` and `nosniff`. An
 * HTML answer whose body is not in memory (a stream) gets the policy without inline-script hashes.
 */
export const withPagePolicy = (response: HttpServerResponse.HttpServerResponse, wasm = false) => {
  if (!isHtml(response)) return response
  let policy: string
  if (response.body._tag === "Uint8Array") {
    const body = response.body
    policy = policies.get(body) ?? pagePolicy(new TextDecoder().decode(body.body), wasm)
    policies.set(body, policy)
  } else {
    policy = pagePolicy("", wasm)
  }
  return HttpServerResponse.setHeaders(response, {
    "content-security-policy": policy,
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff"
  })
}
