import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { Browser } from "./Browser.js"
import {
  api,
  assertAccessible,
  Atrium,
  BUYER_CODE,
  BUYER_PHONE,
  checkPrerequisites,
  CREATOR_CODE,
  CREATOR_PHONE,
  internal,
  OPERATOR_CODE,
  OPERATOR_PHONE,
  person,
  Platform,
  until
} from "./support.js"

/**
 * From idea to sale in the browser alone: a creator builds and tests an expert in the studio and publishes it, an
 * operator (ADMIN_PHONES) reviews the submitted version in /admin and approves it, the creator is notified, a
 * buyer finds it in the marketplace and unlocks it, and the creator's earnings grow.
 */

checkPrerequisites()

describe("web app in Chromium: studio and review", () => {
  it.layer(Platform, { timeout: 180_000 })((it) => {
    it.effect("studio create → configure → test → publish → operator approves in /admin → marketplace → sale → earnings", () =>
      Effect.gen(function*() {
        const { url: base } = yield* Atrium
        const browser = yield* Browser
        yield* Effect.promise(async () => {
          const creator = await person(browser, base, { phone: CREATOR_PHONE, code: CREATOR_CODE }, { credits: 100 })
          const page = creator.page
          // --- Not an operator: no Review in the menu, and /admin is not there.
          await page.goto(`${base}/admin`)
          await page.getByRole("heading", { name: "Not found" }).waitFor()
          assert.strictEqual(await page.getByRole("link", { name: "Review" }).count(), 0)

          // --- Studio: create and configure an expert.
          await page.goto(`${base}/studio`)
          await page.getByLabel("New expert's name").fill("Tax Helper")
          await page.getByLabel("Category").selectOption("business")
          await page.getByRole("button", { name: "Create expert" }).click()
          await page.waitForURL(/\/studio\/tax-helper/)
          const id = new URL(page.url()).pathname.split("/")[2]!
          await page.getByLabel("Description", { exact: true }).fill("Answers questions about taxes, with a calculator.")
          await page.getByLabel("Instructions").fill("Be precise. Use the calculator for arithmetic.")
          await page.getByLabel("Opening message").fill("Hello! Ask me about your taxes.")
          await page.getByLabel("calculator: ask").check()
          await page.getByRole("button", { name: "Add an example" }).click()
          await page.getByLabel("Example 1 question").fill("What is 2+2?")
          await page.getByLabel("Example 1 answer").fill("4")
          await page.getByLabel("Billing").selectOption("UNLOCK")
          await page.getByLabel("Price (credits)").fill("5")
          await page.getByLabel("Free trial messages per person").fill("2")
          // Remote tools are a form; a wrong URL is said in words and nothing is saved.
          await page.getByRole("button", { name: "Add an MCP server" }).click()
          await page.getByLabel("Server 1 name").fill("search")
          await page.getByLabel("Server 1 URL").fill("mcp.example.com")
          await page.getByRole("button", { name: "Save draft" }).click()
          await page.getByRole("alert").getByText(/server 1: the URL must start with https:\/\//).waitFor()
          await page.getByRole("button", { name: "Remove server 1" }).click()
          await page.getByRole("button", { name: "Save draft" }).click()
          await page.getByText("Saved.").waitFor()

          // --- The test chat beside the editor talks to the saved draft.
          const beside = page.getByRole("complementary", { name: "Test chat" })
          await beside.getByText("Hello! Ask me about your taxes.").waitFor()
          await beside.getByRole("textbox", { name: "Message" }).fill("beside the editor")
          await beside.getByRole("textbox", { name: "Message" }).press("Enter")
          await until(page, "the echo beside the editor", () =>
            document.querySelector("aside [data-testid=answer]")?.textContent === "You said: beside the editor")
          assert.match(page.url(), new RegExp(`/studio/${id}$`), "the studio stays where it is")

          // --- Test chat on the draft, full page.
          await page.getByRole("link", { name: "Test chat" }).click()
          await page.waitForURL(new RegExp(`/chat/${id}`))
          // The chat page is its own chunk: until it has loaded, the studio (with the same greeting beside it) is shown.
          await page.getByLabel(/^Opening message/).waitFor({ state: "detached" })
          await page.getByText("Hello! Ask me about your taxes.").waitFor()
          const message = page.getByRole("textbox", { name: "Message" })
          await message.fill("hello there")
          await message.press("Enter")
          // The full page continues the newest conversation: the one started beside the editor.
          await until(page, "the echo", () =>
            [...document.querySelectorAll("[data-testid=answer]")].map((a) => a.textContent).join("|") ===
              "You said: beside the editor|You said: hello there")

          // --- Earnings before any sale.
          await page.goto(`${base}/earnings`)
          await page.getByTestId("earnings-total").getByText("0 credits").waitFor()

          // --- Publish: the studio says it waits for review.
          await page.goto(`${base}/studio/${id}`)
          await page.getByRole("button", { name: "Publish" }).click()
          await page.getByText(/Version 1 submitted for review/).waitFor()
          await page.getByTestId("submission").getByText(/waiting for review/).waitFor()
          await page.getByTestId("review-history").getByText(/Version 1: waiting for review/).waitFor()

          // --- The operator reviews it in /admin: the submitted version's fields, then Approve.
          const operator = await person(browser, base, { phone: OPERATOR_PHONE, code: OPERATOR_CODE })
          const desk = operator.page
          await desk.getByRole("link", { name: "Review" }).click()
          await desk.waitForURL(`${base}/admin`)
          await desk.getByRole("button", { name: "Review Tax Helper" }).click()
          const diff = desk.getByTestId("diff")
          await diff.getByText("Version 1: first publication").waitFor()
          await diff.getByText("Be precise. Use the calculator for arithmetic.").waitFor()
          await desk.getByRole("button", { name: "Approve version 1 of Tax Helper" }).click()
          await desk.getByText("Approved: version 1 of Tax Helper is live.").waitFor()
          await desk.getByText("Nothing waits for review.").waitFor()

          // --- The creator is told, in the app.
          await page.goto(`${base}/studio`)
          await page.getByTestId("notifications").getByText(`Version 1 of ${id} is live`).waitFor()
          await page.goto(`${base}/studio/${id}`)
          await page.getByTestId("submission").getByText("Published: version 1").waitFor()

          // --- A buyer finds it in the marketplace and unlocks it.
          const buyer = await person(browser, base, { phone: BUYER_PHONE, code: BUYER_CODE }, { credits: 100 })
          const shop = buyer.page
          await shop.goto(`${base}/marketplace`)
          await shop.getByLabel("Search experts").fill("taxes")
          await shop.getByRole("button", { name: "Search" }).click()
          await shop.getByRole("link", { name: "Tax Helper" }).click()
          await shop.waitForURL(`${base}/marketplace/${id}`)
          await shop.getByTestId("price").getByText("5 credits to unlock").waitFor()
          await shop.getByText("2 free trial messages per person before unlocking.").waitFor()
          await shop.getByRole("button", { name: "Unlock for 5 credits" }).click()
          await shop.getByText(/Unlocked for 5 credits\. Balance: [\d.]+ credits\./).waitFor()
          await shop.getByTestId("unlocked").waitFor()

          // --- The creator's earnings grew.
          await page.goto(`${base}/earnings`)
          await page.getByRole("cell", { name: id, exact: true }).waitFor()
          const total = (await page.getByTestId("earnings-total").textContent()) ?? ""
          assert.isAbove(Number(total.replace(/[^\d.]/g, "")), 0, total)

          await buyer.context.close()
          await operator.context.close()
          await creator.context.close()
        })
      }))

    it.effect("the operator rejects a version with a reason, and the creator reads it", () =>
      Effect.gen(function*() {
        const { url: base } = yield* Atrium
        const browser = yield* Browser
        yield* Effect.promise(async () => {
          const creator = await person(browser, base, { phone: CREATOR_PHONE, code: CREATOR_CODE })
          const page = creator.page
          await page.goto(`${base}/studio`)
          await page.getByLabel("New expert's name").fill("Rough Draft")
          await page.getByRole("button", { name: "Create expert" }).click()
          await page.waitForURL(/\/studio\/rough-draft/)
          const id = new URL(page.url()).pathname.split("/")[2]!
          await page.getByRole("button", { name: "Publish" }).click()
          await page.getByText(/Version 1 submitted for review/).waitFor()

          const operator = await person(browser, base, { phone: OPERATOR_PHONE, code: OPERATOR_CODE })
          const desk = operator.page
          await desk.goto(`${base}/admin`)
          await desk.getByRole("button", { name: "Review Rough Draft" }).click()
          await desk.getByRole("button", { name: "Reject version 1 of Rough Draft" }).click()
          await desk.getByRole("alert").getByText(/Write a reason before rejecting/).waitFor()
          await desk.getByLabel(/Reason for version 1 of Rough Draft/).fill("The description is empty.")
          await desk.getByRole("button", { name: "Reject version 1 of Rough Draft" }).click()
          await desk.getByText(/Rejected version 1 of Rough Draft/).waitFor()

          await page.reload()
          await page.getByTestId("review-history").getByText("Reviewer's reason: The description is empty.").waitFor()
          await page.goto(`${base}/studio`)
          await page.getByTestId("notifications").getByText(`Version 1 of ${id} was not approved`).waitFor()
          await operator.context.close()
          await creator.context.close()
        })
      }))

    it.effect("autosave keeps a change without Save, the tab asks before closing on an unsaved one; versions compared with the draft and one restored", () =>
      Effect.gen(function*() {
        const { url: base } = yield* Atrium
        const browser = yield* Browser
        yield* Effect.promise(async () => {
          const creator = await person(browser, base, { phone: CREATOR_PHONE, code: CREATOR_CODE }, { credits: 10 })
          const created = await api(base, creator.token, "POST", "/v1/agents", { name: "Versioned Expert", category: "business" })
          const id = created.identifier as string
          await api(base, creator.token, "PATCH", `/v1/agents/${id}`, { description: "For the versions test.", instructions: "Greet warmly.\nAnswer in French." })
          const { submission } = await api(base, creator.token, "POST", `/v1/agents/${id}/publish`)
          await internal(base, `/internal/reviews/${submission.id}/approve`)
          const page = creator.page
          // Whether the page's beforeunload handler asks to stay (what makes the browser ask before closing the tab).
          const beforeUnloadStops = () => page.evaluate(() => {
            const event = new Event("beforeunload", { cancelable: true })
            ;(globalThis as unknown as { dispatchEvent(event: Event): boolean }).dispatchEvent(event)
            return event.defaultPrevented
          })

          // --- Autosave: typed, not saved by hand, kept after a reload.
          await page.goto(`${base}/studio/${id}`)
          const instructions = page.getByRole("textbox", { name: /^Instructions/ })
          await until(page, "the draft loaded", () => [...document.querySelectorAll("textarea")].some((t) => (t.value ?? "").length > 0))
          assert.isFalse(await beforeUnloadStops(), "nothing to lose right after loading")
          await instructions.fill("Greet warmly.\nAnswer in German.\nKeep it short.")
          assert.isTrue(await beforeUnloadStops(), "closing with an unsaved change asks first")
          await page.getByTestId("autosave").getByText(/Draft saved automatically/).waitFor()
          assert.isFalse(await beforeUnloadStops(), "saved: nothing to lose")
          assert.strictEqual((await api(base, creator.token, "GET", `/v1/agents/${id}`)).instructions, "Greet warmly.\nAnswer in German.\nKeep it short.")
          await page.reload()
          await until(page, "the saved draft", () => [...document.querySelectorAll("textarea")].some((t) => (t.value ?? "").includes("German")))

          // --- Publish: version 2 waits for review, version 1 is live; compared with the draft, line by line.
          await page.getByRole("button", { name: "Publish" }).click()
          await page.getByText(/Version 2 submitted for review/).waitFor()
          const versions = page.getByTestId("versions")
          await until(page, "two versions", () => document.querySelectorAll("[data-testid=versions] > li").length === 2)
          assert.match(await versions.locator("li").nth(0).innerText(), /Version 2[\s\S]*waiting for review/)
          assert.match(await versions.locator("li").nth(1).innerText(), /Version 1[\s\S]*approved[\s\S]*live/)
          await page.getByRole("button", { name: "Compare version 1 with the draft" }).click()
          const diff = page.getByTestId("version-diff")
          await diff.waitFor()
          const text = await diff.innerText()
          assert.include(text, "Instructions")
          assert.include(text, "− Answer in French.")
          assert.include(text, "+ Answer in German.")
          assert.include(text, "+ Keep it short.")
          assert.notInclude(text, "− Greet warmly.", "an unchanged line is not a change")
          await assertAccessible(page, "the version history with a comparison open")

          // --- Restore version 1 as the draft: the form shows it, the API's draft is it, nothing else is published.
          page.once("dialog", (dialog) => void dialog.accept())
          await page.getByRole("button", { name: "Restore version 1 as draft" }).click()
          await page.getByText("Version 1 restored as the draft.", { exact: false }).waitFor()
          assert.strictEqual(await instructions.inputValue(), "Greet warmly.\nAnswer in French.")
          const agent = await api(base, creator.token, "GET", `/v1/agents/${id}`)
          assert.deepStrictEqual([agent.instructions, agent.published_version, agent.pending_submission?.version], ["Greet warmly.\nAnswer in French.", 1, 2])
          await creator.context.close()
        })
      }))
  })
})
