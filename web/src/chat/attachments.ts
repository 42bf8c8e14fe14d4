import { ATTACHMENT_BYTES } from "../../../src/sessions/Domain.js"

/**
 * Attachments in the composer (issue 48, docs/sessions.md "Attachments"). A text file is written to the session's
 * workspace (`POST /v1/sessions/:id/files`), where the expert's `read_file` reads it whole, and quoted in the message
 * that carries it, so the model reads it without a tool and the conversation keeps it. The quote is a block the chat
 * shows as a chip with the file's name:
 *
 *     <attachment name="notes.txt" path="attachments/notes.txt">
 *     …the file's text, its first 20,000 characters…
 *     </attachment>
 */

/** Files one message carries (the API's limits, src/sessions/Domain.ts, are said here before anything is sent). */
export const ATTACHMENTS_PER_MESSAGE = 5
/** What a message quotes of each file; the workspace keeps it whole. */
const QUOTED_CHARS = 20_000

export interface Attachment {
  readonly name: string
  readonly content: string
}

/** A file's name as the workspace takes it: letters, digits, `.`, `_` and `-`. */
export const attachmentName = (fileName: string) => {
  const cleaned = fileName.normalize("NFKD").replace(/[^A-Za-z0-9._-]+/g, "-").replace(/^[._-]+/, "").slice(0, 100)
  return cleaned === "" ? "file.txt" : cleaned
}

/** Reads a chosen file as an attachment, or says in words why it cannot be one. */
export const readAttachment = async (file: File): Promise<Attachment | string> => {
  if (file.size > ATTACHMENT_BYTES) {
    return `${file.name} is ${Math.ceil(file.size / 1000).toLocaleString()} KB; a file can be at most ${ATTACHMENT_BYTES / 1000} KB.`
  }
  const bytes = new Uint8Array(await file.arrayBuffer())
  let content: string
  try {
    content = new TextDecoder("utf-8", { fatal: true }).decode(bytes)
  } catch {
    return `${file.name} is not a text file: attach text (notes, code, CSV, Markdown, JSON).`
  }
  // A NUL is no text a person writes: a binary format that happened to decode.
  if (content.includes("\u0000")) return `${file.name} is not a text file: attach text (notes, code, CSV, Markdown, JSON).`
  return { name: attachmentName(file.name), content }
}

const escapeAttribute = (text: string) => text.replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/</g, "&lt;")

/** The message as sent: what the user wrote, then each attachment quoted. */
export const withAttachments = (text: string, attachments: ReadonlyArray<Attachment>) =>
  [
    text,
    ...attachments.map((file) => {
      const quoted = file.content.length > QUOTED_CHARS
        ? `${file.content.slice(0, QUOTED_CHARS)}\n[… the rest of the file (${file.content.length.toLocaleString("en")} characters in all) is in the workspace: read_file reads it whole]`
        : file.content
      // A file that holds the closing tag itself would end its quote early: that one line is changed in the quote only.
      return `<attachment name="${escapeAttribute(file.name)}" path="attachments/${escapeAttribute(file.name)}">\n${quoted.replace(/<\/attachment>/g, "</attachment\u200b>")}\n</attachment>`
    })
  ].filter((part) => part !== "").join("\n\n")

const BLOCK = /(?:\n\n)?<attachment name="([^"]*)" path="[^"]*">\n[\s\S]*?\n<\/attachment>/g

/** A message as the chat shows it: the user's words, and the names of the files it carried. */
export const splitAttachments = (message: string): { text: string; files: ReadonlyArray<string> } => {
  const files: Array<string> = []
  const text = message.replace(BLOCK, (_, name: string) => {
    files.push(name.replace(/&lt;/g, "<").replace(/&quot;/g, "\"").replace(/&amp;/g, "&"))
    return ""
  })
  return { text: text.trim(), files }
}

/** A clipped preview (the sidebar's last message: its first 140 characters) without the quotes' text, closed or not. */
export const previewWithoutQuotes = (preview: string) => {
  const at = preview.indexOf("<attachment ")
  if (at < 0) return preview
  const names = [...preview.slice(at).matchAll(/<attachment name="([^"]*)"/g)].map((m) => m[1]!)
  return [preview.slice(0, at).trim(), ...names.map((name) => `📎 ${name}`)].filter(Boolean).join(" ")
}
