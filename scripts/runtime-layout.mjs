// The container image's runtime stage as a folder, where no Docker engine exists (docs/operations.md): the same files
// the Dockerfile's runtime stage holds (package.json, package-lock.json, the production dependencies, dist/ and
// web/dist/), nothing else: no sources, no tests, no development dependencies. `test/artifact.test.ts` starts the
// platform from it.
//
//   node scripts/runtime-layout.mjs <folder> [--deps-cache <cache folder>]      (after `npm run build`)
//
// `--deps-cache`: the production dependencies are installed (`npm ci --omit=dev`) once per package.json and lockfile
// into the cache folder and hard-linked into <folder> from there (copied where links cannot go): the install took
// 38 s and 24 CPU-seconds of the artifact test on the 2-core machine, each CI run, for the same 21,000 files.
import { spawnSync } from "node:child_process"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"

const root = Path.resolve(import.meta.dirname, "..")
const args = process.argv.slice(2)
const cacheAt = args.indexOf("--deps-cache")
const depsCache = cacheAt === -1 ? undefined : Path.resolve(args[cacheAt + 1] ?? "")
const folder = args.find((arg, i) => !arg.startsWith("--") && (cacheAt === -1 || i !== cacheAt + 1))
if (folder === undefined || (cacheAt !== -1 && args[cacheAt + 1] === undefined)) {
  console.error("usage: node scripts/runtime-layout.mjs <folder> [--deps-cache <cache folder>]")
  process.exit(2)
}
const target = Path.resolve(folder)
for (const built of ["dist/main.js", "web/dist/index.html"]) {
  if (!Fs.existsSync(Path.join(root, built))) {
    console.error(`${built} is missing: run npm run build first`)
    process.exit(1)
  }
}

const PACKAGE_FILES = ["package.json", "package-lock.json"]

/** `npm ci --omit=dev` in `dir`, which holds the package files: the Dockerfile's runtime stage's install. */
const install = (dir) => {
  for (const file of PACKAGE_FILES) Fs.copyFileSync(Path.join(root, file), Path.join(dir, file))
  const result = spawnSync("npm", ["ci", "--omit=dev", "--ignore-scripts", "--prefer-offline", "--no-audit", "--no-fund"], {
    cwd: dir,
    stdio: "inherit"
  })
  if (result.status !== 0) process.exit(result.status ?? 1)
}

/**
 * The cache's install for these package files (the install's inputs: the files, and the platform npm picks optional
 * dependencies for), made first if it is missing; an install of other package files is removed.
 */
const cachedInstall = (cache) => {
  const hash = Crypto.createHash("sha256")
  for (const file of PACKAGE_FILES) hash.update(Fs.readFileSync(Path.join(root, file)))
  hash.update(`${process.platform} ${process.arch}`)
  const dir = Path.join(cache, `deps-${hash.digest("hex").slice(0, 16)}`)
  if (Fs.existsSync(Path.join(dir, "node_modules", ".package-lock.json"))) return dir
  Fs.mkdirSync(cache, { recursive: true })
  const build = `${dir}.build-${process.pid}`
  Fs.rmSync(build, { recursive: true, force: true })
  Fs.mkdirSync(build)
  install(build)
  // An install of other package files is no longer wanted (a run building the same one at once keeps its own).
  for (const old of Fs.readdirSync(cache)) {
    if (old.startsWith("deps-") && !old.includes(".build-") && Path.join(cache, old) !== dir) {
      Fs.rmSync(Path.join(cache, old), { recursive: true, force: true })
    }
  }
  try {
    Fs.renameSync(build, dir)
  } catch (error) {
    // Another run put the same install in place first: that one is used.
    Fs.rmSync(build, { recursive: true, force: true })
    if (!Fs.existsSync(Path.join(dir, "node_modules", ".package-lock.json"))) throw error
  }
  return dir
}

Fs.rmSync(target, { recursive: true, force: true })
Fs.mkdirSync(target, { recursive: true })
// The Dockerfile's `COPY` lines of the runtime stage, in its order.
if (depsCache === undefined) install(target)
else {
  const cached = cachedInstall(depsCache)
  for (const file of PACKAGE_FILES) Fs.copyFileSync(Path.join(root, file), Path.join(target, file))
  const from = Path.join(cached, "node_modules")
  const to = Path.join(target, "node_modules")
  const linked = spawnSync("cp", ["-al", from, to], { stdio: "ignore" })
  if (linked.status !== 0) {
    Fs.rmSync(to, { recursive: true, force: true })
    Fs.cpSync(from, to, { recursive: true, verbatimSymlinks: true })
  }
}
// The Dockerfile's `COPY --from=build /app/node_modules/effect/dist`: the library files our patches change (patches/,
// applied by `postinstall`), each named in its patch's `+++ b/…` line. The layout's copies may be links into the cache:
// each is removed first, so the cached install is never written through.
for (const patch of Fs.readdirSync(Path.join(root, "patches"))) {
  for (const [, file] of Fs.readFileSync(Path.join(root, "patches", patch), "utf8").matchAll(/^\+\+\+ b\/(\S+)$/gm)) {
    Fs.rmSync(Path.join(target, file), { force: true })
    Fs.copyFileSync(Path.join(root, file), Path.join(target, file))
  }
}
Fs.cpSync(Path.join(root, "dist"), Path.join(target, "dist"), { recursive: true })
Fs.cpSync(Path.join(root, "web", "dist"), Path.join(target, "web", "dist"), { recursive: true })
