import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { Browser } from "./Browser.js"
import { api, assertAccessible, Atrium, checkPrerequisites, CREATOR_CODE, CREATOR_PHONE, person, Platform, until } from "./support.js"

/**
 * "What this expert remembers" (issue 47) in Debian's Chromium: the creator turns memory on in the studio; a fact the expert saves in one conversation is used
 * in the next, and the user sees it in the chat, edits a block, deletes the fact, and the next turn's context has
 * neither the fact nor the old block value (the builtin model's `/system` shows the context).
 */

checkPrerequisites()

describe("web app in Chromium: memory", () => {
  it.layer(Platform, { timeout: 180_000 })((it) => {
    it.effect("a fact from one conversation is in the next; the user views, edits and deletes it in the chat", () =>
      Effect.gen(function*() {
        const { url: base } = yield* Atrium
        const browser = yield* Browser
        yield* Effect.promise(async () => {
          const { page, token } = await person(browser, base, { phone: CREATOR_PHONE, code: CREATOR_CODE }, { credits: 100 })
          const created = await api(base, token, "POST", "/v1/agents", { name: "Remembering Expert", category: "business" })
          const id = created.identifier as string
          // The creator turns memory on in the studio's editor: a bad label is said in words and saves nothing.
          await page.goto(`${base}/studio/${id}`)
          const settings = page.getByTestId("memory-settings")
          await settings.getByLabel("Remember each person across conversations").check()
          await settings.getByRole("button", { name: "Add a memory block" }).click()
          await settings.getByLabel("Block label").fill("Human Being")
          await settings.getByLabel("Limit (characters)").fill("50")
          await settings.getByLabel("What it is for").fill("Who you are")
          await page.getByRole("button", { name: "Save draft" }).click()
          await page.getByRole("alert").getByText(/Memory block “Human Being”: the label is 1-40 lowercase letters/).waitFor()
          assert.notInclude(JSON.stringify((await api(base, token, "GET", `/v1/agents/${id}`)).memory ?? null), "Human Being", "the bad label is not saved")
          await settings.getByLabel("Block label").fill("human")
          await page.getByRole("button", { name: "Save draft" }).click()
          await page.getByText("Saved.").waitFor()
          assert.deepStrictEqual((await api(base, token, "GET", `/v1/agents/${id}`)).memory, {
            enabled: true, extraction: false, blocks: [{ label: "human", description: "Who you are", limit: 50 }]
          })
          await assertAccessible(page, "the studio's memory settings")

          // Conversation 1: the expert saves a fact.
          await page.goto(`${base}/chat/${id}`)
          const box = page.getByRole("textbox", { name: "Message" })
          await box.fill(`/tool fact_add {"text": "Owns a cat called Miso"}`)
          await box.press("Enter")
          await until(page, "the fact saved", () => (document.querySelector("[data-testid=answer]")?.textContent ?? "").includes("fact_add returned"))

          // Conversation 2: its context has the fact.
          await page.goto(`${base}/chat/${id}`)
          await page.getByRole("textbox", { name: "Message" }).fill("/system")
          await page.getByRole("textbox", { name: "Message" }).press("Enter")
          await until(page, "the context shown", () => (document.querySelector("[data-testid=answer]")?.textContent ?? "").includes("Owns a cat called Miso"))

          // The panel shows it; the user edits the block and deletes the fact.
          await page.getByText("What this expert remembers").click()
          const panel = page.getByTestId("memory-panel")
          await panel.getByText("Owns a cat called Miso").waitFor()
          await assertAccessible(page, "the memory panel open")
          const block = panel.getByRole("textbox", { name: /human/ })
          await block.fill("Name: Ada")
          await panel.getByRole("button", { name: "Save human" }).click()
          await panel.getByText("Saved human.").waitFor()
          await block.fill("x".repeat(51))
          assert.isTrue(await panel.getByRole("button", { name: "Save human" }).isDisabled(), "past the limit cannot be saved")
          await panel.getByText("51 / 50 characters").waitFor()
          await panel.getByRole("button", { name: "Delete the fact: Owns a cat called Miso" }).click()
          await panel.getByText("Fact deleted.").waitFor()
          await panel.getByText("Owns a cat called Miso").waitFor({ state: "detached" })

          // The next turn: the edited block, no fact.
          await box.fill("/system")
          await box.press("Enter")
          await until(page, "the next context", () => {
            const answers = document.querySelectorAll("[data-testid=answer]")
            return (answers[answers.length - 1]?.textContent ?? "").includes("Name: Ada") && answers.length >= 2
          })
          const last = await page.getByTestId("answer").last().textContent()
          assert.notInclude(last ?? "", "Miso")
        })
      }))
  })
})
