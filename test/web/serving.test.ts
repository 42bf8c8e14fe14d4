import { afterAll, assert, describe, it, layer } from "@effect/vitest"
import { Effect } from "effect"
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { requestAt } from "../support/Client.js"
import { TestServer } from "../support/TestServer.js"

/**
 * How the platform serves the web app (src/platform/WebApp.ts), on a small build made here, so this runs in
 * `npm test` without Vite or a browser: every URL the MCP tools hand out is a page, assets are cached for good,
 * anything else is still the JSON 404, and without a build the pages say so in JSON.
 */

const build = (() => {
  const dir = mkdtempSync(join(tmpdir(), "atrium-web-"))
  mkdirSync(join(dir, "assets"))
  writeFileSync(
    join(dir, "index.html"),
    `<!doctype html><html><head><script type="module" crossorigin src="/assets/app-abc123.js"></script></head>` +
      `<body><div id="root"></div></body></html>`
  )
  writeFileSync(join(dir, "assets", "app-abc123.js"), "console.log('app')")
  return dir
})()
afterAll(() => rmSync(build, { recursive: true, force: true }))

const PAGES = ["/", "/chat", "/chat/some-expert", "/studio", "/admin", "/marketplace", "/earnings", "/wallet", "/keys", "/marketplace/x", "/studio/x", "/creators/usr_x"]

const get = (path: string) => Effect.flatMap(TestServer, (server) => requestAt(server.url, "GET", path))

describe("web app serving", () => {
  it.layer(TestServer.layer({ WEB_DIST: build }))((it) => {
    it.effect("every app page answers the app's index.html, never framed, revalidated", () =>
      Effect.gen(function*() {
        for (const path of PAGES) {
          const reply = yield* get(path)
          assert.strictEqual(reply.status, 200, path)
          assert.include(reply.headers.get("content-type") ?? "", "text/html", path)
          assert.include(reply.text, `<div id="root">`, path)
          assert.strictEqual(reply.headers.get("cache-control"), "no-cache", path)
          assert.strictEqual(reply.headers.get("x-frame-options"), "DENY", path)
        }
      }))

    it.effect("hashed assets are served with their type and cached for good; a missing one is the JSON 404", () =>
      Effect.gen(function*() {
        const asset = yield* get("/assets/app-abc123.js")
        assert.strictEqual(asset.status, 200)
        assert.strictEqual(asset.text, "console.log('app')")
        assert.include(asset.headers.get("content-type") ?? "", "text/javascript")
        assert.include(asset.headers.get("cache-control") ?? "", "immutable")
        const missing = yield* get("/assets/nope.js")
        assert.strictEqual(missing.status, 404)
        assert.deepStrictEqual((missing.body as { error: { type: string } }).error.type, "not_found")
      }))

    it.effect("what is not an app page stays the JSON 404", () =>
      Effect.gen(function*() {
        for (const path of ["/nope", "/chat/a/b", "/studio/x/y", "/index.html"]) {
          const reply = yield* get(path)
          assert.strictEqual(reply.status, 404, path)
          assert.strictEqual((reply.body as { error: { type: string } }).error.type, "not_found", path)
        }
      }))

    it.effect("/login is the app with one inline script: next (checked on the server) and the app's entry", () =>
      Effect.gen(function*() {
        const reply = yield* get(`/login?next=${encodeURIComponent("/chat/x?session=1")}`)
        assert.strictEqual(reply.status, 200)
        assert.include(reply.text, `const next = "/chat/x?session=1";\n`)
        assert.include(reply.text, `import("/assets/app-abc123.js")`)
        assert.strictEqual(reply.text.split("</script>").length, 2, "one script element")
        const offSite = yield* get(`/login?next=${encodeURIComponent("//evil.com/x")}`)
        assert.include(offSite.text, `const next = "/";\n`)
      }))
  })

  // A second block in the same describe starts with `layer`, not `it.layer`: after the first block vitest's shared `it`
  // carries that block's nested `layer`, which would start the first server again (test/support/setupFile.ts).
  layer(TestServer.layer({ WEB_DIST: join(build, "missing") }))((it) => {
    it.effect("without a build the pages answer 503 web_app_not_built, and /login keeps the server-rendered page", () =>
      Effect.gen(function*() {
        const page = yield* get("/studio")
        assert.strictEqual(page.status, 503)
        assert.strictEqual((page.body as { error: { type: string } }).error.type, "web_app_not_built")
        const login = yield* get("/login?next=%2Fstudio")
        assert.strictEqual(login.status, 200)
        assert.include(login.text, "/api/auth/sms/sendCode")
        assert.include(login.text, `const next = "/studio";\n`)
      }))
  })
})
