import { assert, describe, it } from "@effect/vitest"
import { FileId } from "../../src/files/Domain.js"
import { chunkText } from "../../src/knowledge/Chunk.js"
import { csvText, extractText, htmlText, isRefusal, jsonText, kindOf } from "../../src/knowledge/Extract.js"
import { fuse } from "../../src/knowledge/Retrieval.js"
import type { Candidate } from "../../src/knowledge/SearchRepo.js"
import { MANUAL } from "./support.js"

/** The pure parts of knowledge: extraction, chunking by structure, reciprocal rank fusion. */
describe("knowledge: chunking", () => {
  it("chunks are exact ranges of the text, start at headings, stay within the budget and overlap", () => {
    const text = `${MANUAL}\n\n## Returns\n\n${"Returns are accepted within 30 days of delivery. ".repeat(40)}`
    const chunks = chunkText(text, { maxTokens: 100, overlapTokens: 40 })
    assert.isAbove(chunks.length, 5)
    for (const [index, chunk] of chunks.entries()) {
      assert.strictEqual(chunk.seq, index)
      assert.strictEqual(text.slice(chunk.start, chunk.end), chunk.text, "a chunk is its range")
      assert.isAtMost(chunk.text.length, 400, "within 100 tokens of 4 characters")
      assert.notMatch(chunk.text, /^\s|\s$/, "no chunk starts or ends on blank space")
    }
    const warranty = chunks.find((c) => c.text.includes("two years"))!
    assert.strictEqual(warranty.heading, "Acme Kettle Manual > Warranty")
    assert.isTrue(warranty.text.startsWith("## Warranty"), "a heading starts its chunk")
    // The long section is cut into several chunks, each starting inside the one before (the overlap).
    const returns = chunks.filter((c) => c.heading.endsWith("Returns"))
    assert.isAbove(returns.length, 3)
    for (let i = 1; i < returns.length; i++) {
      assert.isBelow(returns[i]!.start, returns[i - 1]!.end, "overlap")
      assert.isAbove(returns[i]!.start, returns[i - 1]!.start, "progress")
    }
    // Without overlap, the chunks tile the text.
    const tiled = chunkText(text, { maxTokens: 100, overlapTokens: 0 })
    for (let i = 1; i < tiled.length; i++) assert.isAtLeast(tiled[i]!.start, tiled[i - 1]!.end)
  })

  it("a word longer than the budget is still cut, and an empty text has no chunks", () => {
    const text = "x".repeat(1000)
    const chunks = chunkText(text, { maxTokens: 100, overlapTokens: 0 })
    assert.deepStrictEqual(chunks.map((c) => [c.start, c.end]), [[0, 400], [400, 800], [800, 1000]])
    assert.deepStrictEqual(chunkText("  \n\n ", { maxTokens: 100, overlapTokens: 0 }), [])
  })
})

describe("knowledge: extraction", () => {
  it("kinds by media type, then by extension", () => {
    assert.strictEqual(kindOf("text/markdown", "a.txt"), "markdown")
    assert.strictEqual(kindOf("application/octet-stream", "notes.md"), "markdown")
    assert.strictEqual(kindOf("text/plain; charset=utf-8", "a"), "text")
    assert.strictEqual(kindOf("application/vnd.api+json", "a"), "json")
    assert.strictEqual(kindOf("image/png", "a.png"), undefined)
  })

  it("HTML keeps its text and headings, not its scripts", () => {
    const text = htmlText("<html><head><title>x</title><script>alert(1)</script></head><body><h1>Guide</h1><p>Hello &amp; welcome.</p><ul><li>One</li><li>Two</li></ul><style>p{}</style></body></html>")
    assert.include(text, "# Guide")
    assert.include(text, "Hello & welcome.")
    assert.include(text, "- One")
    assert.notInclude(text, "alert")
    assert.notInclude(text, "p{}")
  })

  it("CSV rows as column: value, quoted fields kept whole; an open quote is refused", () => {
    assert.strictEqual(csvText("name,note\nKettle,\"hot, fast\"\nToaster,\"say \"\"hi\"\"\"\n"), "name: Kettle; note: hot, fast\nname: Toaster; note: say \"hi\"")
    const refused = csvText("a,b\n\"open,1\n")
    assert.isTrue(isRefusal(refused))
  })

  it("JSON as path: value lines; malformed JSON and bytes that are not UTF-8 are refused with a reason", () => {
    assert.strictEqual(jsonText("{\"a\":{\"b\":1},\"c\":[\"x\"]}"), "a.b: 1\n\nc[0]: x")
    const malformed = jsonText("{\"a\": ")
    assert.isTrue(isRefusal(malformed))
    const binary = extractText("text", new Uint8Array([0xff, 0xfe, 0x00, 0x41]))
    assert.isTrue(isRefusal(binary))
    if (isRefusal(binary)) assert.strictEqual(binary.code, "invalid_file")
  })
})

describe("knowledge: fusion", () => {
  const candidate = (seq: number): Candidate => ({
    storeId: "vs", fileId: FileId.make("file_f"), generation: 1, seq, text: "", heading: "", startChar: 0, endChar: 0, filename: "f", attributes: {}, score: 0
  })
  it("reciprocal rank: first in both lists scores 1; a passage in one list scores less than one in both", () => {
    const fused = fuse([[candidate(1), candidate(2)], [candidate(1), candidate(3)]])
    assert.deepStrictEqual(fused.map((p) => p.seq), [1, 2, 3])
    assert.strictEqual(fused[0]!.fusedScore, 1)
    assert.isBelow(fused[1]!.fusedScore, 0.5)
    // One list alone: its first is 1 too.
    assert.strictEqual(fuse([[candidate(7)]])[0]!.fusedScore, 1)
    assert.deepStrictEqual(fuse([[], []]), [])
  })
})
