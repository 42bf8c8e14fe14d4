import { Duration, Effect } from "effect"
import { Worker } from "node:worker_threads"
import type { Refusal } from "./Extract.js"

/**
 * PDF text, read by pdf.js (`pdfjs-dist`'s legacy build, pure JavaScript, nothing downloaded at run time) in a
 * worker thread started per file (`pdf-worker.mjs`): pdf.js parses in the calling thread, so a hostile or huge PDF
 * would otherwise stall the server's event loop. The worker's heap is capped and it is ended after `timeout`; a
 * PDF that cannot be read (malformed, encrypted, too big for the cap, too slow) fails its file with the reason.
 * Text comes page by page, lines as pdf.js sees them, pages as paragraphs (docs/knowledge.md).
 */

/** The worker's heap: enough for manuals of thousands of pages, not for a PDF built to exhaust memory. */
const HEAP_MB = 256

type Answer =
  | { readonly ok: true; readonly pages: ReadonlyArray<string> }
  | { readonly ok: false; readonly name: string; readonly message: string }

const REASONS: Record<string, string> = {
  InvalidPDFException: "The file is not a valid PDF",
  PasswordException: "The PDF is encrypted with a password",
  MissingPDFException: "The PDF is empty",
  FormatError: "The PDF is malformed"
}

const refusal = (message: string): Refusal => ({ code: "invalid_file", message })

/** Page texts as one text: lines trimmed, runs of blank lines closed up, pages separated by a blank line. */
export const joinPages = (pages: ReadonlyArray<string>) =>
  pages
    .map((page) =>
      page.replace(/\r\n?/g, "\n").split("\n").map((line) => line.replace(/[ \t\f\v\u00a0]+/g, " ").trim()).join("\n")
        .replace(/\n{3,}/g, "\n\n").trim()
    )
    .filter((page) => page.length > 0)
    .join("\n\n")

export const pdfText = (bytes: Uint8Array, timeout: Duration.DurationInput = "30 seconds"): Effect.Effect<string | Refusal> =>
  Effect.async<string | Refusal>((resume) => {
    // A copy: the worker gets its own buffer (transferred, not cloned), the caller's bytes stay as they are.
    const copy = bytes.slice()
    const worker = new Worker(new URL("./pdf-worker.mjs", import.meta.url), {
      workerData: { bytes: copy },
      transferList: [copy.buffer],
      resourceLimits: { maxOldGenerationSizeMb: HEAP_MB, maxYoungGenerationSizeMb: 32 },
      // The worker must not see the server's secrets.
      env: {},
      stdout: true,
      stderr: true
    })
    // pdf.js's own warnings are dropped: the reason a file fails is what its status says.
    worker.stdout.resume()
    worker.stderr.resume()
    let done = false
    const finish = (result: string | Refusal) => {
      if (done) return
      done = true
      void worker.terminate()
      resume(Effect.succeed(result))
    }
    worker.once("message", (answer: Answer) => {
      if (answer.ok) finish(joinPages(answer.pages))
      else finish(refusal(`${REASONS[answer.name] ?? "The PDF could not be read"}: ${answer.message}`))
    })
    worker.once("error", (error) =>
      finish(refusal(
        (error as NodeJS.ErrnoException).code === "ERR_WORKER_OUT_OF_MEMORY"
          ? `The PDF needs more than ${HEAP_MB} MB to read.`
          : `The PDF could not be read: ${error.message}`
      )))
    worker.once("exit", (code) => finish(refusal(`The PDF reader stopped (exit code ${code}).`)))
    return Effect.sync(() => {
      done = true
      void worker.terminate()
    })
  }).pipe(
    Effect.timeoutTo({
      duration: timeout,
      onSuccess: (result) => result,
      onTimeout: () => refusal(`Reading the PDF took longer than ${Duration.format(Duration.decode(timeout))}.`)
    }),
    Effect.withSpan("Pdf.text")
  )
