import { assert, describe, it, layer } from "@effect/vitest"
import { Effect } from "effect"
import { LIVE, newAccount, serverWith, upload } from "../files/support.js"
import { isRefusal } from "../../src/knowledge/Extract.js"
import { pdfText } from "../../src/knowledge/Pdf.js"
import { clientOf, untilIngested } from "./support.js"
import { makePdf, MANUAL_PDF } from "./pdf.js"

/**
 * Issue 32 item 1, PDF text: pdf.js (in a worker thread of its own) reads a real PDF, page by page; a malformed PDF
 * fails its file with the reason and the store's other files go on; the PDF's passages are found by search with
 * their citation (the character range of the extracted text).
 */
describe("knowledge: PDF text", () => {
  it.effect("the text of a two-page PDF, pages as paragraphs", () =>
    Effect.gen(function*() {
      const text = yield* pdfText(MANUAL_PDF)
      assert.isFalse(isRefusal(text), JSON.stringify(text))
      assert.strictEqual(
        text,
        [
          "Acme Kettle Manual",
          "Fill the kettle with water up to the MAX line.",
          "Never fill it above the line or boiling water may spill.",
          "",
          "Warranty",
          "The warranty lasts two years from the date of purchase.",
          "It covers defects in materials and workmanship."
        ].join("\n")
      )
    }))

  it.effect("parentheses and backslashes in the text come out as written", () =>
    Effect.gen(function*() {
      const text = yield* pdfText(makePdf([["Model (A-100) uses C:\\kettle"]]))
      assert.strictEqual(text, "Model (A-100) uses C:\\kettle")
    }))

  it.effect("a malformed PDF is refused with a reason, not thrown", () =>
    Effect.gen(function*() {
      for (const bytes of [new TextEncoder().encode("%PDF-1.4\nthis is not a PDF at all"), new TextEncoder().encode("plain words"), new Uint8Array(0)]) {
        const refused = yield* pdfText(bytes)
        assert.isTrue(isRefusal(refused), `${JSON.stringify(refused)} should be refused`)
        if (!isRefusal(refused)) continue
        assert.strictEqual(refused.code, "invalid_file")
        assert.match(refused.message, /PDF/)
      }
    }))

  layer(serverWith({ KNOWLEDGE_INGEST_POLL: "1 second" }), LIVE)((it) => {
    it.effect("a PDF manual is ingested and found with a citation; a malformed PDF fails alone", () =>
      Effect.gen(function*() {
        const account = yield* newAccount
        const caller = account.asEndUser("u1")
        const client = yield* clientOf(account.key, "u1")
        const manual = yield* upload(caller, MANUAL_PDF, { filename: "kettle.pdf", contentType: "application/pdf" })
        const broken = yield* upload(caller, new TextEncoder().encode("%PDF-1.7\n1 0 obj << /Type /Catalog"), {
          filename: "broken.pdf",
          contentType: "application/pdf"
        })
        const store = yield* Effect.promise(() => client.vectorStores.create({ name: "Kettle", file_ids: [manual.id, broken.id] }))

        const ingested = yield* untilIngested(client, store.id, manual.id)
        assert.strictEqual(ingested.status, "completed", JSON.stringify(ingested.last_error))
        const failed = yield* untilIngested(client, store.id, broken.id)
        assert.strictEqual(failed.status, "failed")
        assert.strictEqual(failed.last_error?.code, "invalid_file")
        assert.match(failed.last_error!.message, /PDF/)

        const page = yield* Effect.promise(() => client.vectorStores.search(store.id, { query: "How long is the warranty?" }))
        const top = page.data[0] as any
        assert.isDefined(top, "the PDF's passage is found")
        assert.strictEqual(top.file_id, manual.id)
        assert.strictEqual(top.filename, "kettle.pdf")
        const text: string = top.content[0].text
        assert.include(text, "The warranty lasts two years from the date of purchase.")
        // The citation is the passage's range in the PDF's extracted text.
        const extracted = yield* pdfText(MANUAL_PDF)
        assert.strictEqual((extracted as string).slice(top.start_char, top.end_char), text)
      }))
  })
})
