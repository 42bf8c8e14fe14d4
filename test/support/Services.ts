import { Effect, type Scope } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { freePort } from "./Process.js"

/**
 * A throwaway PostgreSQL and Redis of a test's own, for fault tests: they restart, stop and flush them, which must
 * never happen to the machine's shared instances (other tests and engineers use 5432 and 6379). PostgreSQL is the
 * Debian build in `/usr/lib/postgresql/<major>/bin` (`initdb` refuses root, so as root it runs as `postgres`), on a
 * free port with a Unix socket in its own data directory; Redis is `redis-server` on a free port without
 * persistence. Both are gone with the scope.
 */

const PG_BIN = (() => {
  const base = "/usr/lib/postgresql"
  if (!Fs.existsSync(base)) return undefined
  const major = Fs.readdirSync(base).sort((a, b) => Number(b) - Number(a))[0]
  return major === undefined ? undefined : Path.join(base, major, "bin")
})()

/** Whether this machine can start a PostgreSQL and a Redis of a test's own. */
export const servicesAvailable = PG_BIN !== undefined && Fs.existsSync(Path.join(PG_BIN, "initdb")) &&
  ChildProcess.spawnSync("redis-server", ["--version"]).status === 0

const asRoot = process.getuid?.() === 0

/** Runs a PostgreSQL binary (as `postgres` when this process is root) and waits for it; fails with its output. */
const pgTool = (tool: string, args: ReadonlyArray<string>) =>
  Effect.async<string, Error>((resume) => {
    const binary = Path.join(PG_BIN!, tool)
    const child = asRoot
      ? ChildProcess.spawn("runuser", ["-u", "postgres", "--", binary, ...args], { stdio: ["ignore", "pipe", "pipe"] })
      : ChildProcess.spawn(binary, args, { stdio: ["ignore", "pipe", "pipe"] })
    let output = ""
    child.stdout.on("data", (chunk) => (output += chunk))
    child.stderr.on("data", (chunk) => (output += chunk))
    child.on("exit", (code) =>
      resume(code === 0 ? Effect.succeed(output) : Effect.fail(new Error(`${tool} ${args.join(" ")} exited ${code}:\n${output}`)))
    )
  })

export interface OwnPostgres {
  /** `postgres://postgres@127.0.0.1:<port>/postgres` */
  readonly url: string
  readonly port: number
  /** Its data directory (for `pg_ctl -D` by hand, when a bench leaves it running to be read). */
  readonly dataDir: string
  /** `pg_ctl restart -m fast`: every connection is cut, the server answers again when it returns. */
  readonly restart: Effect.Effect<void>
  /** `pg_ctl stop -m fast`: connections are cut and nothing answers until `start`. */
  readonly stop: Effect.Effect<void>
  readonly start: Effect.Effect<void>
}

export const ownPostgres: Effect.Effect<OwnPostgres, never, Scope.Scope> = Effect.gen(function*() {
  const dir = yield* Effect.acquireRelease(
    Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "atrium-pg-"))),
    (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
  )
  if (asRoot) ChildProcess.execFileSync("chown", ["postgres", dir])
  const data = Path.join(dir, "data")
  const port = yield* freePort
  yield* Effect.orDie(pgTool("initdb", ["-D", data, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8"]))
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=300`
  const ctl = (...args: ReadonlyArray<string>) =>
    Effect.orDie(pgTool("pg_ctl", ["-D", data, "-l", Path.join(dir, "log"), "-w", "-t", "60", ...args]))
  const start = Effect.asVoid(ctl("-o", options, "start"))
  yield* Effect.acquireRelease(start, () => Effect.ignore(Effect.asVoid(ctl("-m", "immediate", "stop"))))
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    dataDir: data,
    restart: Effect.asVoid(ctl("-m", "fast", "-o", options, "restart")),
    stop: Effect.asVoid(ctl("-m", "fast", "stop")),
    start
  }
})

export interface OwnRedis {
  readonly url: string
  /** Kills the server (SIGKILL, as a crash) and starts a new, empty one on the same port. */
  readonly restart: Effect.Effect<void>
  readonly flushAll: Effect.Effect<void>
}

export const ownRedis: Effect.Effect<OwnRedis, never, Scope.Scope> = Effect.gen(function*() {
  const port = yield* freePort
  let server: ChildProcess.ChildProcess | undefined
  const launch = Effect.promise(() =>
    new Promise<void>((resolve, reject) => {
      const child = ChildProcess.spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], {
        stdio: ["ignore", "pipe", "pipe"]
      })
      server = child
      let output = ""
      const onData = (chunk: Buffer) => {
        output += chunk
        if (output.includes("Ready to accept connections")) {
          child.stdout.off("data", onData)
          resolve()
        }
      }
      child.stdout.on("data", onData)
      child.on("exit", (code) => reject(new Error(`redis-server exited ${code}: ${output}`)))
    })
  )
  const kill = Effect.promise(() =>
    new Promise<void>((resolve) => {
      const child = server
      if (child === undefined || child.exitCode !== null || child.signalCode !== null) return resolve()
      child.removeAllListeners("exit")
      child.on("exit", () => resolve())
      child.kill("SIGKILL")
    })
  )
  yield* Effect.acquireRelease(launch, () => kill)
  const cli = (...args: ReadonlyArray<string>) =>
    Effect.sync(() => ChildProcess.execFileSync("redis-cli", ["-p", String(port), ...args]))
  return {
    url: `redis://127.0.0.1:${port}`,
    restart: Effect.zipRight(kill, launch),
    flushAll: Effect.asVoid(cli("FLUSHALL"))
  }
})
