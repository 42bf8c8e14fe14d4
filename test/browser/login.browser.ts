import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { createHash, randomBytes } from "node:crypto"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import type { Page } from "playwright-core"
import { Browser, logIn, newPerson, tokenOf } from "./Browser.js"
import {
  Atrium,
  api,
  assertAccessible,
  BUYER_CODE,
  BUYER_PHONE,
  checkPrerequisites,
  CREATOR_CODE,
  CREATOR_PHONE,
  OPERATOR_CODE,
  OPERATOR_PHONE,
  person,
  Platform,
  publishedExpert
} from "./support.js"

/**
 * Logging in as a person meets it beyond the login page itself: an app asking for access through OAuth (the
 * consent page), and a second login while other tabs, or another browser, are still open (issue 27 item 7).
 */

checkPrerequisites()

/**
 * The app's callback, a server of the test's own: the browser lands on a real page there, as with a real app.
 * (A callback nobody listens on ends on Chromium's error page, a navigation that can interrupt the test's next one.)
 */
const callbackServer = () =>
  new Promise<{ url: string; close: () => void }>((resolve) => {
    const server = createServer((_request, response) => {
      response.writeHead(200, { "content-type": "text/html" })
      response.end("<!doctype html><title>Budget Buddy</title>")
    })
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      resolve({ url: `http://127.0.0.1:${port}/callback`, close: () => server.close() })
    })
  })

const answer = async (page: Page, text: string) => {
  const box = page.getByRole("textbox", { name: "Message" })
  await box.fill(text)
  await box.press("Enter")
  await page.waitForFunction((said) =>
    [...document.querySelectorAll("[data-testid=answer]")].some((a) => a.textContent === said), `You said: ${text}`, { timeout: 30_000 })
}

describe("web app in Chromium: login, OAuth consent, other tabs", () => {
  it.layer(Platform, { timeout: 180_000 })((it) => {
    it.effect("OAuth consent: authorize → login → the styled consent page → Allow → back with a code that the app exchanges; Deny", () =>
      Effect.gen(function*() {
        const { url: base } = yield* Atrium
        const browser = yield* Browser
        yield* Effect.promise(async () => {
          const callback = await callbackServer()
          const CALLBACK = callback.url
          const developer = await person(browser, base, { phone: CREATOR_PHONE, code: CREATOR_CODE })
          const app = await api(base, developer.token, "POST", "/api/apps", { name: "Budget Buddy", redirect_uris: [CALLBACK] })
          await developer.context.close()

          const context = await newPerson(browser)
          const page = await context.newPage()
          page.setDefaultTimeout(20_000)
          const verifier = randomBytes(32).toString("base64url")
          const authorize = `${base}/oauth/authorize?${new URLSearchParams({
            response_type: "code",
            client_id: app.client_id,
            redirect_uri: CALLBACK,
            scope: "events",
            state: "st4te",
            code_challenge: createHash("sha256").update(verifier).digest("base64url"),
            code_challenge_method: "S256"
          })}`
          // Not logged in: the app's login page first, then back to the request.
          await page.goto(authorize)
          await page.waitForURL(/\/login\?next=/)
          await logIn(page, BUYER_PHONE, BUYER_CODE)
          await page.getByRole("heading", { name: "Budget Buddy wants access to your Atrium account" }).waitFor()
          await page.getByText("Charge your credits for what you use in the app").waitFor()
          await page.getByText(`Signed in as ${BUYER_PHONE}.`).waitFor()
          // Styled like the app: its header, a card, the accent-coloured primary button.
          await page.getByRole("link", { name: "Atrium" }).waitFor()
          const look = await page.evaluate(() => {
            const g = globalThis as unknown as { document: { querySelector(s: string): unknown }; getComputedStyle(e: unknown): { backgroundColor: string; borderRadius: string } }
            return {
              allow: g.getComputedStyle(g.document.querySelector("button[value=approve]")).backgroundColor,
              card: g.getComputedStyle(g.document.querySelector(".card")).borderRadius
            }
          })
          assert.deepStrictEqual(look, { allow: "rgb(59, 79, 216)", card: "10px" })
          await assertAccessible(page, "the OAuth consent page")

          // The browser is sent to the app's callback (nothing listens there: the request is what counts).
          const allowed = page.waitForRequest((request) => request.url().startsWith(CALLBACK))
          await page.getByRole("button", { name: "Allow" }).click()
          const back = new URL((await allowed).url())
          await page.waitForURL((url) => url.href.startsWith(CALLBACK))
          assert.strictEqual(back.searchParams.get("state"), "st4te")
          const code = back.searchParams.get("code")
          assert.isString(code)
          const tokens = await fetch(`${base}/oauth/token`, {
            method: "POST",
            headers: { "content-type": "application/x-www-form-urlencoded" },
            body: new URLSearchParams({
              grant_type: "authorization_code",
              code: code!,
              redirect_uri: CALLBACK,
              code_verifier: verifier,
              client_id: app.client_id,
              client_secret: app.client_secret
            })
          })
          assert.strictEqual(tokens.status, 200, await tokens.clone().text())
          assert.strictEqual(((await tokens.json()) as { scope: string }).scope, "events")

          // Asked again, the person says no: the app hears access_denied.
          await page.goto(authorize)
          const denied = page.waitForRequest((request) => request.url().startsWith(CALLBACK))
          await page.getByRole("button", { name: "Deny" }).click()
          assert.strictEqual(new URL((await denied).url()).searchParams.get("error"), "access_denied")
          await page.waitForURL((url) => url.href.startsWith(CALLBACK))
          await context.close()
          callback.close()
        })
      }))

    it.effect("a new login in another tab: this tab goes on with it; another browser's login ends this one, said in words, and logging in again continues here", () =>
      Effect.gen(function*() {
        const { url: base } = yield* Atrium
        const browser = yield* Browser
        yield* Effect.promise(async () => {
          const creator = await person(browser, base, { phone: CREATOR_PHONE, code: CREATOR_CODE })
          const id = await publishedExpert(base, creator.token, { name: "Tab Expert" })
          await creator.context.close()

          const { context, page } = await person(browser, base, { phone: OPERATOR_PHONE, code: OPERATOR_CODE }, { credits: 20 })
          await page.goto(`${base}/chat/${id}`)
          await answer(page, "first")
          const firstToken = await tokenOf(context)

          // The same person logs in again in a second tab of the same browser.
          const second = await context.newPage()
          await second.goto(`${base}/login`)
          await logIn(second, OPERATOR_PHONE, OPERATOR_CODE)
          await second.waitForURL(`${base}/`)
          assert.notStrictEqual(await tokenOf(context), firstToken, "a new login token")
          // The first tab goes on, with nothing to do.
          await page.bringToFront()
          await answer(page, "second")
          assert.strictEqual(await page.getByTestId("login-ended").count(), 0)
          await second.close()

          // Another browser (another device) logs in: one login at a time, so this one ends, and says so.
          const elsewhere = await newPerson(browser)
          const other = await elsewhere.newPage()
          await other.goto(`${base}/login`)
          await logIn(other, OPERATOR_PHONE, OPERATOR_CODE)
          await other.waitForURL(`${base}/`)
          await elsewhere.close()
          const box = page.getByRole("textbox", { name: "Message" })
          await box.fill("third")
          await box.press("Enter")
          const ended = page.getByTestId("login-ended")
          await ended.getByText(/Your login here has ended/).waitFor()
          await ended.getByRole("link", { name: "Log in again" }).click()
          await page.waitForURL(/\/login\?next=/)
          await logIn(page, OPERATOR_PHONE, OPERATOR_CODE)
          await page.waitForURL((url) => url.pathname === `/chat/${id}`)
          await answer(page, "fourth")
          assert.strictEqual(await page.getByTestId("login-ended").count(), 0)
          await context.close()
        })
      }))
  })
})
