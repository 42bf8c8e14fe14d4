import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { MANUAL_PDF } from "../knowledge/pdf.js"
import { MANUAL } from "../knowledge/support.js"
import { Browser } from "./Browser.js"
import { api, assertAccessible, Atrium, checkPrerequisites, CREATOR_CODE, CREATOR_PHONE, person, Platform, until } from "./support.js"

/**
 * Issue 32 in the browser: a creator gives an expert knowledge in the studio's Knowledge section (a new knowledge
 * base, a manual and a PDF uploaded, their ingestion followed to "ready", a test query with its ranked passages),
 * saves the draft with it attached, and the expert answers from the manual in the chat with a citation: a
 * footnote that opens the passage (file, character range, text).
 */

checkPrerequisites()

describe("web app in Chromium: knowledge", () => {
  it.layer(Platform, { timeout: 180_000 })((it) => {
    it.effect("studio Knowledge: create, upload, ingest, test a query, attach → the chat answers with a footnote that opens the passage", () =>
      Effect.gen(function*() {
        const { url: base } = yield* Atrium
        const browser = yield* Browser
        yield* Effect.promise(async () => {
          const creator = await person(browser, base, { phone: CREATOR_PHONE, code: CREATOR_CODE }, { credits: 100 })
          const page = creator.page
          const created = await api(base, creator.token, "POST", "/v1/agents", { name: "Kettle Helper", category: "business" })
          const id = created.identifier as string

          // --- The studio's Knowledge section: a new knowledge base, attached at once.
          await page.goto(`${base}/studio/${id}`)
          await page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: "Knowledge", exact: true }).click()
          const section = page.getByRole("group", { name: "Knowledge", exact: true })
          await section.getByText("You have no knowledge bases yet").waitFor()
          await section.getByLabel("New knowledge base").fill("Kettle manual")
          // Enter creates the knowledge base; it does not save the draft.
          await section.getByLabel("New knowledge base").press("Enter")
          await section.getByLabel("Answer from Kettle manual").waitFor()
          assert.isTrue(await section.getByLabel("Answer from Kettle manual").isChecked())
          assert.strictEqual(await page.getByText("Saved.").count(), 0)

          // --- Upload a Markdown manual and a PDF; both are read to "ready".
          await section.getByLabel("Upload documents to Kettle manual").setInputFiles([
            { name: "manual.md", mimeType: "text/markdown", buffer: Buffer.from(MANUAL) },
            { name: "kettle.pdf", mimeType: "application/pdf", buffer: Buffer.from(MANUAL_PDF) }
          ])
          await section.getByRole("rowheader", { name: "manual.md" }).waitFor()
          await section.getByRole("rowheader", { name: "kettle.pdf" }).waitFor()
          await until(page, "both documents ready", () => {
            const cells = [...document.querySelectorAll("[data-testid=knowledge-file-status]")]
            return cells.length === 2 && cells.every((cell) => cell.textContent === "ready")
          })
          await section.getByText("2 of 2 documents ready").waitFor()

          // --- A test query shows the ranked passages, the best first, with file, score and range.
          await section.getByRole("textbox", { name: "Test a query" }).fill("how long is the warranty")
          await section.getByRole("button", { name: "Search" }).click()
          const passages = section.getByRole("list", { name: "Ranked passages" }).getByRole("listitem")
          await passages.first().waitFor()
          assert.isAtLeast(await passages.count(), 2)
          const best = await passages.first().innerText()
          assert.match(best, /warranty lasts two years/)
          assert.match(best, /score 1\.000, characters \d+–\d+/)
          assert.match(await passages.allInnerTexts().then((all) => all.join("\n")), /kettle\.pdf/, "the PDF's passage is ranked too")
          await assertAccessible(page, "the studio's Knowledge section")

          // --- Saved with the draft: the expert's knowledge_bases.
          await page.getByRole("button", { name: "Save draft" }).click()
          await page.getByText("Saved.").waitFor()
          const saved = await api(base, creator.token, "GET", `/v1/agents/${id}`)
          assert.strictEqual(saved.knowledge_bases.length, 1)
          assert.match(saved.knowledge_bases[0], /^vs_/)
          await page.reload()
          assert.isTrue(await page.getByRole("group", { name: "Knowledge", exact: true }).getByLabel("Answer from Kettle manual").isChecked())

          // --- The chat: the expert answers from the manual, citing it; the footnote opens the passage.
          await page.goto(`${base}/chat/${id}`)
          const message = page.getByRole("textbox", { name: "Message" })
          await message.fill(`/tool file_search ${JSON.stringify({ query: "how long is the warranty", max_num_results: 1 })}`)
          await message.press("Enter")
          await until(page, "the answer", () => (document.querySelector("[data-testid=answer]")?.textContent ?? "").includes("[1]"))
          const answer = await page.getByTestId("answer").innerText()
          assert.notInclude(answer, "【1†", "the marker is shown as a footnote number")
          const sources = page.getByRole("region", { name: "Sources" })
          const footnote = sources.getByRole("button", { name: /^\[1\] (manual\.md|kettle\.pdf), characters \d+–\d+$/ })
          await footnote.waitFor()
          assert.strictEqual(await footnote.getAttribute("aria-expanded"), "false")
          await footnote.click()
          assert.strictEqual(await footnote.getAttribute("aria-expanded"), "true")
          const passage = page.getByTestId("passage")
          await passage.waitFor()
          const shown = await passage.innerText()
          assert.include(shown, "The warranty lasts two years from the date of purchase.")
          assert.match(shown, /characters \d+–\d+/)
          // The range is the passage's place in the document's text.
          const [, from, to] = /characters (\d+)–(\d+)/.exec(shown)!
          if (shown.includes("manual.md")) assert.include(MANUAL.slice(Number(from), Number(to)), "two years")
          await assertAccessible(page, "the chat with an open footnote")
          await footnote.click()
          assert.strictEqual(await page.getByTestId("passage").count(), 0)
          await creator.context.close()
        })
      }))

    it.effect("the Knowledge page: create a knowledge base, upload a manual, watch it read, and try a query", () =>
      Effect.gen(function*() {
        const { url: base } = yield* Atrium
        const browser = yield* Browser
        yield* Effect.promise(async () => {
          const creator = await person(browser, base, { phone: CREATOR_PHONE, code: CREATOR_CODE }, { credits: 100 })
          const page = creator.page
          await page.goto(`${base}/knowledge`)
          await page.getByRole("heading", { name: "Knowledge", level: 1 }).waitFor()
          const create = page.getByRole("form", { name: "Create a knowledge base" })
          await create.getByLabel("Name").fill("Warranty docs")
          await create.getByRole("button", { name: "Create knowledge base" }).click()
          await page.getByRole("heading", { name: "Warranty docs", level: 2 }).waitFor()
          await page.getByText("No documents yet.").waitFor()

          await page.getByLabel(/^Add documents/).setInputFiles([{ name: "manual.md", mimeType: "text/markdown", buffer: Buffer.from(MANUAL) }])
          await until(page, "the manual read", () => [...document.querySelectorAll("td")].some((cell) => cell.textContent === "completed"))

          const query = page.getByRole("form", { name: "Try a query" })
          await query.getByLabel("Try a query").fill("how long is the warranty")
          await query.getByRole("button", { name: "Search" }).click()
          const best = page.getByRole("list", { name: "Ranked passages" }).getByRole("listitem").first()
          await best.waitFor()
          const text = await best.innerText()
          assert.match(text, /manual\.md/)
          assert.match(text, /warranty lasts two years/)
          await assertAccessible(page, "the Knowledge page with a query's passages")
          await creator.context.close()
        })
      }))
  })
})
