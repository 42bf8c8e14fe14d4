// The container image's runtime stage as a folder, where no Docker engine exists (docs/operations.md): the same files
// the Dockerfile's runtime stage holds (package.json, package-lock.json, the production dependencies, dist/ and
// web/dist/), nothing else: no sources, no tests, no development dependencies. `test/artifact.test.ts` starts the
// platform from it.
//
//   node scripts/runtime-layout.mjs <folder>      (after `npm run build`)
import { spawnSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"

const root = Path.resolve(import.meta.dirname, "..")
const target = Path.resolve(process.argv[2] ?? "")
if (process.argv[2] === undefined) {
  console.error("usage: node scripts/runtime-layout.mjs <folder>")
  process.exit(2)
}
for (const built of ["dist/main.js", "web/dist/index.html"]) {
  if (!Fs.existsSync(Path.join(root, built))) {
    console.error(`${built} is missing: run npm run build first`)
    process.exit(1)
  }
}

Fs.rmSync(target, { recursive: true, force: true })
Fs.mkdirSync(target, { recursive: true })
// The Dockerfile's `COPY` lines of the runtime stage, in its order.
for (const file of ["package.json", "package-lock.json"]) Fs.copyFileSync(Path.join(root, file), Path.join(target, file))
const install = spawnSync("npm", ["ci", "--omit=dev", "--ignore-scripts", "--prefer-offline", "--no-audit", "--no-fund"], {
  cwd: target,
  stdio: "inherit"
})
if (install.status !== 0) process.exit(install.status ?? 1)
Fs.cpSync(Path.join(root, "dist"), Path.join(target, "dist"), { recursive: true })
Fs.cpSync(Path.join(root, "web", "dist"), Path.join(target, "web", "dist"), { recursive: true })
