import { assert, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import config from "../../vitest.config.js"
import { EMBEDDED_ONLY, leftOutOf, SERVICES_ONLY } from "../support/Suites.js"

/**
 * `test/support/Suites.ts` is the one home of which suite runs a file (docs/testing.md, "Which suite runs a file"):
 * what each entry claims is checked here from the files' own imports, so a file listed "unit" that starts using a
 * database, or a process test that starts passing the run's storage, fails this test instead of silently losing the
 * services suite.
 */
const ROOT = Path.resolve(import.meta.dirname, "../..")

const testFiles = (dir: string): Array<string> =>
  Fs.readdirSync(Path.join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = `${dir}/${entry.name}`
    return entry.isDirectory() ? testFiles(path) : entry.name.endsWith(".test.ts") ? [path] : []
  })

/** The helpers that give a test the run's storage (or a process of the platform): reaching one means the mode may matter. */
const STORAGE = new Set([
  "test/support/TestServer.ts",
  "test/support/Database.ts",
  "test/support/Templates.ts",
  "test/support/Services.ts",
  "test/cluster/support.ts",
  "src/platform/Database.ts",
  "src/platform/KeyValue.ts"
])
const PROCESS = "test/support/Process.ts"
/** A file that reads the mode itself. */
const READS_MODE = /process\.env\.(DATABASE_URL|REDIS_URL)|\bservicesMode\b|(?<!\.)\bdatabaseUrl\b/
/** What builds a storage of the run's mode in the test's own process, or hands it to a process. */
const BUILDS_STORAGE = /TestServer\.layer\(|startServer\(|\bmakeStorage\b|\bmakeMigratedStorage\b|\bTestDatabase\(|storage\.env\b|serverWith/

const IMPORT = /^(?:import|export)\b[^"]*?\bfrom "(\.[^"]+)"|\bimport\("(\.[^"]+)"\)/gm

/** Every module a test file reaches through relative imports: through test/ and bench/ helpers, stopping at src/. */
const reached = (file: string, seen = new Set<string>()): Set<string> => {
  if (seen.has(file)) return seen
  seen.add(file)
  if (file.startsWith("src/")) return seen
  for (const match of Fs.readFileSync(Path.join(ROOT, file), "utf8").matchAll(IMPORT)) {
    const target = Path.normalize(Path.join(Path.dirname(file), match[1] ?? match[2]!)).replace(/\.js$/, ".ts")
    const found = [target, target.replace(/\.ts$/, ".tsx")].find((candidate) => Fs.existsSync(Path.join(ROOT, candidate)))
    if (found !== undefined) reached(found, seen)
  }
  return seen
}
const text = (file: string) => Fs.readFileSync(Path.join(ROOT, file), "utf8")
/** The test file and the helpers of its own (not test/support/'s shared ones, which hold the makers themselves). */
const ownCode = (file: string) => [...reached(file)].filter((m) => !m.startsWith("src/") && !m.startsWith("test/support/"))

/** Why a file's use of storage does not make it a unit: empty when it is one. */
const storageOf = (file: string): Array<string> => [
  ...[...reached(file)].filter((m) => STORAGE.has(m) || m === PROCESS),
  ...[...reached(file)].filter((m) => !m.startsWith("src/") && READS_MODE.test(text(m))).map((m) => `${m} reads the mode`)
]

describe("which suite runs a file (test/support/Suites.ts)", () => {
  const all = testFiles("test")

  it("names only files that exist, each in one list", () => {
    const listed = [...Object.keys(EMBEDDED_ONLY), ...Object.keys(SERVICES_ONLY)]
    assert.deepStrictEqual(listed.filter((file) => !all.includes(file)), [], "listed but not a test file")
    assert.deepStrictEqual(Object.keys(EMBEDDED_ONLY).filter((file) => file in SERVICES_ONLY), [], "in both lists")
  })

  it("a file listed as a unit reaches no storage; a file that reaches none is listed as one", () => {
    const units = Object.entries(EMBEDDED_ONLY).filter(([, why]) => why === "unit").map(([file]) => file)
    assert.deepStrictEqual(
      units.flatMap((file) => storageOf(file).map((why) => `${file}: ${why}`)),
      [],
      "listed as a unit, but it reaches a storage or reads the mode: it belongs in both suites (or say why not)"
    )
    assert.deepStrictEqual(
      all.filter((file) => storageOf(file).length === 0 && !(file in EMBEDDED_ONLY)),
      [],
      "no storage at all, so the services suite would run it again for nothing: list it as a unit"
    )
  })

  it("a file listed as a process test starts dist/main.js and gives it no storage of the run's mode", () => {
    const processes = Object.entries(EMBEDDED_ONLY).filter(([, why]) => why === "process").map(([file]) => file)
    assert.deepStrictEqual(processes.filter((file) => !reached(file).has(PROCESS)), [], "starts no process")
    assert.deepStrictEqual(
      processes.flatMap((file) =>
        ownCode(file).filter((m) => BUILDS_STORAGE.test(text(m)) || READS_MODE.test(text(m))).map((m) => `${file}: ${m}`)
      ),
      [],
      "builds a storage of the run's mode or reads the mode: it proves something in each suite"
    )
  })

  it("every other reason is said in words", () => {
    for (const [file, why] of Object.entries(EMBEDDED_ONLY)) {
      if (typeof why === "object") assert.isAbove(why.embedded.trim().length, 40, file)
    }
    for (const [file, why] of Object.entries(SERVICES_ONLY)) assert.isAbove(why.trim().length, 40, file)
  })

  it("no file leaves a suite on its own: the list is the one place", () => {
    const own = /describe\.(skipIf|runIf)\([^)]*(servicesMode|databaseUrl|DATABASE_URL|REDIS_URL)/
    assert.deepStrictEqual(all.filter((file) => own.test(text(file))), [])
  })

  it("vitest.config.ts leaves the other suite's files out of this one", () => {
    const mode = process.env.DATABASE_URL === undefined ? "embedded" : "services"
    const exclude = config.test?.exclude ?? []
    assert.deepStrictEqual(leftOutOf(mode).filter((file) => !exclude.includes(file)), [], `not left out of the ${mode} suite`)
    const other = mode === "embedded" ? "services" : "embedded"
    assert.deepStrictEqual(leftOutOf(other).filter((file) => exclude.includes(file)), [], `left out of the ${mode} suite too`)
  })
})
