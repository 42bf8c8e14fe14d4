import { assert, describe, it } from "@effect/vitest"
import { makeStorableDeltas, storableText, storableValue } from "../../src/platform/Storable.js"

/**
 * A model's or a tool's words made storable (src/platform/Storable.ts): PostgreSQL's text and jsonb refuse a NUL and
 * a lone UTF-16 surrogate; each becomes U+FFFD, and nothing else changes.
 */
describe("storable text", () => {
  it("a NUL and lone surrogates become U+FFFD; pairs, other control characters and plain text stay", () => {
    assert.strictEqual(storableText("a\u0000b"), "a\uFFFDb")
    assert.strictEqual(storableText("x\uD800y\uDC00z"), "x\uFFFDy\uFFFDz")
    assert.strictEqual(storableText("\uD83D\uDE00 \t\n\u0001"), "\uD83D\uDE00 \t\n\u0001")
    const plain = "nothing to mend"
    assert.strictEqual(storableText(plain), plain)
  })

  it("a value: every string and key mended, and the very same value when none needs it", () => {
    assert.deepStrictEqual(storableValue<unknown>({ "k\u0000": ["a\u0000", 1, null, { deep: "\uDC00" }], n: 2 }), {
      "k\uFFFD": ["a\uFFFD", 1, null, { deep: "\uFFFD" }],
      n: 2
    })
    // What comes before and after the first mended character is kept, in order.
    assert.deepStrictEqual(storableValue<unknown>({ a: 1, b: ["x", "y", "z\u0000", "w"], c: { d: 2, "e\u0000": 3, f: 4 }, g: 5 }), {
      a: 1,
      b: ["x", "y", "z\uFFFD", "w"],
      c: { d: 2, "e\uFFFD": 3, f: 4 },
      g: 5
    })
    const clean = { a: ["b", { c: "d" }], e: 1 }
    assert.strictEqual(storableValue(clean), clean)
  })

  it("deltas: a pair split across two is whole in the second; a stream ending inside one ends with U+FFFD", () => {
    const deltas = makeStorableDeltas()
    assert.strictEqual(deltas.next("smile \uD83D"), "smile ")
    assert.strictEqual(deltas.next("\uDE00!"), "\uD83D\uDE00!")
    assert.strictEqual(deltas.next("end \uD83D"), "end ")
    assert.strictEqual(deltas.rest(), "\uFFFD")
    assert.strictEqual(deltas.rest(), "")
  })
})
