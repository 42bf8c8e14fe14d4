import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { existsSync } from "node:fs"
import type { Page } from "playwright-core"
import { requestAt } from "../support/Client.js"
import { TEST_CODE, TEST_PHONE, TestServer } from "../support/TestServer.js"
import { Browser, CHROMIUM, chromiumAvailable, logIn, newPerson, tokenOf, userIdOfToken } from "./Browser.js"

/**
 * The web app end to end, in Debian's Chromium, as people use it: a creator logs in, builds and tests an expert
 * in the studio (streaming, a tool approval, an interrupt, a reload mid-turn), publishes it; the review desk
 * approves it; a buyer finds it in the marketplace and unlocks it; the creator's earnings grow.
 */

/**
 * The page's `document`, as far as the predicates below use it: they run in the browser (`waitForFunction`), while
 * this file is typechecked for Node, without the DOM library.
 */
interface PageNode { readonly textContent: string | null }
declare const document: {
  querySelector(selector: string): PageNode | null
  querySelectorAll(selector: string): ArrayLike<PageNode> & Iterable<PageNode>
}

const INTERNAL_TOKEN = "test-internal-token-0123456789abcdef"
const BUYER_PHONE = "+8613900000001"
const BUYER_CODE = "654321"

const Platform = Layer.merge(
  TestServer.layer({
    INTERNAL_TOKEN,
    SMS_TEST_OTP: `${TEST_PHONE}=${TEST_CODE},${BUYER_PHONE}=${BUYER_CODE}`
  }),
  Browser.layer
)

/** The text of the conversation's last answer. */
const lastAnswer = (page: Page) => page.getByTestId("answer").last()

/** Waits until the page satisfies `predicate` (run in the page); the failure names what was awaited. */
const until = async (page: Page, what: string, predicate: () => boolean) => {
  try {
    await page.waitForFunction(predicate, undefined, { timeout: 60_000 })
  } catch (error) {
    throw new Error(`waited in vain for: ${what}\n${String(error)}`)
  }
}

/** 100 credits from the review desk's side of the platform (an internal route: the private network and its token). */
const grant = async (base: string, userId: string) => {
  const reply = await fetch(`${base}/internal/wallets/${userId}/grants`, {
    method: "POST",
    headers: { authorization: `Bearer ${INTERNAL_TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify({ amount: 100, idempotency_key: crypto.randomUUID(), reason: "browser test" })
  })
  assert.strictEqual(reply.status, 200, await reply.text())
}

if (!existsSync("web/dist/index.html")) {
  throw new Error("The web app is not built: run `npm run build:web` (npm ci does it) before `npm run test:browser`.")
}
if (!chromiumAvailable) throw new Error(`No Chromium at ${CHROMIUM}: apt-get install chromium (or set CHROMIUM_PATH).`)

describe("web app in Chromium", () => {
  it.layer(Platform, { timeout: 300_000 })((it) => {
    it.effect("a creator builds, tests and publishes an expert; a buyer finds and unlocks it; earnings grow", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const browser = yield* Browser
        yield* Effect.promise(async () => {
          const base = server.url
          // --- The creator logs in from a page that needs a login, and comes back to it.
          const creator = await newPerson(browser)
          const page = await creator.newPage()
          page.setDefaultTimeout(20_000)
          page.on("pageerror", (error) => console.error("page error:", error))
          await page.goto(`${base}/studio`)
          await page.waitForURL(/\/login\?next=%2Fstudio$/)
          await logIn(page, TEST_PHONE, TEST_CODE)
          await page.waitForURL(`${base}/studio`)
          const creatorToken = await tokenOf(creator)
          await grant(base, userIdOfToken(creatorToken))

          // --- Studio: create and configure an expert.
          await page.getByLabel("New expert's name").fill("Tax Helper")
          await page.getByLabel("Category").selectOption("business")
          await page.getByRole("button", { name: "Create expert" }).click()
          await page.waitForURL(/\/studio\/tax-helper/)
          const id = new URL(page.url()).pathname.split("/")[2]!
          await page.getByLabel("Description").fill("Answers questions about taxes, with a calculator.")
          await page.getByLabel("Instructions").fill("Be precise. Use the calculator for arithmetic.")
          await page.getByLabel("Opening message").fill("Hello! Ask me about your taxes.")
          await page.getByLabel("calculator: ask").check()
          await page.getByRole("button", { name: "Add an example" }).click()
          await page.getByLabel("Example 1 question").fill("What is 2+2?")
          await page.getByLabel("Example 1 answer").fill("4")
          await page.getByLabel("Billing").selectOption("UNLOCK")
          await page.getByLabel("Price (credits)").fill("5")
          await page.getByLabel("Free trial conversations per person").fill("2")
          // Remote tools are JSON: a typo is said plainly and nothing is saved.
          await page.getByLabel("MCP servers (JSON)").fill("[{name: search}]")
          await page.getByRole("button", { name: "Save draft" }).click()
          await page.getByText("MCP servers: not valid JSON").waitFor()
          await page.getByLabel("MCP servers (JSON)").fill("[]")
          await page.getByRole("button", { name: "Save draft" }).click()
          await page.getByText("Saved.").waitFor()

          // --- Test chat on the draft: the answer streams.
          await page.getByRole("link", { name: "Test chat" }).click()
          await page.waitForURL(`${base}/chat/${id}`)
          await page.getByText("Hello! Ask me about your taxes.").waitFor()
          const message = page.getByRole("textbox", { name: "Message" })
          await message.fill("hello there")
          await message.press("Enter")
          await until(page, "the echo", () => document.querySelector("[data-testid=answer]")?.textContent === "You said: hello there")
          await page.waitForURL(new RegExp(`/chat/${id}\\?session=`))

          // Streaming: part of a slow answer is on the page while the turn still runs (the Stop button).
          await message.fill("/slow 400")
          await message.press("Enter")
          await until(page, "a partial slow answer", () => {
            const answers = document.querySelectorAll("[data-testid=answer]")
            return answers.length === 2 && (answers[1]!.textContent ?? "").startsWith("chunk 1 chunk 2 ")
          })
          const stop = page.getByRole("button", { name: "Stop" })
          assert.isTrue(await stop.isVisible(), "a running turn offers Stop")
          // --- Interrupt.
          await stop.click()
          await page.getByText("You stopped this answer.").waitFor()
          assert.isFalse(await stop.isVisible())
          const cut = (await lastAnswer(page).textContent()) ?? ""
          assert.isBelow(cut.split("chunk").length - 1, 400, "the answer was cut short")

          // --- A tool call that asks first: approve it by clicking.
          await message.fill(`/tool calculator {"expression":"6*7"}`)
          await message.press("Enter")
          const approve = page.getByRole("button", { name: "Approve" })
          await approve.waitFor()
          await page.getByRole("group", { name: "Approve the tool calculator?" }).getByText("6*7").waitFor()
          await approve.click()
          await until(page, "the tool's result in the answer", () =>
            [...document.querySelectorAll("[data-testid=answer]")].some((a) => (a.textContent ?? "").includes("calculator returned")))
          assert.strictEqual(await page.getByTestId("tool-status").last().textContent(), "completed")
          assert.isFalse(await approve.isVisible())

          // --- Reload in the middle of a turn: it completes, with nothing missing or repeated.
          await message.fill("/slow 30")
          await message.press("Enter")
          await until(page, "the slow answer under way", () =>
            (document.querySelectorAll("[data-testid=answer]")[3]?.textContent ?? "").includes("chunk 3 "))
          await page.reload()
          await until(page, "the slow answer finished after the reload", () =>
            (document.querySelectorAll("[data-testid=answer]")[3]?.textContent ?? "").includes("chunk 30 ") &&
            !document.querySelector("[aria-busy=true]"))
          const expected = Array.from({ length: 30 }, (_, i) => `chunk ${i + 1} `).join("")
          assert.strictEqual(await page.getByTestId("answer").nth(3).textContent(), expected)
          // The opening message and four turns, each once, the user's messages included.
          assert.strictEqual(await page.locator("ol.turns > li").count(), 5)
          assert.strictEqual(await page.locator(".bubble.user").filter({ hasText: /^You: \/slow 30$/ }).count(), 1)
          assert.strictEqual(await page.locator(".bubble.user").filter({ hasText: /^You: hello there$/ }).count(), 1)

          // --- Earnings before any sale.
          await page.goto(`${base}/earnings`)
          await page.getByTestId("earnings-total").getByText("0 credits").waitFor()

          // --- Publish, and the review desk approves.
          await page.goto(`${base}/studio/${id}`)
          await page.getByRole("button", { name: "Publish" }).click()
          await page.getByText("Version 1 submitted for review.").waitFor()
          await page.getByTestId("submission").getByText(/waiting for review/).waitFor()
          const agent = await Effect.runPromise(requestAt(base, "GET", `/v1/agents/${id}`, { token: creatorToken }))
          const submissionId = (agent.body as { pending_submission: { id: string } }).pending_submission.id
          const review = await fetch(`${base}/internal/reviews/${submissionId}/approve`, {
            method: "POST",
            headers: { authorization: `Bearer ${INTERNAL_TOKEN}` }
          })
          assert.strictEqual(review.status, 200, await review.text())
          await page.reload()
          await page.getByTestId("submission").getByText("Published: version 1").waitFor()

          // --- A buyer, in another browser context, finds it in the marketplace and unlocks it.
          const buyer = await newPerson(browser)
          const shop = await buyer.newPage()
          await shop.goto(`${base}/marketplace`)
          // On a page load the first Tab stop is "Skip to content".
          await shop.getByRole("link", { name: "Tax Helper" }).waitFor()
          await shop.keyboard.press("Tab")
          assert.strictEqual(await shop.evaluate(() => (globalThis as unknown as { document: { activeElement: PageNode | null } }).document.activeElement?.textContent), "Skip to content")
          await shop.getByLabel("Search experts").fill("taxes")
          await shop.getByRole("button", { name: "Search" }).click()
          await shop.getByRole("link", { name: "Tax Helper" }).click()
          await shop.waitForURL(`${base}/marketplace/${id}`)
          await shop.getByTestId("price").getByText("5 credits to unlock").waitFor()
          await shop.getByRole("link", { name: "Log in" }).click()
          await shop.waitForURL(new RegExp(`/login\\?next=%2Fmarketplace%2F${id}$`))
          // Keyboard only: after a navigation the focus is on the page's content, so Tab reaches the phone field; the
          // forms send with Enter; the code field takes the focus when it appears.
          await shop.keyboard.press("Tab")
          assert.isTrue(await shop.getByLabel("Phone number").evaluate((element) => element === (globalThis as unknown as { document: { activeElement: unknown } }).document.activeElement))
          await shop.keyboard.type(BUYER_PHONE)
          await shop.keyboard.press("Enter")
          await shop.getByLabel("Code", { exact: true }).waitFor()
          await shop.keyboard.type(BUYER_CODE)
          await shop.keyboard.press("Enter")
          await shop.waitForURL(`${base}/marketplace/${id}`)
          await grant(base, userIdOfToken(await tokenOf(buyer)))
          await shop.reload()
          const credits = (text: string | null) => Number((text ?? "").replace(/[^\d.]/g, ""))
          await until(shop, "the granted balance", () => /\d/.test(document.querySelector("[data-testid=balance]")?.textContent ?? ""))
          const before = credits(await shop.getByTestId("balance").textContent())
          assert.isAtLeast(before, 100)
          await shop.getByRole("button", { name: "Unlock for 5 credits" }).click()
          await shop.getByText(`Unlocked for 5 credits. Balance: ${before - 5} credits.`).waitFor()
          await shop.getByTestId("balance").getByText(`${before - 5} credits`).waitFor()

          // --- The creator's earnings grew.
          await page.goto(`${base}/earnings`)
          await page.getByRole("cell", { name: id, exact: true }).waitFor()
          const total = (await page.getByTestId("earnings-total").textContent()) ?? ""
          assert.isAbove(Number(total.replace(/[^\d.]/g, "")), 0, total)
          await page.getByRole("img", { name: /Earnings over time, 1 entries/ }).waitFor()

          await buyer.close()
          await creator.close()
        })
      }))
  })
})
