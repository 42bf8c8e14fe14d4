import { describe, expect, it } from "@effect/vitest"
import { Either, Option, Schema, SchemaAST } from "effect"
import { AtriumApi } from "../../src/Api.js"
import { FileId } from "../../src/files/Domain.js"
import { newId, prefixedId, randomBase62, randomHex } from "../../src/platform/Ids.js"

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

  it("a prefixed id's schema checks the prefix; `.unchecked` does not; `.random()` mints one of its kind", () => {
    const ThingId = prefixedId("thg", "ThingId")
    expect(ThingId.random()).toMatch(/^thg_[0-9A-Za-z]{20}$/)
    expect(Schema.decodeUnknownSync(ThingId)("thg_1")).toBe("thg_1")
    expect(Either.isLeft(Schema.decodeUnknownEither(ThingId)("run_1"))).toBe(true)
    expect(Schema.decodeUnknownSync(ThingId.unchecked)("run_1")).toBe("run_1")
    expect(() => ThingId.make("run_1")).toThrow()
    // Encoding does not check: a repository's request carries an id a path let through, and finds nothing with it.
    expect(Schema.encodeSync(ThingId)(ThingId.unchecked.make("run_1"))).toBe("run_1")
    expect(FileId.make("file_1")).toBe("file_1")
  })

  // The wire does not change (docs/architecture.md, "Ids"): an id of another kind in a path answers 404 `not_found`
  // as an unknown one does, so no path parameter that names an id rejects it while decoding (that would be a 400).
  it("no path parameter of the API rejects an id of another kind", () => {
    const refused: Array<string> = []
    let seen = 0
    for (const group of Object.values(AtriumApi.groups)) {
      for (const endpoint of Object.values(group.endpoints)) {
        if (Option.isNone(endpoint.pathSchema)) continue
        const ast = SchemaAST.typeAST(endpoint.pathSchema.value.ast)
        if (!SchemaAST.isTypeLiteral(ast)) continue
        for (const property of ast.propertySignatures) {
          const name = String(property.name)
          if (name !== "id" && !name.endsWith("_id")) continue
          seen++
          const decoded = Schema.decodeUnknownEither(endpoint.pathSchema.value)
          const sample = Object.fromEntries(ast.propertySignatures.map((p) => [String(p.name), String(p.name) === name ? "zzz_foreign" : "1"]))
          if (Either.isLeft(decoded(sample))) refused.push(`${endpoint.method} ${endpoint.path} (${name})`)
        }
      }
    }
    expect(seen).toBeGreaterThan(20)
    expect(refused).toEqual([])
  })
})
