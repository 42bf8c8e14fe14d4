// The text of a PDF, read by pdf.js in a worker thread of its own (`Pdf.ts` starts it, bounds its memory and time,
// and ends it): a hostile or huge PDF costs this thread, never the server's event loop. Plain JavaScript, copied to
// `dist/` as it is, so the same file runs under the tests (from `src/`) and the build.
import { parentPort, workerData } from "node:worker_threads"

const answer = (message) => parentPort.postMessage(message)

try {
  const { getDocument, VerbosityLevel } = await import("pdfjs-dist/legacy/build/pdf.mjs")
  const task = getDocument({
    data: new Uint8Array(workerData.bytes),
    // Nothing is fetched or evaluated: no font or colour-map files, no fonts turned into code, no eval.
    isEvalSupported: false,
    disableFontFace: true,
    useSystemFonts: false,
    useWorkerFetch: false,
    stopAtErrors: false,
    verbosity: VerbosityLevel.ERRORS
  })
  const document = await task.promise
  const pages = []
  for (let number = 1; number <= document.numPages; number++) {
    const page = await document.getPage(number)
    const content = await page.getTextContent()
    let text = ""
    for (const item of content.items) {
      if (typeof item.str !== "string") continue
      text += item.str
      if (item.hasEOL) text += "\n"
    }
    pages.push(text)
    page.cleanup()
  }
  await document.destroy()
  answer({ ok: true, pages })
} catch (error) {
  answer({ ok: false, name: error?.name ?? "Error", message: error?.message ?? String(error) })
}
