/**
 * The `application/vnd.amazon.eventstream` framing of Bedrock's ConverseStream, written out because
 * `@effect/ai-amazon-bedrock` 0.15 is built for `@effect/ai` 0.35 (docs/models.md): each message is
 * `total length (u32) | headers length (u32) | prelude CRC32 | headers | payload | message CRC32`, big-endian,
 * headers as `name length (u8) | name | type (u8) | value`. (Request signing is `aws4fetch`'s, in `Bedrock.ts`.)
 */

const CRC_TABLE = (() => {
  const table = new Uint32Array(256)
  for (let n = 0; n < 256; n++) {
    let c = n
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1
    table[n] = c >>> 0
  }
  return table
})()

export const crc32 = (bytes: Uint8Array, start = 0, end = bytes.length): number => {
  let crc = 0xffffffff
  for (let i = start; i < end; i++) crc = CRC_TABLE[(crc ^ bytes[i]!) & 0xff]! ^ (crc >>> 8)
  return (crc ^ 0xffffffff) >>> 0
}

export interface EventMessage {
  readonly headers: Readonly<Record<string, string | number | boolean>>
  readonly payload: Uint8Array
}

const decoder = new TextDecoder()

const readHeaders = (bytes: Uint8Array, view: DataView, from: number, to: number) => {
  const headers: Record<string, string | number | boolean> = {}
  let at = from
  while (at < to) {
    const nameLength = bytes[at]!
    const name = decoder.decode(bytes.subarray(at + 1, at + 1 + nameLength))
    at += 1 + nameLength
    const type = bytes[at++]!
    switch (type) {
      case 0:
      case 1:
        headers[name] = type === 0
        break
      case 2:
        headers[name] = view.getInt8(at)
        at += 1
        break
      case 3:
        headers[name] = view.getInt16(at)
        at += 2
        break
      case 4:
        headers[name] = view.getInt32(at)
        at += 4
        break
      case 5:
      case 8:
        headers[name] = Number(view.getBigInt64(at))
        at += 8
        break
      case 6:
      case 7: {
        const length = view.getUint16(at)
        headers[name] = decoder.decode(bytes.subarray(at + 2, at + 2 + length))
        at += 2 + length
        break
      }
      case 9:
        at += 16
        break
      default:
        throw new Error(`unknown event-stream header type ${type}`)
    }
  }
  return headers
}

/** Splits a byte stream into event-stream messages across chunk boundaries that fall anywhere. */
export class EventStreamDecoder {
  private buffer = new Uint8Array(0)

  /** The messages completed by `chunk`; throws on a frame whose checksums do not match. */
  feed(chunk: Uint8Array): Array<EventMessage> {
    const joined = new Uint8Array(this.buffer.length + chunk.length)
    joined.set(this.buffer)
    joined.set(chunk, this.buffer.length)
    this.buffer = joined
    const out: Array<EventMessage> = []
    while (this.buffer.length >= 12) {
      const view = new DataView(this.buffer.buffer, this.buffer.byteOffset, this.buffer.byteLength)
      const total = view.getUint32(0)
      const headersLength = view.getUint32(4)
      if (total < 16 || total > 16 * 1024 * 1024) throw new Error(`event-stream message of ${total} bytes`)
      if (view.getUint32(8) !== crc32(this.buffer, 0, 8)) throw new Error("event-stream prelude checksum mismatch")
      if (this.buffer.length < total) break
      if (view.getUint32(total - 4) !== crc32(this.buffer, 0, total - 4)) throw new Error("event-stream message checksum mismatch")
      out.push({
        headers: readHeaders(this.buffer, view, 12, 12 + headersLength),
        payload: this.buffer.slice(12 + headersLength, total - 4)
      })
      this.buffer = this.buffer.slice(total)
    }
    return out
  }

  get pending(): number {
    return this.buffer.length
  }
}

/** One event-stream message with string headers (what a fake upstream in the tests sends). */
export const encodeMessage = (headers: Readonly<Record<string, string>>, payload: Uint8Array): Uint8Array => {
  const encoder = new TextEncoder()
  const parts: Array<number> = []
  for (const [name, value] of Object.entries(headers)) {
    const n = encoder.encode(name)
    const v = encoder.encode(value)
    parts.push(n.length, ...n, 7, (v.length >> 8) & 0xff, v.length & 0xff, ...v)
  }
  const headerBytes = Uint8Array.from(parts)
  const total = 12 + headerBytes.length + payload.length + 4
  const out = new Uint8Array(total)
  const view = new DataView(out.buffer)
  view.setUint32(0, total)
  view.setUint32(4, headerBytes.length)
  view.setUint32(8, crc32(out, 0, 8))
  out.set(headerBytes, 12)
  out.set(payload, 12 + headerBytes.length)
  view.setUint32(total - 4, crc32(out, 0, total - 4))
  return out
}
