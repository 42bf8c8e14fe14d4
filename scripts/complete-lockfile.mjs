// Completes package-lock.json with the optional, platform-specific packages that `npm install` left out.
//
// Why: the registry this project installs from does not serve every platform build (e.g. rollup's Android
// binaries answer 404). `npm install` skips an optional package it cannot fetch and writes no lockfile entry for
// it, and `npm ci` then refuses the lockfile as "out of sync". An entry marked optional lets `npm ci` accept the
// lockfile; on a platform that needs the package it is fetched, elsewhere it is skipped.
//
// Run after every `npm install` that changes dependencies: `node scripts/complete-lockfile.mjs`.
import * as Fs from "node:fs"

const path = new URL("../package-lock.json", import.meta.url)
const lock = JSON.parse(Fs.readFileSync(path, "utf8"))
const packages = lock.packages
let added = 0
for (const [location, meta] of Object.entries(packages)) {
  for (const [name, spec] of Object.entries(meta.optionalDependencies ?? {})) {
    // Resolution looks in the package's own node_modules, then upwards; hoisted to the top is what npm does here.
    const nested = `${location}/node_modules/${name}`.replace(/^\//, "")
    const hoisted = `node_modules/${name}`
    if (packages[nested] !== undefined || packages[hoisted] !== undefined) continue
    if (!/^\d+\.\d+\.\d+(-[\w.]+)?$/.test(spec)) {
      console.warn(`skipping ${name}@${spec} (of ${location}): not an exact version`)
      continue
    }
    packages[hoisted] = { version: spec, ...(meta.dev ? { dev: true } : {}), optional: true }
    added++
  }
}
const sorted = Object.fromEntries(
  Object.entries(packages).sort(([a], [b]) => (a === "" ? -1 : b === "" ? 1 : a.localeCompare(b)))
)
lock.packages = sorted
Fs.writeFileSync(path, JSON.stringify(lock, null, 2) + "\n")
console.log(`complete-lockfile: added ${added} optional entries`)
