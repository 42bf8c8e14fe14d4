/**
 * What a model or a tool says, made storable. PostgreSQL's `text` and `jsonb` refuse a NUL character and a lone
 * UTF-16 surrogate. A caller's input is refused for them at the edge (`http/Text.ts`), but a model's output or a
 * tool's result is not the caller's to fix: each such character becomes U+FFFD, the replacement character, as a
 * decoder does with bytes it cannot read. Unmended, one NUL from a model made its session's log write fail again and
 * again, and the session never answered (session 26).
 */

const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/
const UNSTORABLE_ALL = new RegExp(UNSTORABLE.source, "g")

/** `text` with every NUL and lone surrogate replaced; the same string when it has none (the usual case). */
export const storableText = (text: string): string => UNSTORABLE.test(text) ? text.replace(UNSTORABLE_ALL, "\uFFFD") : text

/** A JSON-like value (a tool's result, a call's arguments) with every string and key made storable. */
export const storableValue = <A>(value: A): A => {
  if (typeof value === "string") return storableText(value) as A
  // Copied only from the first character mended on: a run tells every event through here, and nearly none has one.
  if (Array.isArray(value)) {
    let mended: Array<unknown> | undefined
    for (let index = 0; index < value.length; index++) {
      const next = storableValue(value[index])
      if (mended === undefined && next !== value[index]) mended = value.slice(0, index)
      mended?.push(next)
    }
    return (mended ?? value) as A
  }
  if (typeof value === "object" && value !== null && Object.getPrototypeOf(value) === Object.prototype) {
    const entries = value as Record<string, unknown>
    const keys = Object.keys(entries)
    let mended: Record<string, unknown> | undefined
    for (let index = 0; index < keys.length; index++) {
      const key = keys[index]!
      const name = storableText(key)
      const next = storableValue(entries[key])
      if (mended === undefined && (name !== key || next !== entries[key])) {
        mended = {}
        for (const earlier of keys.slice(0, index)) mended[earlier] = entries[earlier]
      }
      if (mended !== undefined) mended[name] = next
    }
    return (mended ?? value) as A
  }
  return value
}

/**
 * A stream of text deltas made storable one delta at a time, each on its own (every delta is an event of its own):
 * a surrogate pair a provider splits across two deltas is whole again in the second, not two replacement characters.
 */
export const makeStorableDeltas = () => {
  let held = ""
  return {
    /** The part of `delta` that can be told now. */
    next: (delta: string): string => {
      const text = held + delta
      const last = text.charCodeAt(text.length - 1)
      const splitPair = last >= 0xd800 && last <= 0xdbff
      held = splitPair ? text.slice(-1) : ""
      return storableText(splitPair ? text.slice(0, -1) : text)
    },
    /** What was held back, once the stream ended. */
    rest: (): string => {
      const text = held
      held = ""
      return storableText(text)
    }
  }
}
