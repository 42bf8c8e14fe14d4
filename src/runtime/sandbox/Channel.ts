import type { SandboxLimits } from "./Sandbox.js"

/**
 * The channel between the host and a guest process (docs/tools.md, "The channel"): length-prefixed JSON frames over
 * a socket pair the guest inherits as its fd 3. It replaces Node's IPC channel, which parses whatever the other side
 * sends, however large: a guest that broke its runtime could make the server read gigabytes. Here the host reads the
 * 4-byte length first and refuses a frame over the cap before it holds or parses a byte of it.
 *
 * The guest speaks the same format (`guest.mjs` has its own copy: it runs without the TypeScript build).
 */

/** The guest's fd for the channel: the fourth entry of `stdio` (after stdin, stdout, stderr). */
export const CHANNEL_FD = 3

export const HEADER_BYTES = 4

/** Room for what surrounds the payloads in a reply (ids, field names, a path per file). */
const ENVELOPE_BYTES = 64 * 1024
const PER_FILE_BYTES = 256

/**
 * The largest reply a guest may send, from its limits: stdout, stderr and the result together are at most
 * `outputBytes` of UTF-8, which JSON may escape to six bytes a byte (a control character is `\u0000`); changed files
 * are at most `fileBytes` in all, sent as base64 (4 bytes for 3), each with its path.
 */
export const frameCap = (limits: SandboxLimits): number =>
  6 * limits.outputBytes + 4 * Math.ceil(limits.fileBytes / 3) + PER_FILE_BYTES * limits.maxFiles + ENVELOPE_BYTES

export const encodeFrame = (message: unknown): Buffer => {
  const body = Buffer.from(JSON.stringify(message), "utf8")
  const header = Buffer.allocUnsafe(HEADER_BYTES)
  header.writeUInt32BE(body.length, 0)
  return Buffer.concat([header, body])
}

export interface FrameReader {
  /** Bytes as they arrive, in any cut: frames are delivered whole, in order. */
  readonly push: (chunk: Uint8Array) => void
  /** Stops reading: what arrives later is dropped unread. */
  readonly stop: () => void
  /** Bytes held for a frame not yet complete (never more than the cap). */
  readonly held: () => number
  /** Bytes handed to `JSON.parse` so far. */
  readonly parsed: () => number
}

/**
 * Reads frames of at most `cap` bytes. A larger length, or a frame that is not JSON, is refused at once and the
 * reader stops: the caller kills the guest, which can no longer be trusted to speak the protocol.
 */
export const makeFrameReader = (
  cap: number,
  on: {
    readonly frame: (message: unknown) => void
    readonly refuse: (problem: { readonly _tag: "Oversized"; readonly bytes: number } | { readonly _tag: "Malformed" }) => void
  }
): FrameReader => {
  const header = Buffer.alloc(HEADER_BYTES)
  let headerFilled = 0
  let body: Buffer | undefined
  let bodyFilled = 0
  let parsed = 0
  let stopped = false

  const push = (chunk: Uint8Array) => {
    let at = 0
    while (!stopped && at < chunk.length) {
      if (body === undefined) {
        const take = Math.min(HEADER_BYTES - headerFilled, chunk.length - at)
        header.set(chunk.subarray(at, at + take), headerFilled)
        headerFilled += take
        at += take
        if (headerFilled < HEADER_BYTES) return
        headerFilled = 0
        const length = header.readUInt32BE(0)
        if (length > cap) {
          stopped = true
          on.refuse({ _tag: "Oversized", bytes: length })
          return
        }
        // Allocated once the length is known to be within the cap: the guest chooses no larger buffer than that.
        body = Buffer.allocUnsafe(length)
        bodyFilled = 0
      }
      const take = Math.min(body.length - bodyFilled, chunk.length - at)
      body.set(chunk.subarray(at, at + take), bodyFilled)
      bodyFilled += take
      at += take
      if (bodyFilled < body.length) return
      const complete = body
      body = undefined
      parsed += complete.length
      let message: unknown
      try {
        message = JSON.parse(complete.toString("utf8"))
      } catch {
        stopped = true
        on.refuse({ _tag: "Malformed" })
        return
      }
      on.frame(message)
    }
  }

  return {
    push,
    stop: () => {
      stopped = true
      body = undefined
    },
    held: () => (body === undefined ? headerFilled : bodyFilled),
    parsed: () => parsed
  }
}
