import { assert, describe, it } from "@effect/vitest"
import { readFileSync } from "node:fs"
import { createRequire } from "node:module"
import { resolve } from "node:path"

/**
 * `npm ci` prints no engine warning on a supported Node (issue 48 item 15): every package the lockfile installs
 * accepts the oldest release of each line `engines` allows. A client SDK bumped to a release that wants Node 22
 * (`ai` 7, `openai` 7 under `@langchain/openai` 1.5.9+ or `@openai/agents` 0.15+) fails here, not on a user's install.
 */

const ROOT = resolve(import.meta.dirname, "..", "..")
const semver = createRequire(import.meta.url)("semver") as {
  satisfies: (version: string, range: string) => boolean
  minVersion: (range: string) => { version: string } | null
}

type Lock = { packages: Record<string, { version?: string; engines?: { node?: string } | Array<string> }> }

const lock = JSON.parse(readFileSync(resolve(ROOT, "package-lock.json"), "utf8")) as Lock
const range = lock.packages[""]!.engines as { node: string }

/** The first release of each line the range allows: 20.19.0 and 22.13.0 for `^20.19.0 || >=22.13.0`. */
const oldest = range.node.split("||").map((part) => semver.minVersion(part.trim())!.version)

describe("engines", () => {
  it("package.json and its lockfile agree on the range", () => {
    const manifest = JSON.parse(readFileSync(resolve(ROOT, "package.json"), "utf8")) as { engines: { node: string } }
    assert.strictEqual(manifest.engines.node, range.node)
    assert.deepStrictEqual(oldest, ["20.19.0", "22.13.0"])
  })

  for (const node of oldest) {
    it(`every installed package accepts Node ${node}`, () => {
      const refused = Object.entries(lock.packages).flatMap(([path, entry]) => {
        const wanted = Array.isArray(entry.engines) ? undefined : entry.engines?.node
        if (path === "" || wanted === undefined || semver.satisfies(node, wanted)) return []
        return [`${path.replace(/^.*node_modules\//, "")}@${entry.version} wants node ${wanted}`]
      })
      assert.deepStrictEqual(refused, [])
    })
  }
})
