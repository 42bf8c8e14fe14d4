import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import type { Page } from "playwright-core"
import { Browser, newPerson } from "./Browser.js"
import {
  Atrium,
  api,
  assertNoJargon,
  BUYER_PHONE,
  checkPrerequisites,
  CREATOR_CODE,
  CREATOR_PHONE,
  OPERATOR_CODE,
  OPERATOR_PHONE,
  person,
  Platform
} from "./support.js"

/**
 * Issue 27 item 5: every form walked with bad input. Each refusal is said in words (an alert), and no page ever
 * shows the text of a schema (`Schema`, `declaration`, `Expected`, `└─`).
 */

checkPrerequisites()

/** Does `act`, waits for the page's alert, and checks the whole page for schema text; the alert's words. */
const refused = async (page: Page, act: () => Promise<void>) => {
  await act()
  const alert = page.getByRole("alert").filter({ hasText: /\w/ }).first()
  await alert.waitFor()
  await assertNoJargon(page)
  const text = (await alert.textContent()) ?? ""
  assert.isAbove(text.trim().length, 10, "a sentence")
  return text
}

describe("web app in Chromium: every form with bad input", () => {
  it.layer(Platform, { timeout: 180_000 })((it) => {
    it.effect("login, wallet, marketplace search, studio (fields, remote tools, JSON), chat rename and the review console: refusals in words, never schema text", () =>
      Effect.gen(function*() {
        const { url: base } = yield* Atrium
        const browser = yield* Browser
        yield* Effect.promise(async () => {
          // --- Login: a phone that is not one, then a code that is not one.
          const guest = await newPerson(browser)
          const login = await guest.newPage()
          login.setDefaultTimeout(20_000)
          await login.goto(`${base}/login`)
          await refused(login, async () => {
            await login.getByLabel("Phone number").fill("12345")
            await login.getByRole("button", { name: "Send code" }).click()
          })
          await login.getByLabel("Phone number").fill(BUYER_PHONE)
          await login.getByRole("button", { name: "Send code" }).click()
          await login.getByLabel("Code", { exact: true }).fill("12ab")
          await refused(login, () => login.getByRole("button", { name: "Log in" }).click())
          await guest.close()

          const { context, page, token } = await person(browser, base, { phone: CREATOR_PHONE, code: CREATOR_CODE }, { credits: 50 })
          // --- Wallet: words, a negative amount, too many decimals.
          for (const amount of ["ten", "-5", "1.1234567"]) {
            await page.goto(`${base}/wallet`)
            await refused(page, async () => {
              await page.getByLabel("Top-up amount (credits)").fill(amount)
              await page.getByRole("button", { name: "Top up" }).click()
            })
          }
          // --- Marketplace: a keyword longer than the search takes.
          await page.goto(`${base}/marketplace`)
          await refused(page, async () => {
            await page.getByLabel("Search experts").fill("x".repeat(150))
            await page.getByRole("button", { name: "Search" }).click()
          })

          // --- Studio: a price that is not a number, a negative price (trials below zero are the browser's own check), an unknown subagent, a bad MCP URL, bad JSON.
          const created = await api(base, token, "POST", "/v1/agents", { name: "Form Expert", category: "business" })
          const studio = `${base}/studio/${created.identifier}`
          const save = () => page.getByRole("button", { name: "Save draft" }).click()
          await page.goto(studio)
          await page.getByLabel("Billing").selectOption("UNLOCK")
          await page.getByLabel("Price (credits)").fill("five")
          await refused(page, save)
          await page.goto(studio)
          await page.getByLabel("Billing").selectOption("UNLOCK")
          await page.getByLabel("Price (credits)").fill("-3")
          await refused(page, save)
          await page.goto(studio)
          await page.getByLabel(/Subagents/).fill("no-such-expert-anywhere")
          await refused(page, save)
          await page.goto(studio)
          await page.getByRole("button", { name: "Add an MCP server" }).click()
          await page.getByLabel("Server 1 name").fill("search")
          await page.getByLabel("Server 1 URL").fill("not a url")
          await refused(page, save)
          await page.goto(studio)
          await page.getByRole("button", { name: "Edit as JSON (advanced)" }).click()
          await page.getByLabel("MCP servers (JSON)").fill("[{ nope")
          await refused(page, () => page.getByRole("button", { name: "Back to the form" }).click())
          // JSON that parses but is not a server list: said in words (it used to break the page).
          await page.getByLabel("MCP servers (JSON)").fill(`[{"name": 7, "url": "https://x.example/mcp", "auth": "magic", "tools": "all"}]`)
          assert.match(await refused(page, () => page.getByRole("button", { name: "Back to the form" }).click()), /"name" must be text/)
          await page.getByLabel("MCP servers (JSON)").fill(`[{"name": "search", "url": "https://x.example/mcp", "auth": "magic", "tools": []}]`)
          assert.match(await refused(page, () => page.getByRole("button", { name: "Back to the form" }).click()), /"auth" must be/)
          // A good list goes back to the form; the platform then judges the server (unreachable or not, in words).
          await page.getByLabel("MCP servers (JSON)").fill(`[{"name": "search", "url": "https://x.example/mcp", "auth": "none", "tools": [{"name": "find"}]}]`)
          await page.getByRole("button", { name: "Back to the form" }).click()
          assert.strictEqual(await page.getByLabel("Server 1 URL").inputValue(), "https://x.example/mcp")
          assert.strictEqual(await page.getByLabel("Permission of tool 1").inputValue(), "ask")
          await assertNoJargon(page)

          // --- Chat: a title that is only spaces clears it; a long one is cut by the field, never refused in schema words.
          await page.goto(`${base}/chat/${created.identifier}?new=1`)
          const box = page.getByRole("textbox", { name: "Message" })
          await box.fill("hello")
          await box.press("Enter")
          await page.waitForURL(/session=/)
          const sidebar = page.getByRole("navigation", { name: "Conversations" })
          await sidebar.getByRole("button", { name: /^Rename “hello/ }).click()
          await sidebar.getByLabel(/New title of/).fill("t".repeat(250))
          await sidebar.getByRole("button", { name: "Save title" }).click()
          await page.waitForFunction((title) =>
            [...document.querySelectorAll(".conversation-title")].some((t) => t.textContent === title), "t".repeat(200))
          await assertNoJargon(page)
          await context.close()

          // --- Review console: rejecting without a reason.
          const operator = await person(browser, base, { phone: OPERATOR_PHONE, code: OPERATOR_CODE })
          await api(base, token, "PATCH", `/v1/agents/${created.identifier}`, { description: "For the forms test." })
          await api(base, token, "POST", `/v1/agents/${created.identifier}/publish`)
          await operator.page.goto(`${base}/admin`)
          await operator.page.getByRole("button", { name: "Review Form Expert" }).click()
          await refused(operator.page, () => operator.page.getByRole("button", { name: /^Reject/ }).first().click())
          await operator.context.close()
        })
      }))
  })
})
