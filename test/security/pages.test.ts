import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as Crypto from "node:crypto"
import { registerApp } from "../support/Billing.js"
import { type Reply, request } from "../support/Client.js"
import { TestServer } from "../support/TestServer.js"
import { ENV, LIVE, newUser } from "../runs/runs-support.js"

/**
 * Issue 26 item 7: every HTML page has a Content-Security-Policy with `frame-ancestors 'none'` (and no host but its
 * own), `/docs` included, and `/docs` loads nothing from a third-party host. The browser's view of the same pages
 * (what they load, what the policy blocks) is test/browser/pages.browser.ts.
 */

const directives = (policy: string) =>
  new Map(policy.split(";").map((part) => part.trim()).filter((part) => part !== "").map((part) => {
    const [name = "", ...values] = part.split(/\s+/)
    return [name, values] as const
  }))

const inlineScripts = (html: string) =>
  [...html.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/gi)]
    .filter(([, attributes = ""]) => !/\bsrc=/.test(attributes) && !/application\/json/.test(attributes))
    .map(([, , content = ""]) => content)

/** The page's policy: framing refused, only this origin, and each inline script the page runs allowed by its hash. */
const assertPagePolicy = (reply: Reply, what: string) => {
  assert.match(reply.headers.get("content-type") ?? "", /^text\/html/, what)
  const policy = reply.headers.get("content-security-policy")
  assert.isString(policy, `${what}: no Content-Security-Policy`)
  const parsed = directives(policy!)
  assert.deepStrictEqual(parsed.get("frame-ancestors"), ["'none'"], what)
  assert.deepStrictEqual(parsed.get("default-src"), ["'self'"], what)
  assert.deepStrictEqual(parsed.get("object-src"), ["'none'"], what)
  for (const [name, values] of parsed) {
    for (const value of values) {
      assert.match(value, /^('self'|'none'|'unsafe-inline'|'sha256-[A-Za-z0-9+/=]+'|data:|blob:)$/, `${what}: ${name} ${value}`)
    }
  }
  // Scripts: never 'unsafe-inline'; the page's own inline scripts by hash.
  assert.notInclude(parsed.get("script-src") ?? [], "'unsafe-inline'", what)
  assert.notInclude(parsed.get("script-src") ?? [], "'unsafe-eval'", what)
  for (const script of inlineScripts(reply.text)) {
    const hash = `'sha256-${Crypto.createHash("sha256").update(script, "utf8").digest("base64")}'`
    assert.include(parsed.get("script-src") ?? [], hash, `${what}: an inline script without its hash`)
  }
  assert.strictEqual(reply.headers.get("x-frame-options"), "DENY", what)
  assert.strictEqual(reply.headers.get("x-content-type-options"), "nosniff", what)
}

describe("security: HTML pages", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("/docs has the page policy and names no third-party host it would load from; /docs/explorer leads to it", () =>
      Effect.gen(function*() {
        // The reference (platform/http/Reference.ts): no script at all, nothing from elsewhere.
        const reference = yield* request("GET", "/docs")
        assert.strictEqual(reference.status, 200, reference.text.slice(0, 200))
        assertPagePolicy(reference, "/docs")
        assert.notMatch(reference.text, /<script\b/i)
        assert.notMatch(reference.text, /\b(src|href)\s*=\s*["']?(https?:)?\/\//i)
        // Where Scalar's explorer was: a permanent redirect to the reference (the explorer was dropped, docs/web.md).
        const server = yield* TestServer
        const moved = yield* Effect.promise(() => fetch(`${server.url}/docs/explorer`, { redirect: "manual" }))
        assert.strictEqual(moved.status, 301)
        assert.strictEqual(moved.headers.get("location"), "/docs")
      }))

    it.effect("the web app's pages, its login page and the OAuth consent page have the page policy", () =>
      Effect.gen(function*() {
        for (const path of ["/", "/chat", "/marketplace", "/studio", "/wallet", "/keys", "/earnings", "/login?next=/chat"]) {
          const reply = yield* request("GET", path)
          if (reply.status === 503) continue // web/dist not built: the pages are JSON errors, not HTML
          assert.strictEqual(reply.status, 200, `${path}: ${reply.text.slice(0, 200)}`)
          assertPagePolicy(reply, path)
        }
        const owner = yield* newUser
        const app = yield* registerApp(owner.token)
        const query = new URLSearchParams({
          response_type: "code",
          client_id: app.clientId,
          redirect_uri: app.redirectUri,
          scope: "events",
          code_challenge: Crypto.createHash("sha256").update("verifier-0123456789-0123456789-0123456789").digest("base64url"),
          code_challenge_method: "S256"
        })
        const consent = yield* request("GET", `/oauth/authorize?${query}`, { headers: { cookie: `token=${owner.token}` } })
        assert.strictEqual(consent.status, 200, consent.text.slice(0, 300))
        assertPagePolicy(consent, "/oauth/authorize")
      }))
  })

  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("an uploaded HTML file keeps the storage route's sandbox: its inline script is never allowed by hash", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const html = "<!doctype html><script>document.title = 'ran on the platform origin'</script>"
        const bytes = new TextEncoder().encode(html)
        const ticket = yield* request("POST", "/v1/files/upload-url", {
          token: user.token,
          body: { filename: "page.html", content_type: "text/html", size: bytes.length }
        })
        assert.strictEqual(ticket.status, 200, ticket.text)
        const put = yield* Effect.promise(() => fetch(ticket.body.upload_url, { method: "PUT", headers: ticket.body.headers, body: bytes }))
        assert.strictEqual(put.status, 200)
        const file = yield* request("POST", "/v1/files", { token: user.token, body: { upload_id: ticket.body.upload_id } })
        assert.strictEqual(file.status, 201, file.text)
        const record = yield* request("GET", `/v1/files/${file.body.id}`, { token: user.token })
        const download = yield* Effect.promise(() => fetch(record.body.download_url))
        assert.strictEqual(download.status, 200)
        assert.match(download.headers.get("content-type") ?? "", /^text\/html/)
        assert.strictEqual(download.headers.get("content-security-policy"), "sandbox; default-src 'none'")
        yield* Effect.promise(() => download.arrayBuffer())
      }))
  })

  // Without a built web app, /login is the server's own page with an inline script: allowed by its hash only.
  layer(TestServer.layer({ ...ENV, WEB_DIST: "/nonexistent-web-dist" }), LIVE)((it) => {
    it.effect("the fallback login page's inline script is allowed by its hash", () =>
      Effect.gen(function*() {
        const reply = yield* request("GET", "/login?next=/chat")
        assert.strictEqual(reply.status, 200, reply.text.slice(0, 200))
        assert.lengthOf(inlineScripts(reply.text), 1)
        assertPagePolicy(reply, "fallback /login")
      }))
  })
})
