import { describe, expect, it } from "@effect/vitest"
import { newId, randomBase62, randomHex } from "../../src/platform/Ids.js"

// Ids draw their bytes from a pooled CSPRNG buffer (Ids.ts): each byte used once, across refills of the pool.
describe("ids", () => {
  it("base62 ids have their length and alphabet, and no two of many are alike, across refills of the pool", () => {
    const ids = Array.from({ length: 5_000 }, () => randomBase62(20))
    for (const id of ids) expect(id).toMatch(/^[0-9A-Za-z]{20}$/)
    expect(new Set(ids).size).toBe(ids.length)
    // Every character appears: the rejection sampling reaches the whole alphabet.
    expect(new Set(ids.join("")).size).toBe(62)
    expect(newId("run")).toMatch(/^run_[0-9A-Za-z]{20}$/)
  })

  it("hex ids have two characters a byte and differ", () => {
    const ids = Array.from({ length: 5_000 }, () => randomHex(8))
    for (const id of ids) expect(id).toMatch(/^[0-9a-f]{16}$/)
    expect(new Set(ids).size).toBe(ids.length)
  })
})
