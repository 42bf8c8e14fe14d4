// `npm run build:server`: the compiled server in `dist/`, made anew each time, with every file the code loads at run
// time beside it. tsc emits only what it compiles; the rest of `src/` (the sandbox's guest script, any `.mjs`,
// `.json`, `.sql` or `.wasm` loaded through `import.meta.url`) is copied as it is, so `dist/` runs on its own
// (`npm start`, the container image). Documentation (`.md`) stays behind.
import { spawnSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"

const root = Path.resolve(import.meta.dirname, "..")
const src = Path.join(root, "src")
const dist = Path.join(root, "dist")

Fs.rmSync(dist, { recursive: true, force: true })
const tsc = spawnSync(process.execPath, [Path.join(root, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.build.json"], {
  cwd: root,
  stdio: "inherit"
})
if (tsc.status !== 0) process.exit(tsc.status ?? 1)

const compiled = /\.(ts|tsx)$/
const copyAssets = (dir) => {
  for (const entry of Fs.readdirSync(dir, { withFileTypes: true })) {
    const from = Path.join(dir, entry.name)
    if (entry.isDirectory()) copyAssets(from)
    else if (!compiled.test(entry.name) && !entry.name.endsWith(".md")) {
      const to = Path.join(dist, Path.relative(src, from))
      Fs.mkdirSync(Path.dirname(to), { recursive: true })
      Fs.copyFileSync(from, to)
    }
  }
}
copyAssets(src)
