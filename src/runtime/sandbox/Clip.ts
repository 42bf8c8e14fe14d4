import { StringDecoder } from "node:string_decoder"

/**
 * Bounds on a sandbox's output as it travels on (docs/tools.md, "Output"): into an event, the log, the model's
 * context and the database. A clipped text keeps its start and ends with a marker that says how large it was and
 * the limit it met, so neither the model nor a reader takes a prefix for the whole. The guest clips the same way
 * (`guest.mjs`), so a result it clipped passes here unchanged.
 */

export const clipMarker = (bytes: number, limit: number) => `…[clipped: ${bytes} bytes, limit ${limit}]`
const MARKER = /…\[clipped: \d+ bytes, limit \d+\]$/

/** The size of a result as the sandbox counts it: a string's own UTF-8 bytes, any other value's JSON text. */
export const resultBytes = (result: unknown): number =>
  result === null || result === undefined
    ? 0
    : Buffer.byteLength(typeof result === "string" ? result : JSON.stringify(result) ?? "")

/** The longest start of `text` within `limit` UTF-8 bytes, never cutting a character in two. */
const head = (text: string, limit: number): string =>
  new StringDecoder("utf8").write(Buffer.from(text.slice(0, limit), "utf8").subarray(0, limit))

/**
 * `text` itself when it fits in `limit` bytes, else its start and the marker. `bytes` is its size before anything
 * upstream clipped it, when that is known.
 */
export const clipText = (text: string, limit: number, bytes?: number): string => {
  const size = Math.max(Buffer.byteLength(text), bytes ?? 0)
  return size <= limit ? text : head(text, limit) + clipMarker(size, limit)
}

/**
 * A result as it may go on: itself when its text fits in `limit` bytes, else a string, the start of its text (a
 * string's own characters, another value's JSON) and the marker. `bytes` is its size before the sandbox clipped it.
 */
export const clipResult = (result: unknown, limit: number, bytes?: number): unknown => {
  const own = resultBytes(result)
  const size = Math.max(own, bytes ?? 0)
  if (size <= limit) return result
  // Clipped upstream (its size says it was larger): its marker gives way to this one.
  const text = typeof result !== "string" ? JSON.stringify(result) : size > own ? result.replace(MARKER, "") : result
  return head(text, limit) + clipMarker(size, limit)
}
