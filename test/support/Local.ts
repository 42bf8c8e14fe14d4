import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Path from "node:path"

/**
 * What tests and benches both need of this machine (bench/support.ts imports it too): a free port, and whether
 * `dist/` is the build of the current sources.
 */

const ROOT = Path.resolve(import.meta.dirname, "../..")

/** A port nothing listens on now (for a process told its port; the platform itself binds port 0 and says which). */
export const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = Net.createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as Net.AddressInfo
      server.close(() => resolve(port))
    })
  })

const portFree = (port: number) =>
  new Promise<boolean>((resolve) => {
    const server = Net.createServer()
    server.once("error", () => resolve(false))
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)))
  })

/**
 * The first of `count` consecutive ports nothing listens on now: for a setting that numbers ports from a base, such
 * as `METRICS_PORT` under `WORKERS=N` (the primary's, then each worker's at `METRICS_PORT + 1 + i`).
 */
export const freePorts = async (count: number): Promise<number> => {
  for (let tries = 0; tries < 50; tries++) {
    const base = 20_000 + Math.floor(Math.random() * 30_000)
    let free = true
    for (let i = 0; i < count && free; i++) free = await portFree(base + i)
    if (free) return base
  }
  throw new Error(`no ${count} consecutive free ports`)
}

const newest = (dir: string): number =>
  Fs.readdirSync(dir, { withFileTypes: true }).reduce((latest, entry) => {
    const path = Path.join(dir, entry.name)
    return Math.max(latest, entry.isDirectory() ? newest(path) : Fs.statSync(path).mtimeMs)
  }, 0)

/** True when `dist/main.js` is missing or older than any file under `src/`. */
export const buildIsStale = (root = ROOT): boolean => {
  const built = Path.join(root, "dist", "main.js")
  return !Fs.existsSync(built) || Fs.statSync(built).mtimeMs < newest(Path.join(root, "src"))
}

/**
 * True when `web/dist/index.html` is missing or older than any file of the web app or of `src/` (the web app bundles
 * the platform's API contract from there).
 */
export const webBuildIsStale = (root = ROOT): boolean => {
  const built = Path.join(root, "web", "dist", "index.html")
  if (!Fs.existsSync(built)) return true
  const sources = Math.max(
    newest(Path.join(root, "web", "src")),
    Fs.statSync(Path.join(root, "web", "index.html")).mtimeMs,
    newest(Path.join(root, "src"))
  )
  return Fs.statSync(built).mtimeMs < sources
}
