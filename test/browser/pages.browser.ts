import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as Http from "node:http"
import type { Page } from "playwright-core"
import { Browser, CHROMIUM, chromiumAvailable, DESKTOP, newPerson, PHONE } from "./Browser.js"
import { assertAccessible, assertNoHorizontalOverflow, Atrium } from "./support.js"

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
    // Scalar probes whether `new Function` works (and copes when it does not): that probe is not a failure.
    if (/Content Security Policy/i.test(message.text()) && !/unsafe-eval/.test(message.text())) refused.push(message.text())
  })
  return { foreign, refused }
}

describe("HTML pages in Chromium", () => {
  it.layer(Platform, { timeout: 180_000 })((it) => {
    it.effect("/docs is the API reference: ≤ 1 MB, every operation, axe-clean light and dark; the explorer renders from this origin only", () =>
      Effect.gen(function*() {
        const browser = yield* Browser
        const server = yield* Atrium
        yield* Effect.promise(async () => {
          const context = await newPerson(browser)
          const page = await context.newPage()
          const seen = watch(page, server.url)
          // The reference (issue 48 item 1): at most 1 MB, every operation of the contract, axe-clean in both themes.
          const answer = await page.goto(`${server.url}/docs`, { waitUntil: "networkidle" })
          const bytes = (await answer!.body()).length
          assert.isAtMost(bytes, 1_000_000, `/docs is ${bytes} bytes`)
          await page.getByRole("heading", { name: "Sessions", exact: true }).waitFor()
          await page.getByRole("heading", { name: "POST /v1/sessions/{id}/files" }).waitFor()
          const spec = await (await fetch(`${server.url}/openapi.json`)).json() as { paths: Record<string, Record<string, unknown>> }
          const operations = Object.values(spec.paths).reduce((n, item) => n + Object.keys(item).filter((m) => ["get", "post", "put", "patch", "delete"].includes(m)).length, 0)
          assert.strictEqual(await page.locator("article.operation").count(), operations, "every operation of the contract")
          await assertAccessible(page, "/docs (desktop, light)")
          // Each theme on each screen: the colours differ by theme, the layout (tables, long paths) by width.
          for (const [name, viewport, scheme] of [["phone, light", PHONE, "light"], ["phone, dark", PHONE, "dark"], ["desktop, dark", DESKTOP, "dark"]] as const) {
            const other = await newPerson(browser, viewport, scheme)
            const otherPage = await other.newPage()
            await otherPage.goto(`${server.url}/docs`)
            await otherPage.getByRole("heading", { name: "Sessions", exact: true }).waitFor()
            await assertAccessible(otherPage, `/docs (${name})`)
            if (viewport === PHONE) await assertNoHorizontalOverflow(otherPage, `/docs (${name})`)
            await other.close()
          }
          // The interactive explorer (Scalar), opt-in from the reference: it renders from this origin only.
          await page.goto(`${server.url}/docs/explorer`, { waitUntil: "networkidle" })
          await page.getByText("Sessions", { exact: true }).first().waitFor({ timeout: 60_000 })
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
