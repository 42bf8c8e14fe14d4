import { Effect } from "effect"
import type { Refusal } from "./Extract.js"

/**
 * PDF text. No PDF reader ships with the platform yet (the pure-JavaScript ones weigh megabytes of pdf.js, and the
 * newest want Node 22): a PDF fails with `unsupported_file` and says so, rather than being ingested as garbage.
 * docs/knowledge.md says how to add it.
 */
export const pdfText = (_bytes: Uint8Array): Effect.Effect<string | Refusal> =>
  Effect.succeed({
    code: "unsupported_file",
    message: "PDF text extraction is not available on this platform yet; convert the PDF to text or Markdown first."
  })
