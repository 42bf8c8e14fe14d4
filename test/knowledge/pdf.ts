/**
 * A real PDF made by hand (PDF 1.4: a catalog, a page tree, a standard Type 1 font, one content stream per page,
 * a cross-reference table with exact byte offsets), so the tests read a file like any PDF writer's, with text we
 * know, without a PDF library. Each page is a list of lines; characters are Latin-1 (the font's WinAnsi encoding).
 */
export const makePdf = (pages: ReadonlyArray<ReadonlyArray<string>>): Uint8Array => {
  const escape = (line: string) => line.replace(/[\\()]/g, (c) => `\\${c}`)
  const objects: Array<string> = []
  const pageIds = pages.map((_, i) => 4 + i * 2)
  objects[1] = "<< /Type /Catalog /Pages 2 0 R >>"
  objects[2] = `<< /Type /Pages /Kids [${pageIds.map((id) => `${id} 0 R`).join(" ")}] /Count ${pages.length} >>`
  objects[3] = "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"
  pages.forEach((lines, i) => {
    const content = ["BT", "/F1 12 Tf", "14 TL", "72 720 Td", ...lines.map((line) => `(${escape(line)}) Tj T*`), "ET"].join("\n")
    objects[pageIds[i]!] =
      `<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents ${pageIds[i]! + 1} 0 R >>`
    objects[pageIds[i]! + 1] = `<< /Length ${Buffer.byteLength(content, "latin1")} >>\nstream\n${content}\nendstream`
  })
  let out = "%PDF-1.4\n%\xe2\xe3\xcf\xd3\n"
  const offsets: Array<number> = []
  for (let id = 1; id < objects.length; id++) {
    offsets[id] = Buffer.byteLength(out, "latin1")
    out += `${id} 0 obj\n${objects[id]}\nendobj\n`
  }
  const xref = Buffer.byteLength(out, "latin1")
  out += `xref\n0 ${objects.length}\n0000000000 65535 f \n`
  for (let id = 1; id < objects.length; id++) out += `${String(offsets[id]).padStart(10, "0")} 00000 n \n`
  out += `trailer\n<< /Size ${objects.length} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`
  return new Uint8Array(Buffer.from(out, "latin1"))
}

/** A two-page kettle manual as a PDF, and the facts on its pages. */
export const MANUAL_PDF = makePdf([
  [
    "Acme Kettle Manual",
    "Fill the kettle with water up to the MAX line.",
    "Never fill it above the line or boiling water may spill."
  ],
  [
    "Warranty",
    "The warranty lasts two years from the date of purchase.",
    "It covers defects in materials and workmanship."
  ]
])
