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

/** The newest modification time of `path`, a file or everything under a folder. */
const newest = (path: string): number => {
  const stat = Fs.statSync(path)
  if (!stat.isDirectory()) return stat.mtimeMs
  return Fs.readdirSync(path).reduce((latest, name) => Math.max(latest, newest(Path.join(path, name))), 0)
}

/** True when `built` is missing or older than any of `sources`. */
const staleAgainst = (built: string, sources: ReadonlyArray<string>): boolean =>
  !Fs.existsSync(built) || Fs.statSync(built).mtimeMs < Math.max(...sources.map(newest))

/** True when `dist/main.js` is missing or older than any file under `src/`. */
export const buildIsStale = (root = ROOT): boolean => staleAgainst(Path.join(root, "dist", "main.js"), [Path.join(root, "src")])

/**
 * True when `web/dist/index.html` is missing or older than any file of the web app or of `src/` (the web app bundles
 * the platform's API contract from there).
 */
export const webBuildIsStale = (root = ROOT): boolean =>
  staleAgainst(Path.join(root, "web", "dist", "index.html"), [
    Path.join(root, "web", "src"),
    Path.join(root, "web", "index.html"),
    Path.join(root, "src")
  ])

const GiB = 1024 ** 3

/**
 * Where the suites keep their scratch files (every test server's PGlite directory, each process test's `DATA_DIR`,
 * the sandbox's working folders, the artifact test's image layout): a memory-backed `/dev/shm` where there is one with
 * room, else the system's temporary folder. On this project's machines `/tmp` is ext4 mounted with `discard`, where
 * copying the 40 MB migrated template took 0.8-0.9 s of kernel time against 0.06 s into tmpfs, and every test server
 * starts with such a copy. What the tests kill is a process, never the machine, so memory keeps what they check as
 * well as a disk does. A `TMPDIR` already set is kept; so is a small `/dev/shm` (a container's 64 MB one).
 */
export const scratchTmpdir = (): string | undefined => {
  if (process.env.TMPDIR) return undefined
  try {
    const shm = "/dev/shm"
    Fs.accessSync(shm, Fs.constants.W_OK)
    const { bavail, bsize } = Fs.statfsSync(shm)
    return bavail * bsize >= 4 * GiB ? shm : undefined
  } catch {
    return undefined
  }
}

/** `TMPDIR` for the test workers and every process they start (vitest's `test.env`), when `scratchTmpdir` found one. */
export const scratchEnv = (): Record<string, string> => {
  const dir = scratchTmpdir()
  return dir === undefined ? {} : { TMPDIR: dir }
}
