// Writes test/support/durations.json: each test file's last duration in each suite, as vitest recorded it in that
// suite's cache (`.vitest-cache/<mode>/`, vitest.config.ts). The suites' sequencer (test/support/Sequencer.ts) reads
// it to start the longest files first in a clean clone, where vitest has recorded nothing. Run both suites, then this:
//   env -u DATABASE_URL -u REDIS_URL npm test; DATABASE_URL=… REDIS_URL=… npm test; npm run test:durations
// A mode with no cache keeps what the file had.
import * as Fs from "node:fs"
import * as Path from "node:path"

const root = Path.resolve(import.meta.dirname, "..")
const target = Path.join(root, "test/support/durations.json")
const previous = Fs.existsSync(target) ? JSON.parse(Fs.readFileSync(target, "utf8")) : {}

const lastRun = (mode) => {
  const dir = Path.join(root, ".vitest-cache", mode, "vitest")
  if (!Fs.existsSync(dir)) return undefined
  const seconds = {}
  for (const hash of Fs.readdirSync(dir)) {
    const file = Path.join(dir, hash, "results.json")
    if (!Fs.existsSync(file)) continue
    for (const [key, result] of JSON.parse(Fs.readFileSync(file, "utf8")).results) {
      const path = key.slice(key.indexOf(":") + 1)
      if (Fs.existsSync(Path.join(root, path))) seconds[path] = Math.round(result.duration / 100) / 10
    }
  }
  return Object.fromEntries(Object.entries(seconds).sort(([a], [b]) => a.localeCompare(b)))
}

const next = Object.fromEntries(["embedded", "services"].map((mode) => [mode, lastRun(mode) ?? previous[mode] ?? {}]))
Fs.writeFileSync(target, JSON.stringify(next, null, 1) + "\n")
console.log(`test/support/durations.json: ${Object.entries(next).map(([mode, files]) => `${Object.keys(files).length} ${mode}`).join(", ")}`)
