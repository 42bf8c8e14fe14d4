import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Crypto from "node:crypto"

/**
 * The Content-Security-Policy of every HTML page the platform serves (the web app, its login page, the OAuth consent
 * and fallback login pages, the API reference at `/docs`): each page states it with `pageHeaders` over its own HTML,
 * and the global middleware gives any other HTML answer the same policy without inline scripts (docs/http.md,
 * issue 26 item 7).
 *
 * - Nothing loads from another host: scripts, styles, fonts, images, workers and fetches are this origin's (or
 *   `data:`/`blob:` the page made itself). An injected `<script src=https://evil>` or a beacon goes nowhere.
 * - Inline scripts run only when the platform wrote them: each is allowed by its SHA-256, computed from the page it
 *   renders (the login page's `next`), never from other answers. Inline styles are allowed: React sets style
 *   attributes, and CSS cannot run code. No page compiles WebAssembly or evaluates code (`'wasm-unsafe-eval'`,
 *   `'unsafe-eval'`): the one that did, Scalar's explorer, is gone (docs/web.md).
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

/** The policy of a page with this HTML. */
export const pagePolicy = (html: string): string =>
  [
    "default-src 'self'",
    ["script-src 'self'", ...inlineScriptHashes(html)].join(" "),
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data: blob:",
    "font-src 'self' data:",
    "connect-src 'self'",
    "worker-src 'self' blob:",
    "object-src 'none'",
    "base-uri 'none'",
    "frame-ancestors 'none'"
  ].join("; ")

/** The headers of a page the platform wrote itself (`html`): its policy, `X-Frame-Options` and `nosniff`. */
export const pageHeaders = (html: string): Record<string, string> => ({
  "content-security-policy": pagePolicy(html),
  "x-frame-options": "DENY",
  "x-content-type-options": "nosniff"
})

const isHtml = (response: HttpServerResponse.HttpServerResponse) => {
  const type = response.headers["content-type"] ?? (response.body._tag === "Uint8Array" ? response.body.contentType : "")
  return /^text\/html\b/i.test(type)
}

/**
 * The global middleware's net under every other HTML answer: one that carries no policy of its own gets the page
 * policy with no inline script allowed. A route's own policy stays as it is (the pages above, and the file storage
 * route's `sandbox`, which must never be widened: hashing the inline scripts of an uploaded HTML file would let
 * them run on this origin).
 */
export const withPagePolicy = (response: HttpServerResponse.HttpServerResponse) =>
  !isHtml(response) || response.headers["content-security-policy"] !== undefined
    ? response
    : HttpServerResponse.setHeaders(response, pageHeaders(""))
