import { assert, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"

/**
 * No `as any` in src/ (issue 49 item 3). Where a library's types cannot say what the code knows (a class whose static
 * schema is redefined, Node's lookup callback with `all`), the cast names its target type (`as unknown as T`) and a
 * comment says why, so the compiler still checks everything around it.
 */
const sources = (dir: string): Array<string> =>
  Fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = Path.join(dir, entry.name)
    return entry.isDirectory() ? sources(path) : /\.tsx?$/.test(entry.name) ? [path] : []
  })

describe("casts", () => {
  it("no `as any` in src/", () => {
    const found = sources("src").flatMap((file) =>
      Fs.readFileSync(file, "utf8").split("\n").flatMap((line, index) =>
        /\bas any\b/.test(line.replace(/\/\/.*$/, "").replace(/^\s*\*.*$/, "")) ? [`${file}:${index + 1}: ${line.trim()}`] : []
      )
    )
    assert.deepStrictEqual(found, [])
  })
})
