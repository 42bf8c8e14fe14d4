import { assert, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { build } from "vite"

/**
 * The browser gets the API's contract, never the server (issue 25, docs/architecture.md "Contracts"): every chunk the
 * web build emits is scanned for what only server code carries. `web/dist` is scanned when it is newer than every
 * source the bundle may hold (the web app, `src/`, the Vite config); otherwise the app is built into a temporary
 * folder with the same config, so the test never reads a stale bundle.
 */
const ROOT = Path.resolve(import.meta.dirname, "../..")

const SERVER_MARKERS: ReadonlyArray<readonly [string, RegExp]> = [
  // Upper case, as our SQL is written: a syntax highlighter's SQL keyword list has them in lower case.
  ["a migration", /CREATE TABLE/],
  ["a SQL write", /INSERT INTO/],
  ["the session log's notify", /pg_notify/],
  ["a server setting", /SECRETS_KEY/],
  ["the Python sandbox", /pyodide/i],
  ["the JavaScript sandbox", /quickjs/i],
  ["a Node module", /["'`]node:[a-z_/]+["'`]/],
  ["the sandbox worker or guest script", /\b(guest|worker)\.m?js\b/],
  ["the Node HTTP platform", /@effect\/platform-node|NodeHttpServer/],
  ["a database driver", /@effect\/sql-pg|PGlite|ioredis/]
]

const newest = (path: string): number => {
  if (!Fs.existsSync(path)) return 0
  const stat = Fs.statSync(path)
  if (!stat.isDirectory()) return stat.mtimeMs
  return Fs.readdirSync(path).reduce((latest, name) => name === "dist" ? latest : Math.max(latest, newest(Path.join(path, name))), 0)
}

const filesUnder = (dir: string): Array<string> =>
  Fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? filesUnder(Path.join(dir, entry.name)) : [Path.join(dir, entry.name)]
  )

/** `web/dist` when it is fresh, else a new build in a temporary folder (removed by the caller). */
const bundle = async (): Promise<{ readonly dir: string; readonly temporary: boolean }> => {
  const dist = Path.join(ROOT, "web", "dist")
  const sources = Math.max(newest(Path.join(ROOT, "web")), newest(Path.join(ROOT, "src")))
  if (Fs.existsSync(Path.join(dist, "index.html")) && newest(dist) >= sources) return { dir: dist, temporary: false }
  const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "atrium-web-"))
  await build({ configFile: Path.join(ROOT, "web", "vite.config.ts"), build: { outDir: dir, emptyOutDir: true }, logLevel: "error" })
  return { dir, temporary: true }
}

describe("the web bundle", () => {
  it("holds no server code, and each page is a chunk of its own", { timeout: 300_000 }, async () => {
    const { dir, temporary } = await bundle()
    try {
      const files = filesUnder(dir)
      const chunks = files.filter((file) => file.endsWith(".js"))
      assert.isAbove(chunks.length, 1)
      const found: Array<string> = []
      for (const file of files) {
        const name = Path.relative(dir, file)
        if (/(^|\/)(guest|worker|WasmSandbox)[^/]*$/.test(name)) found.push(`${name}: a sandbox script emitted as an asset`)
        if (!/\.(js|mjs|css|html|json|map)$/.test(file)) continue
        const text = Fs.readFileSync(file, "utf8")
        for (const [what, marker] of SERVER_MARKERS) {
          const hit = marker.exec(text)
          if (hit) found.push(`${name}: ${what} (${JSON.stringify(text.slice(Math.max(0, hit.index - 40), hit.index + 60))})`)
        }
      }
      assert.deepStrictEqual(found, [])
      // The pages are loaded on demand (React.lazy in main.tsx): a page's chunk is not the entry's.
      for (const page of ["Chat", "Studio", "Market", "Login", "Wallet"]) {
        assert.isTrue(chunks.some((file) => Path.basename(file).startsWith(`${page}-`)), `${page} is its own chunk`)
      }
    } finally {
      if (temporary) Fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})
