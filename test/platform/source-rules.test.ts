import { assert, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"

/**
 * Rules on the sources that the compiler does not check (issue 49).
 *
 * No `as any` in src/ (item 3). Where a library's types cannot say what the code knows (a class whose static
 * schema is redefined, Node's lookup callback with `all`), the cast names its target type (`as unknown as T`) and a
 * comment says why, so the compiler still checks everything around it.
 */
const sources = (dir: string): Array<string> =>
  Fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = Path.join(dir, entry.name)
    return entry.isDirectory() ? sources(path) : /\.tsx?$/.test(entry.name) ? [path] : []
  })

/**
 * Every name has one home (item 2): no module re-exports another's names, so a reader finds a name where it is
 * declared and an import says where that is. The one exception is the typed client's entry point (`src/client.ts`),
 * the package's public face, which gathers what its callers import.
 */
const REEXPORT = /^export (type )?(\*|\{[^}]*\}) from /m

describe("source rules", () => {
  it("no `as any` in src/", () => {
    const found = sources("src").flatMap((file) =>
      Fs.readFileSync(file, "utf8").split("\n").flatMap((line, index) =>
        /\bas any\b/.test(line.replace(/\/\/.*$/, "").replace(/^\s*\*.*$/, "")) ? [`${file}:${index + 1}: ${line.trim()}`] : []
      )
    )
    assert.deepStrictEqual(found, [])
  })

  it("no re-exports in src/ but the client's entry point", () => {
    const found = sources("src").filter((file) => file !== Path.join("src", "client.ts") && REEXPORT.test(Fs.readFileSync(file, "utf8")))
    assert.deepStrictEqual(found, [])
  })
})
