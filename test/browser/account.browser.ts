import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { Browser, newPerson } from "./Browser.js"
import {
  Atrium,
  assertAccessible,
  assertNoJargon,
  BUYER_CODE,
  BUYER_PHONE,
  checkPrerequisites,
  CREATOR_CODE,
  CREATOR_PHONE,
  person,
  Platform,
  publishedExpert,
  until
} from "./support.js"

/**
 * Logging in, the wallet, the words of failures, and a trial that runs out: each flow as a person meets it, in
 * Debian's Chromium (issue 27: every defect found by trying the app has its test here).
 */

checkPrerequisites()

const credits = (text: string | null) => Number((text ?? "").replace(/[^\d.]/g, ""))


describe("web app in Chromium: account", () => {
  it.layer(Platform, { timeout: 180_000 })((it) => {
    it.effect("login: bad input in words; asking again within 60 s shows a countdown and still takes the code", () =>
      Effect.gen(function*() {
        const { url: base } = yield* Atrium
        const browser = yield* Browser
        yield* Effect.promise(async () => {
          const context = await newPerson(browser)
          const page = await context.newPage()
          page.setDefaultTimeout(20_000)
          await page.goto(`${base}/login`)
          await page.getByLabel("Phone number").fill("12345")
          await page.getByRole("button", { name: "Send code" }).click()
          await page.getByRole("alert").getByText(/Phone number is not valid/).waitFor()
          await assertNoJargon(page)

          await page.getByLabel("Phone number").fill(BUYER_PHONE)
          await page.getByRole("button", { name: "Send code" }).click()
          await page.getByLabel("Code", { exact: true }).waitFor()
          // A reload forgets the page's state; the code sent moments ago is still good.
          await page.reload()
          await page.getByLabel("Phone number").fill(BUYER_PHONE)
          await page.getByRole("button", { name: "Send code" }).click()
          await page.getByTestId("resend-countdown").getByText(/You can ask for a new code in \d+ s/).waitFor()
          assert.isTrue(await page.getByRole("button", { name: /Send again in \d+ s/ }).isDisabled())
          await page.getByLabel("Code", { exact: true }).fill("000000")
          await page.getByRole("button", { name: "Log in" }).click()
          await page.getByRole("alert").waitFor()
          await assertNoJargon(page)
          await page.getByLabel("Code", { exact: true }).fill(BUYER_CODE)
          await page.getByRole("button", { name: "Log in" }).click()
          await page.waitForURL(`${base}/`)
          await context.close()
        })
      }))

    it.effect("wallet: a top-up through the test provider's checkout reaches the balance, a declined one does not; a bad amount is said in words", () =>
      Effect.gen(function*() {
        const { url: base } = yield* Atrium
        const browser = yield* Browser
        yield* Effect.promise(async () => {
          const { context, page } = await person(browser, base, { phone: CREATOR_PHONE, code: CREATOR_CODE })
          await page.goto(`${base}/wallet`)
          await until(page, "the balance", () => /\d/.test(document.querySelector("[data-testid=wallet-balance]")?.textContent ?? ""))
          const before = credits(await page.getByTestId("wallet-balance").textContent())
          const amount = page.getByLabel("Top-up amount (credits)")
          await amount.fill("ten")
          await page.getByRole("button", { name: "Top up" }).click()
          await page.getByRole("alert").getByText(/Amount is not valid/).waitFor()
          await assertNoJargon(page)
          // Too large is said as too large (it was "at most 6 decimal places").
          await amount.fill("10000000000000")
          await page.getByRole("button", { name: "Top up" }).click()
          await page.getByRole("alert").getByText(/^Amount is too large/).waitFor()
          // A fresh install tops up with the test payment provider (on by default outside production): the wallet
          // goes to its checkout page, which completes the order the way a provider's callback does.
          await amount.fill("100")
          await page.getByRole("button", { name: "Top up" }).click()
          await page.waitForURL(/\/checkout\?order=ord_/)
          await page.getByTestId("checkout-amount").getByText("100 credits", { exact: true }).waitFor()
          await assertAccessible(page, "the test provider's checkout")
          await page.getByRole("button", { name: "Pay 100 credits" }).click()
          await page.getByRole("status").getByText(/^Paid\. 100 credits were added/).waitFor()
          await page.getByTestId("balance").getByText(`${before + 100} credits`, { exact: true }).waitFor()
          await page.getByRole("link", { name: "Back to the wallet" }).click()
          await page.getByTestId("wallet-balance").getByText(`${before + 100} credits`, { exact: true }).waitFor()
          // Declined: nothing is credited, and the order can be tried again.
          await amount.fill("7")
          await page.getByRole("button", { name: "Top up" }).click()
          await page.waitForURL(/\/checkout\?order=ord_/)
          await page.getByRole("button", { name: "Decline" }).click()
          await page.getByRole("alert").getByText(/declined\. Nothing was charged/).waitFor()
          await page.getByRole("button", { name: "Pay 7 credits" }).waitFor()
          await page.goto(`${base}/wallet`)
          await page.getByTestId("wallet-balance").getByText(`${before + 100} credits`, { exact: true }).waitFor()
          await assertNoJargon(page)
          await page.getByRole("cell", { name: /Top-up/ }).first().waitFor()
          await context.close()
        })
      }))

    it.effect("marketplace search → expert page → trial → unlock → chat: the right words, the held-back message sent again, the notice gone", () =>
      Effect.gen(function*() {
        const { url: base } = yield* Atrium
        const browser = yield* Browser
        yield* Effect.promise(async () => {
          const creator = await person(browser, base, { phone: CREATOR_PHONE, code: CREATOR_CODE })
          const id = await publishedExpert(base, creator.token, {
            name: "Trial Expert",
            billing: { type: "UNLOCK", price: "5", free_trial_per_user: 1, allow_trial: true }
          })
          const buyer = await person(browser, base, { phone: BUYER_PHONE, code: BUYER_CODE }, { credits: 50 })
          const page = buyer.page
          // Found by searching the marketplace: the card says who made it and how much it is used.
          await page.goto(`${base}/marketplace`)
          await page.getByLabel("Search experts").fill("Trial Expert")
          await page.getByRole("button", { name: "Search" }).click()
          await page.waitForURL(/\?q=Trial\+Expert|\?q=Trial%20Expert/)
          const card = page.getByRole("list", { name: "Experts" }).getByRole("listitem").filter({ hasText: "Trial Expert" })
          await card.getByTestId("usage").getByText("New: no conversations yet").waitFor()
          await card.getByTestId("creator").getByText("By an unverified creator").waitFor()
          await card.getByRole("link", { name: "Trial Expert" }).click()
          await page.waitForURL(`${base}/marketplace/${id}`)
          await page.getByText("1 free trial message per person before unlocking.").waitFor()
          await page.getByRole("button", { name: "Chat" }).click()
          await page.waitForURL(`${base}/chat/${id}`)
          const box = page.getByRole("textbox", { name: "Message" })
          await box.fill("one")
          await box.press("Enter")
          await until(page, "the trial answer", () => document.querySelector("[data-testid=answer]")?.textContent === "You said: one")
          await box.fill("two")
          await box.press("Enter")
          const notice = page.getByTestId("trial-notice")
          await notice.getByText(/You have used your 1 free trial message with this expert/).waitFor()
          const before = credits(await page.getByTestId("balance").textContent())
          await notice.getByRole("button", { name: "Unlock for 5 credits" }).click()
          await until(page, "the held-back message answered", () =>
            [...document.querySelectorAll("[data-testid=answer]")].some((a) => a.textContent === "You said: two"))
          assert.strictEqual(await page.getByTestId("trial-notice").count(), 0, "the notice is gone after unlocking")
          // The unlock's 5 credits (and the answer's tokens) leave the balance in the header.
          await page.waitForFunction((limit) => {
            const text = (globalThis as unknown as typeof globalThis & { document: typeof document }).document
              .querySelector("[data-testid=balance]")?.textContent ?? ""
            return Number(text.replace(/[^\d.]/g, "")) <= limit
          }, before - 5)
          await page.goto(`${base}/marketplace/${id}`)
          await page.getByTestId("unlocked").getByText("You have unlocked this expert.").waitFor()
          // The card now counts the conversation.
          await page.goto(`${base}/marketplace?q=Trial+Expert`)
          await page.getByTestId("usage").getByText("1 conversation by 1 person").waitFor()
          assert.strictEqual(await page.getByRole("button", { name: /Unlock for/ }).count(), 0)
          await buyer.context.close()
          await creator.context.close()
        })
      }))

    it.effect("keys: create one (shown once, and it calls /v1), then revoke it", () =>
      Effect.gen(function*() {
        const { url: base } = yield* Atrium
        const browser = yield* Browser
        yield* Effect.promise(async () => {
          const { context, page } = await person(browser, base, { phone: CREATOR_PHONE, code: CREATOR_CODE })
          await page.goto(`${base}/keys`)
          await page.getByLabel("Key name").fill("browser laptop")
          await page.getByRole("button", { name: "Create key" }).click()
          const key = (await page.getByTestId("new-key").textContent()) ?? ""
          const models = await fetch(`${base}/v1/models`, { headers: { authorization: `Bearer ${key}` } })
          assert.strictEqual(models.status, 200)
          page.once("dialog", (dialog) => void dialog.accept())
          await page.getByRole("button", { name: "Revoke browser laptop" }).click()
          await until(page, "the key gone from the list", () => !(document.querySelector("table")?.textContent ?? "").includes("browser laptop"))
          const refused = await fetch(`${base}/v1/models`, { headers: { authorization: `Bearer ${key}` } })
          assert.strictEqual(refused.status, 401)
          await context.close()
        })
      }))
  })
})
