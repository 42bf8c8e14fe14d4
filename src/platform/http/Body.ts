import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import type * as Multipart from "@effect/platform/Multipart"
import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import { type Duration, Effect, Either, Option } from "effect"
import * as Crypto from "node:crypto"
import type { IncomingMessage } from "node:http"
import type { Readable } from "node:stream"
import { RequestTimeout } from "../Errors.js"
import { wireErrorResponse } from "./ErrorResponse.js"

/**
 * Request bodies at the edge (DESIGN.md §6, issue 42 items 3 and 4): the deadline a body must arrive by, reading one
 * under the limit, and the checks a multipart upload passes before any part of it reaches a parser or the disk.
 */

/**
 * Reads a body up to `limit` bytes; none when it is longer. Past the limit it stops keeping the bytes but lets the
 * rest drain, so the caller gets its 413 instead of a reset connection (the platform's own limit destroys the
 * request, and with it the socket the answer would go out on).
 */
export const readLimited = (source: Readable, limit: number) =>
  Effect.async<Option.Option<Buffer>, Error>((resume) => {
    const chunks: Array<Buffer> = []
    let size = 0
    const cleanup = () => {
      source.off("data", onData)
      source.off("end", onEnd)
      source.off("error", onError)
      source.off("close", onClose)
    }
    const onData = (chunk: Buffer) => {
      size += chunk.length
      if (size <= limit) return void chunks.push(chunk)
      cleanup()
      source.resume()
      resume(Effect.succeed(Option.none()))
    }
    const onEnd = () => {
      cleanup()
      resume(Effect.succeed(Option.some(Buffer.concat(chunks))))
    }
    const onError = (error: Error) => {
      cleanup()
      resume(Effect.fail(error))
    }
    const onClose = () => onError(new Error("the request closed before its body ended"))
    source.on("data", onData)
    source.once("end", onEnd)
    source.once("error", onError)
    source.once("close", onClose)
    return Effect.sync(cleanup)
  })

/** The same request (URL, method, headers, peer address) with `bytes` as its body, read from memory by the route. */
export const withBody = (request: HttpServerRequest.HttpServerRequest, bytes: Uint8Array) => {
  // GET and HEAD carry no body a route reads (and a web Request refuses one).
  const carries = request.method !== "GET" && request.method !== "HEAD"
  const web = new Request("http://localhost/", { method: request.method, ...(carries ? { body: bytes } : {}) })
  return HttpServerRequest.fromWeb(web).modify({
    url: request.url,
    headers: request.headers,
    ...Option.match(request.remoteAddress, { onNone: () => ({}), onSome: (remoteAddress) => ({ remoteAddress }) })
  })
}

/**
 * The answer for a request whose body did not arrive in time, once that is so; undefined when there is nothing to
 * wait for (no body, or all of it here already). `stall`: the storage route takes files of any size, so there the
 * body must keep moving (a byte within every `timeout`) rather than be whole by then. Before this, a multipart body
 * that never ended was never answered, and held its socket as long as its client liked (issue 42 item 3).
 */
export const bodyDeadline = (request: HttpServerRequest.HttpServerRequest, timeout: Duration.Duration, stall: boolean) => {
  const length = request.headers["content-length"]
  if (request.headers["transfer-encoding"] === undefined && (length === undefined || Number(length) === 0)) return undefined
  const incoming = NodeHttpServerRequest.toIncomingMessage(request) as Partial<IncomingMessage>
  // `complete` is set by Node's parser when the message's last byte arrived, whether or not the route read it yet.
  if (typeof incoming.complete !== "boolean" || incoming.complete) return undefined
  const received = () => incoming.socket?.bytesRead ?? 0
  return Effect.gen(function*() {
    let seen = received()
    while (true) {
      yield* Effect.sleep(timeout)
      // Arrived: whatever the route does with it now is not the body's wait, and this never answers.
      if (incoming.complete) return yield* Effect.never
      if (!stall || received() === seen) break
      seen = received()
    }
    // `Connection: close`: Node ends the socket once the answer is out, rather than wait for the rest of the body.
    return yield* wireErrorResponse(
      new RequestTimeout({
        message: stall
          ? "The request body stopped arriving (REQUEST_BODY_TIMEOUT)."
          : "The request body did not arrive in time (REQUEST_BODY_TIMEOUT)."
      }),
      { connection: "close" }
    )
  })
}

/** The limits of a multipart upload, checked before a parser or the disk sees a part. */
export const MULTIPART = {
  /** OpenAI's upload has two parts (`file`, `purpose`); a few more leave room for fields a client adds. */
  maxParts: 8,
  /** Browsers and SDKs write a few hundred bytes of part headers; 8 KiB is HTTP servers' usual header limit. */
  headerBytes: 8 * 1024,
  /** A field (not a file) is a short value such as `purpose`. */
  fieldBytes: 64 * 1024,
  /** Most file systems' limit on one name (ext4, APFS, NTFS), in bytes of UTF-8. */
  fileNameBytes: 255
} as const

/** The limits `@effect/platform`'s parser applies too (`Multipart.withLimits`), a second wall behind the checks. */
export const multipartLimits: Multipart.withLimits.Options = {
  maxParts: Option.some(MULTIPART.maxParts),
  maxFieldSize: MULTIPART.fieldBytes
}

/**
 * `; key=value` parameters of a header value after its first token, as RFC 7231 3.1.1.1 writes them (the grammar
 * the platform's multipart parser, multipasta, reads them by): undefined when they do not all parse, so a value this
 * reads differently from the parser is refused rather than checked for something the parser never sees.
 */
const PARAMETER = /; *([!#$%&'*+.^\w`|~-]+)=("(?:[\v\u0020\u0021\u0023-\u005b\u005d-\u007e\u0080-\u00ff]|\\[\v\u0020-\u00ff])*"|[!#$%&'*+.^\w`|~-]+) */gu
const parameters = (value: string, token: RegExp): Record<string, string> | undefined => {
  let index = value.indexOf(";")
  if (!token.test((index === -1 ? value : value.slice(0, index)).trim())) return undefined
  const found: Record<string, string> = Object.create(null)
  if (index === -1) return found
  PARAMETER.lastIndex = index
  let match: RegExpExecArray | null
  while ((match = PARAMETER.exec(value)) !== null) {
    if (match.index !== index) return undefined
    index += match[0].length
    const raw = match[2]!
    found[match[1]!.toLowerCase()] = raw.startsWith("\"") ? raw.slice(1, -1).replace(/\\([\v\u0020-\u00ff])/gu, "$1") : raw
  }
  return index === value.length ? found : undefined
}
const MEDIA_TYPE = /^[!#$%&'*+.^\w|~-]+\/[!#$%&'*+.^\w|~-]+$/u
const DISPOSITION = /^[!#$%&'*+.^\w|~-]+$/u

const CRLF = Buffer.from("\r\n")
const BLANK_LINE = Buffer.from("\r\n\r\n")
const utf8 = new TextDecoder("utf-8")

/** Why a part's file name cannot be kept, or undefined. `name` is what the parser will make of the header. */
const fileNameProblem = (name: string) => {
  if (/[\u0000-\u001f\u007f]/.test(name)) return "file name: must not contain NUL or other control characters"
  // The parser names its temporary file after the name's last path segment: `.` or `..` would name its folder.
  const last = name.split("/").pop()!
  if (name !== "" && (last === "" || last === "." || last === "..")) return "file name: must end in a file's name, not `/`, `.` or `..`"
  const bytes = Buffer.byteLength(name)
  if (bytes > MULTIPART.fileNameBytes) return `file name: at most ${MULTIPART.fileNameBytes} bytes of UTF-8 (this one has ${bytes})`
  return undefined
}

/** Why one part's header block is refused, or undefined. */
const partHeadersProblem = (block: string) => {
  let disposition: string | undefined
  for (const line of block.split("\r\n").filter((line) => line !== "")) {
    const colon = line.indexOf(":")
    if (colon <= 0 || !/^[!#$%&'*+.^\w`|~-]+$/.test(line.slice(0, colon))) return "a part has a header line that is not `Name: value`"
    if (line.slice(0, colon).toLowerCase() === "content-disposition") disposition = line.slice(colon + 1).trim()
  }
  // Refused by the parameters' grammar too, but then the answer would not say what was wrong with the name.
  if (disposition !== undefined && /[\u0000-\u0008\u000a-\u001f\u007f]/.test(disposition)) {
    return "file name: must not contain NUL or other control characters (nor may the rest of Content-Disposition)"
  }
  const parsed = disposition === undefined ? undefined : parameters(disposition, DISPOSITION)
  if (parsed === undefined || disposition!.split(";")[0]!.trim().toLowerCase() !== "form-data" || parsed["name"] === undefined) {
    return "each part needs a readable `Content-Disposition: form-data; name=\"...\"` (a file name beyond ISO-8859-1 goes in filename*=UTF-8''...)"
  }
  let name = parsed["filename"]
  const extended = parsed["filename*"]
  if (extended !== undefined) {
    // RFC 8187: charset''percent-encoded. The parser decodes it unguarded, and a malformed one threw out of it.
    const halves = extended.split("''")
    if (halves.length === 2) {
      try {
        name = decodeURIComponent(halves[1]!)
      } catch {
        return "file name: filename* is not valid percent-encoded UTF-8 (RFC 8187)"
      }
    }
  }
  return name === undefined ? undefined : fileNameProblem(name)
}

/**
 * Checks a `multipart/form-data` body (RFC 7578) whole, as it arrived: the boundary its `Content-Type` names, each
 * part delimited by it and closed, each part's headers within `MULTIPART.headerBytes` with a readable disposition, a
 * file name the disk can hold, at most `MULTIPART.maxParts` parts. Left: the problem, for a 400 that names it.
 * Right: a digest of the parts without their boundary (an `Idempotency-Key` retry may be written with another).
 */
export const checkMultipart = (contentType: string, body: Uint8Array): Either.Either<string, string> => {
  const refused = (problem: string) => Either.left(`Invalid request: multipart body: ${problem}`)
  const boundary = parameters(contentType, MEDIA_TYPE)?.["boundary"]
  if (boundary === undefined) return refused("Content-Type names no boundary (multipart/form-data; boundary=...)")
  if (boundary.length > 70) return refused("the boundary is longer than 70 characters (RFC 2046)")
  const bytes = Buffer.from(body.buffer, body.byteOffset, body.byteLength)
  // Each delimiter is CRLF, `--`, the boundary; the first may open the body without the CRLF.
  const delimiter = Buffer.from(`\r\n--${boundary}`)
  let at = bytes.subarray(0, delimiter.length - 2).equals(delimiter.subarray(2)) ? -2 : bytes.indexOf(delimiter)
  if (at === -1) return refused("no part starts with the boundary its Content-Type names")
  const digest = Crypto.createHash("sha256")
  let parts = 0
  while (true) {
    const after = at + delimiter.length
    if (bytes[after] === 0x2d && bytes[after + 1] === 0x2d) break
    if (after + 2 > bytes.length) return refused("the body ends before its closing boundary")
    if (!bytes.subarray(after, after + 2).equals(CRLF)) return refused("a boundary line does not end with CRLF")
    if (++parts > MULTIPART.maxParts) return refused(`more than ${MULTIPART.maxParts} parts`)
    const start = after + 2
    const next = bytes.indexOf(delimiter, start)
    const end = next === -1 ? bytes.length : next
    const empty = bytes.subarray(start, start + 2).equals(CRLF)
    const headerEnd = empty ? start : bytes.indexOf(BLANK_LINE, start)
    const headerBytes = (headerEnd === -1 || headerEnd > end ? end : headerEnd) - start
    if (headerBytes > MULTIPART.headerBytes) {
      return refused(`a part's headers exceed ${MULTIPART.headerBytes} bytes`)
    }
    if (next === -1) return refused("the body ends before its closing boundary")
    if (headerEnd === -1 || headerEnd > end) return refused("a part's headers do not end with a blank line")
    const problem = partHeadersProblem(utf8.decode(bytes.subarray(start, headerEnd)))
    if (problem !== undefined) return refused(problem)
    const content = bytes.subarray(empty ? start + 2 : headerEnd + 4, end)
    // Lengths first, so no two different bodies digest alike by moving bytes between a part's headers and content.
    digest.update(`${headerEnd - start}:${content.length}:`).update(bytes.subarray(start, headerEnd)).update(content)
    at = next
  }
  if (parts === 0) return refused("no parts")
  return Either.right(`multipart:${digest.digest("base64url")}`)
}

/**
 * The 400 for what `@effect/platform`'s parser still refused after the checks above (a field over its limit, say),
 * which HttpApi lets escape as a defect; undefined for a failure of ours (writing the file), which stays a 500.
 */
export const multipartFailure = (error: { readonly reason?: string; readonly cause?: unknown }) => {
  const cause = error.cause as { readonly _tag?: string; readonly error?: { readonly reason?: string } } | undefined
  switch (error.reason) {
    case "TooManyParts":
      return `Invalid request: multipart body: more than ${MULTIPART.maxParts} parts`
    case "FieldTooLarge":
      return `Invalid request: multipart body: a field is larger than ${MULTIPART.fieldBytes} bytes`
    case "FileTooLarge":
    case "BodyTooLarge":
      return "Invalid request: multipart body: larger than the API's body limit (MAX_BODY_BYTES)"
    case "Parse":
      return `Invalid request: multipart body: could not be parsed (${cause?.error?.reason ?? cause?._tag ?? "malformed"})`
    default:
      return undefined
  }
}
