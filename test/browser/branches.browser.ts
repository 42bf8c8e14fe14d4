import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import type { Page } from "playwright-core"
import { Browser } from "./Browser.js"
import { api, Atrium, checkPrerequisites, CREATOR_CODE, CREATOR_PHONE, person, Platform, until } from "./support.js"

/**
 * Issue 44 item 3 in Debian's Chromium: a conversation is a tree. Regenerate under an answer and Edit on one's own
 * message make new versions of that turn, `< n/m >` switches between them, and a reload keeps the branch (the
 * session's leaf is kept by the platform, not the page).
 */

checkPrerequisites()

const answers = (page: Page) => page.getByTestId("answer").allTextContents()
/** The user's messages as shown (each bubble's text without its screen-reader prefix and its buttons). */
const messages = (page: Page) =>
  page.locator(".bubble.user").evaluateAll((nodes) =>
    nodes.map((node) =>
      Array.from((node as unknown as { childNodes: ArrayLike<{ nodeType: number; textContent: string | null }> }).childNodes)
        .filter((child) => child.nodeType === 3).map((child) => child.textContent ?? "").join("")))
const version = (page: Page, index: number) => page.getByTestId("version").nth(index).textContent()

describe("web app in Chromium: branches", () => {
  it.layer(Platform, { timeout: 180_000 })((it) => {
    it.effect("regenerate, edit and < n/m > on the chat page; a reload keeps the branch", () =>
      Effect.gen(function*() {
        const { url: base } = yield* Atrium
        const browser = yield* Browser
        yield* Effect.promise(async () => {
          const { context, page, token } = await person(browser, base, { phone: CREATOR_PHONE, code: CREATOR_CODE }, { credits: 100 })
          const created = await api(base, token, "POST", "/v1/agents", { name: "Branch Expert", category: "business" })
          const id = created.identifier as string
          await page.goto(`${base}/chat/${id}`)
          const box = page.getByRole("textbox", { name: "Message" })
          for (const text of ["first question", "second question"]) {
            await box.fill(text)
            await box.press("Enter")
            await page.getByTestId("answer").filter({ hasText: `You said: ${text}` }).first().waitFor()
            await until(page, `the answer to ${text} done`, () => !document.querySelector("[aria-busy=true]"))
          }
          assert.strictEqual(await page.getByTestId("versions").count(), 0, "one version of each turn so far")

          // Regenerate the last answer: a second version of that turn, shown in its place (not as a third turn). Each
          // answer offers it once its turn is on the conversation's tree.
          await page.getByRole("button", { name: "Regenerate" }).nth(1).waitFor()
          await page.getByRole("button", { name: "Regenerate" }).nth(1).click()
          await until(page, "the regenerated answer as version 2/2", () =>
            document.querySelector("[data-testid=version]")?.textContent === "2/2" && !document.querySelector("[aria-busy=true]"))
          assert.deepStrictEqual(await answers(page), ["You said: first question", "You said: second question"])
          assert.deepStrictEqual(await messages(page), ["first question", "second question"])

          // Edit the second message: a third version, with the new text and its own answer.
          await page.locator(".bubble.user").last().getByRole("button", { name: "Edit" }).click()
          const edit = page.getByRole("textbox", { name: "Edited message" })
          await edit.fill("second question, edited")
          await page.getByRole("button", { name: "Send edit" }).click()
          await until(page, "the edited message's answer as version 3/3", () =>
            document.querySelector("[data-testid=version]")?.textContent === "3/3" &&
            Array.from(document.querySelectorAll("[data-testid=answer]")).some((node) => node.textContent === "You said: second question, edited") &&
            !document.querySelector("[aria-busy=true]"))
          assert.deepStrictEqual(await messages(page), ["first question", "second question, edited"])
          assert.strictEqual(await page.getByTestId("answer").count(), 2)

          // < : back to the first version of the turn (the original message and answer).
          await page.getByRole("button", { name: "Previous version" }).click()
          await until(page, "version 2/3", () => document.querySelector("[data-testid=version]")?.textContent === "2/3")
          await page.getByRole("button", { name: "Previous version" }).click()
          await until(page, "version 1/3", () => document.querySelector("[data-testid=version]")?.textContent === "1/3")
          assert.deepStrictEqual(await messages(page), ["first question", "second question"])
          assert.deepStrictEqual(await answers(page), ["You said: first question", "You said: second question"])

          // A reload opens the same branch: the platform keeps the session's leaf.
          const session = new URL(page.url()).searchParams.get("session")!
          await page.reload()
          await until(page, "the branch after a reload", () => document.querySelector("[data-testid=version]")?.textContent === "1/3")
          assert.deepStrictEqual(await messages(page), ["first question", "second question"])
          assert.strictEqual(await version(page, 0), "1/3")
          const tree = await api(base, token, "GET", `/v1/sessions/${session}/tree`)
          assert.strictEqual(tree.leaf, 2)
          assert.deepStrictEqual(tree.turns.map((t: any) => [t.turn, t.parent_turn]), [[1, null], [2, 1], [3, 1], [4, 1]])

          // > twice: the edited version again, and the next message continues it.
          await page.getByRole("button", { name: "Next version" }).click()
          await until(page, "version 2/3", () => document.querySelector("[data-testid=version]")?.textContent === "2/3")
          await page.getByRole("button", { name: "Next version" }).click()
          await until(page, "version 3/3", () => document.querySelector("[data-testid=version]")?.textContent === "3/3")
          await box.fill("/history")
          await box.press("Enter")
          await until(page, "the next answer on the edited branch", () =>
            Array.from(document.querySelectorAll("[data-testid=answer]")).some((node) => node.textContent === "I see 4 earlier messages.") &&
            !document.querySelector("[aria-busy=true]"))
          assert.deepStrictEqual(await messages(page), ["first question", "second question, edited", "/history"])
          await context.close()
        })
      }))
  })
})
