import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as Http from "node:http"
import type { Page } from "playwright-core"
import { Browser, CHROMIUM, chromiumAvailable, newPerson } from "./Browser.js"
import { Atrium } from "./support.js"

/**
 * Issue 26 item 7, in Chromium: `/docs`, the login page and the app's pages load nothing from another host, the
 * page policy blocks nothing they need (they render), and another site cannot frame them.
 */

if (!chromiumAvailable) throw new Error(`No Chromium at ${CHROMIUM}: apt-get install chromium (or set CHROMIUM_PATH).`)

const Platform = Layer.merge(Atrium.layer(), Browser.layer)

/** What a page asked for beyond its own origin, and what the policy refused (the console says so). */
const watch = (page: Page, origin: string) => {
  const foreign: Array<string> = []
  const refused: Array<string> = []
  page.on("request", (request) => {
    const url = request.url()
    if (!url.startsWith(origin) && !url.startsWith("data:") && !url.startsWith("blob:")) foreign.push(url)
  })
  page.on("console", (message) => {
    if (/Content Security Policy/i.test(message.text())) refused.push(message.text())
  })
  return { foreign, refused }
}

describe("HTML pages in Chromium", () => {
  it.layer(Platform, { timeout: 180_000 })((it) => {
    it.effect("/docs is the API reference: ≤ 1 MB, every operation, from this origin only; /docs/explorer leads to it", () =>
      Effect.gen(function*() {
        const browser = yield* Browser
        const server = yield* Atrium
        yield* Effect.promise(async () => {
          const context = await newPerson(browser)
          const page = await context.newPage()
          const seen = watch(page, server.url)
          // The reference (issue 48 item 1): at most 1 MB, every operation of the contract (axe, in both themes on both
          // screens: a11y.browser.ts).
          const answer = await page.goto(`${server.url}/docs`, { waitUntil: "networkidle" })
          const bytes = (await answer!.body()).length
          assert.isAtMost(bytes, 1_000_000, `/docs is ${bytes} bytes`)
          await page.getByRole("heading", { name: "Sessions", exact: true }).waitFor()
          await page.getByRole("heading", { name: "POST /v1/sessions/{id}/files" }).waitFor()
          const spec = await (await fetch(`${server.url}/openapi.json`)).json() as { paths: Record<string, Record<string, unknown>> }
          const operations = Object.values(spec.paths).reduce((n, item) => n + Object.keys(item).filter((m) => ["get", "post", "put", "patch", "delete"].includes(m)).length, 0)
          assert.strictEqual(await page.locator("article.operation").count(), operations, "every operation of the contract")
          // Every link of the page leads somewhere: its own anchors name a section of it, its paths answer 200.
          const links = await page.locator("a[href]").evaluateAll((nodes) => nodes.map((node) => (node as unknown as { getAttribute(n: string): string }).getAttribute("href")))
          for (const href of new Set(links)) {
            if (href.startsWith("#")) assert.strictEqual(await page.locator(`[id="${href.slice(1)}"]`).count(), 1, `the anchor ${href}`)
            else assert.strictEqual((await fetch(new URL(href, server.url))).status, 200, `the link ${href}`)
          }
          // Where Scalar's explorer was (dropped: docs/web.md), the reference.
          await page.goto(`${server.url}/docs/explorer`, { waitUntil: "networkidle" })
          assert.strictEqual(new URL(page.url()).pathname, "/docs")
          await page.getByRole("heading", { name: "Sessions", exact: true }).waitFor()
          assert.deepStrictEqual(seen.foreign, [])
          assert.deepStrictEqual(seen.refused, [])
          await context.close()
        })
      }))

    it.effect("the login page and the app render from this origin only; another site cannot frame them", () =>
      Effect.gen(function*() {
        const browser = yield* Browser
        const server = yield* Atrium
        yield* Effect.promise(async () => {
          const context = await newPerson(browser)
          const page = await context.newPage()
          const seen = watch(page, server.url)
          await page.goto(`${server.url}/login?next=/marketplace`, { waitUntil: "networkidle" })
          await page.getByLabel("Phone number").waitFor()
          await page.goto(`${server.url}/marketplace`, { waitUntil: "networkidle" })
          await page.locator("#root *").first().waitFor()
          assert.deepStrictEqual(seen.foreign, [])
          assert.deepStrictEqual(seen.refused, [])
          // A page of another origin framing /docs, /login and /marketplace: the browser refuses to show them.
          const framing = Http.createServer((_, res) => {
            res.writeHead(200, { "content-type": "text/html" }).end(
              ["/docs", "/login", "/marketplace"].map((path) => `<iframe src="${server.url}${path}"></iframe>`).join("")
            )
          })
          await new Promise<void>((resolve) => framing.listen(0, "127.0.0.1", resolve))
          try {
            const framer = await context.newPage()
            await framer.goto(`http://127.0.0.1:${(framing.address() as { port: number }).port}/`, { waitUntil: "load" })
            const frames = framer.frames().slice(1)
            assert.lengthOf(frames, 3)
            for (const frame of frames) assert.match(frame.url(), /^chrome-error:/, "a page of the platform was framed")
          } finally {
            framing.closeAllConnections()
            framing.close()
          }
          await context.close()
        })
      }))
  })
})
