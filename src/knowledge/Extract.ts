import { Either } from "effect"
import { csvRecords } from "../platform/Csv.js"

/**
 * The text of a file, by its kind (docs/knowledge.md): plain text and Markdown as they are, HTML without its tags
 * (headings kept as Markdown headings so chunking sees the structure), CSV as one `column: value` line per row, JSON
 * as one `path: value` line per leaf, PDF through `Pdf.ts`. Pure: a file that cannot be read is a `Refusal` with
 * the reason its status shows, never an exception.
 */

export type Kind = "text" | "markdown" | "html" | "csv" | "json" | "pdf"

export interface Refusal {
  readonly code: "unsupported_file" | "invalid_file"
  readonly message: string
}

const EXTENSIONS: Record<string, Kind> = {
  txt: "text",
  text: "text",
  log: "text",
  md: "markdown",
  markdown: "markdown",
  html: "html",
  htm: "html",
  csv: "csv",
  json: "json",
  pdf: "pdf"
}

/** What a file is: its media type first, its extension when the type says nothing (`application/octet-stream`). */
export const kindOf = (contentType: string, filename: string): Kind | undefined => {
  const type = contentType.split(";")[0]!.trim().toLowerCase()
  if (type === "text/markdown" || type === "text/x-markdown") return "markdown"
  if (type === "text/html" || type === "application/xhtml+xml") return "html"
  if (type === "text/csv") return "csv"
  if (type === "application/json" || type.endsWith("+json")) return "json"
  if (type === "application/pdf") return "pdf"
  const extension = /\.([A-Za-z0-9]+)$/.exec(filename)?.[1]?.toLowerCase()
  const byName = extension === undefined ? undefined : EXTENSIONS[extension]
  if (byName !== undefined) return byName
  if (type.startsWith("text/")) return "text"
  return undefined
}

const utf8 = new TextDecoder("utf-8", { fatal: true })

export const decodeText = (bytes: Uint8Array): string | Refusal => {
  try {
    // A byte-order mark is not text.
    return utf8.decode(bytes).replace(/^\uFEFF/, "")
  } catch {
    return { code: "invalid_file", message: "The file is not valid UTF-8 text." }
  }
}

export const isRefusal = (value: unknown): value is Refusal =>
  typeof value === "object" && value !== null && "code" in value && "message" in value

const ENTITIES: Record<string, string> = { amp: "&", lt: "<", gt: ">", quot: "\"", apos: "'", nbsp: " " }

const decodeEntities = (text: string) =>
  text.replace(/&(#x[0-9a-f]+|#\d+|[a-z]+);/gi, (whole, name: string) => {
    if (name[0] === "#") {
      const code = name[1] === "x" || name[1] === "X" ? Number.parseInt(name.slice(2), 16) : Number.parseInt(name.slice(1), 10)
      return Number.isFinite(code) && code > 0 && code <= 0x10ffff ? String.fromCodePoint(code) : whole
    }
    return ENTITIES[name.toLowerCase()] ?? whole
  })

/** HTML's text: scripts, styles and comments dropped, headings as `#` lines, blocks as paragraphs. */
export const htmlText = (html: string): string => {
  const body = html
    .replace(/<!--[\s\S]*?-->/g, "")
    .replace(/<(script|style|noscript|template|svg|head)\b[\s\S]*?<\/\1\s*>/gi, "")
    .replace(/<h([1-6])\b[^>]*>([\s\S]*?)<\/h\1\s*>/gi, (_, level: string, inner: string) =>
      `\n\n${"#".repeat(Number(level))} ${inner.replace(/<[^>]*>/g, "").replace(/\s+/g, " ").trim()}\n\n`)
    .replace(/<li\b[^>]*>/gi, "\n- ")
    .replace(/<br\s*\/?>/gi, "\n")
    .replace(/<\/?(p|div|section|article|header|footer|main|aside|nav|ul|ol|table|tr|blockquote|pre|dl|dt|dd|figure|form)\b[^>]*>/gi, "\n\n")
    .replace(/<\/t[dh]\s*>/gi, " | ")
    .replace(/<[^>]*>/g, "")
  return decodeEntities(body)
    .split("\n")
    .map((line) => line.replace(/[ \t\f\v\r]+/g, " ").trim())
    .join("\n")
    .replace(/\n{3,}/g, "\n\n")
    .trim()
}

/** CSV rows (src/platform/Csv.ts) with a value in them; a quote left open is a malformed file. */
export const parseCsv = (text: string): Array<Array<string>> | Refusal =>
  Either.match(csvRecords(text), {
    onLeft: (): Refusal => ({ code: "invalid_file", message: "Malformed CSV: a quoted field is never closed." }),
    onRight: (rows) => rows.filter((r) => r.some((value) => value.trim().length > 0))
  })

/** Each data row as `column: value; column: value`, so a row found alone still says what its values are. */
export const csvText = (text: string): string | Refusal => {
  const rows = parseCsv(text)
  if (isRefusal(rows)) return rows
  if (rows.length === 0) return ""
  const [header, ...data] = rows
  if (data.length === 0) return header!.join(", ")
  return data.map((row) =>
    row.map((value, index) => `${header![index]?.trim() || `column ${index + 1}`}: ${value.trim()}`).join("; ")
  ).join("\n")
}

/** One `path: value` line per leaf; objects and arrays of objects open a paragraph per top-level entry. */
export const jsonText = (text: string): string | Refusal => {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch (error) {
    return { code: "invalid_file", message: `Malformed JSON: ${error instanceof Error ? error.message : String(error)}` }
  }
  const lines: Array<string> = []
  const walk = (node: unknown, path: string) => {
    if (Array.isArray(node)) {
      if (node.length === 0) lines.push(`${path}: []`)
      node.forEach((item, index) => walk(item, `${path}[${index}]`))
    } else if (node !== null && typeof node === "object") {
      const entries = Object.entries(node)
      if (entries.length === 0) lines.push(`${path}: {}`)
      for (const [key, item] of entries) walk(item, path.length === 0 ? key : `${path}.${key}`)
    } else {
      lines.push(`${path.length === 0 ? "value" : path}: ${typeof node === "string" ? node : JSON.stringify(node)}`)
    }
  }
  if (Array.isArray(value) || (value !== null && typeof value === "object")) {
    const entries: Array<[string, unknown]> = Array.isArray(value)
      ? value.map((item, index) => [`[${index}]`, item])
      : Object.entries(value as object)
    const paragraphs: Array<string> = []
    for (const [key, item] of entries) {
      lines.length = 0
      walk(item, key)
      paragraphs.push(lines.join("\n"))
    }
    return paragraphs.join("\n\n")
  }
  walk(value, "")
  return lines.join("\n")
}

/** The text of a file that is not a PDF (those need `Pdf.ts`, asynchronous). */
export const extractText = (kind: Exclude<Kind, "pdf">, bytes: Uint8Array): string | Refusal => {
  const text = decodeText(bytes)
  if (isRefusal(text)) return text
  if (text.includes("\u0000")) return { code: "invalid_file", message: "The file holds NUL characters: it is not text." }
  switch (kind) {
    case "text":
    case "markdown":
      return text.replace(/\r\n?/g, "\n")
    case "html":
      return htmlText(text)
    case "csv":
      return csvText(text)
    case "json":
      return jsonText(text)
  }
}
