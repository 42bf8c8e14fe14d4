/**
 * Expert icons (issue 48 item 4, docs/marketplace.md "Icons"): a creator uploads a PNG, JPEG or WebP of at most
 * 256 KB, recognised by its first bytes (never by a name or a declared type), or the expert gets one drawn from its
 * name. SVG is never accepted from anyone: an SVG can carry script, and an icon is shown on everyone's page.
 */

export const MAX_ICON_BYTES = 256 * 1024

export type IconType = "image/png" | "image/jpeg" | "image/webp"

/** The image type the bytes begin with, or undefined for anything else (SVG, GIF, HTML, text...). */
export const sniffIcon = (bytes: Uint8Array): IconType | undefined => {
  const starts = (offset: number, ...values: ReadonlyArray<number>) => values.every((v, i) => bytes[offset + i] === v)
  if (bytes.length >= 8 && starts(0, 0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a)) return "image/png"
  if (bytes.length >= 3 && starts(0, 0xff, 0xd8, 0xff)) return "image/jpeg"
  // RIFF....WEBP
  if (bytes.length >= 12 && starts(0, 0x52, 0x49, 0x46, 0x46) && starts(8, 0x57, 0x45, 0x42, 0x50)) return "image/webp"
  return undefined
}

/** Colours that white text reads on (contrast 4.5:1 or more), so a generated icon passes the same checks as the page. */
const PALETTE = ["#1d4ed8", "#b91c1c", "#047857", "#6d28d9", "#a16207", "#0f766e", "#be185d", "#4338ca", "#374151", "#9a3412"]

/** FNV-1a over the UTF-16 units: small, stable across runs and machines. */
export const hashOf = (text: string) => {
  let hash = 0x811c9dc5
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i)
    hash = Math.imul(hash, 0x01000193) >>> 0
  }
  return hash
}

/** Up to two initials: the first letter of the first two words (by code point, so an emoji or accent stays whole). */
export const initialsOf = (name: string) => {
  const words = name.trim().split(/\s+/).filter((word) => word.length > 0)
  const letters = words.slice(0, 2).map((word) => Array.from(word)[0]!.toLocaleUpperCase())
  return letters.length === 0 ? "?" : letters.join("")
}

const escapeXml = (text: string) =>
  text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "'": "&apos;" })[c]!)

/** The icon drawn from a name: its initials in white on a colour picked by the name's hash. Deterministic. */
export const generatedIcon = (name: string) => {
  const colour = PALETTE[hashOf(name) % PALETTE.length]!
  const initials = escapeXml(initialsOf(name))
  return `<svg xmlns="http://www.w3.org/2000/svg" width="96" height="96" viewBox="0 0 96 96" role="img">` +
    `<rect width="96" height="96" rx="20" fill="${colour}"/>` +
    `<text x="48" y="50" dominant-baseline="middle" text-anchor="middle" fill="#ffffff" ` +
    `font-family="system-ui, sans-serif" font-size="40" font-weight="600">${initials}</text></svg>`
}

/** A version for the icon's URL: the upload's time, or the name's hash for a drawn one; a change makes a new URL. */
export const iconVersion = (name: string, uploadedAt: Date | null) =>
  uploadedAt === null ? `g${hashOf(name).toString(36)}` : `u${uploadedAt.getTime().toString(36)}`

export const iconUrl = (identifier: string, name: string, uploadedAt: Date | null) =>
  `/api/market/agents/${encodeURIComponent(identifier)}/icon?v=${iconVersion(name, uploadedAt)}`
