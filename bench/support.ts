/**
 * What the load scripts in bench/ share: a JSON request over a keep-alive agent, a free port, percentiles, the CPU
 * time of a process, the closed-loop load generator (`closedLoop`), the reader of a streamed run (`streamRun`) and the
 * `--json FILE` output. Scripts, not tests: nothing here asserts.
 */
import * as ChildProcess from "node:child_process"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Os from "node:os"
import * as Path from "node:path"
import pg from "pg"
import { buildIsStale, freePort } from "../test/support/Local.js"

/** One request through `agent`, its answer's body parsed as JSON when it is JSON. */
export const call = (
  agent: Http.Agent,
  base: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {}
) =>
  new Promise<{ status: number; body: any; headers: Http.IncomingHttpHeaders }>((resolve, reject) => {
    // A string body goes as it is (a form, say, with its own content-type header); anything else as JSON.
    const payload = body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body)
    const request = Http.request(new URL(path, base), {
      method,
      agent,
      headers: {
        ...(payload !== undefined ? { "content-type": "application/json", "content-length": Buffer.byteLength(payload) } : {}),
        ...headers
      }
    }, (response) => {
      let text = ""
      response.setEncoding("utf8")
      response.on("data", (chunk) => (text += chunk))
      response.on("end", () => {
        let parsed: unknown = text
        try {
          parsed = JSON.parse(text)
        } catch {}
        resolve({ status: response.statusCode ?? 0, body: parsed, headers: response.headers })
      })
    })
    request.on("error", reject)
    if (payload !== undefined) request.write(payload)
    request.end()
  })


export { freePort }

export const percentile = (sorted: ReadonlyArray<number>, p: number) =>
  sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!

/** utime + stime of a process in seconds, NaN when it is gone (Linux /proc). */
export const processCpu = (pid: number | undefined): number => {
  if (pid === undefined) return NaN
  try {
    // After the last ")": a process name may itself hold one.
    const stat = Fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    return (Number(fields[11]) + Number(fields[12])) / 100
  } catch {
    return NaN
  }
}

/** p50 and p99 of `values` (any order; NaN left out). */
export const pair = (values: ReadonlyArray<number>) => {
  const sorted = values.filter((n) => !Number.isNaN(n)).sort((a, b) => a - b)
  return [percentile(sorted, 50), percentile(sorted, 99)] as const
}

/** What `closedLoop` measured. */
export interface LoopResult<T> {
  readonly clients: number
  /** The operations that succeeded, and those that did not. */
  readonly timings: ReadonlyArray<T>
  readonly failures: ReadonlyArray<T>
  /** Wall time from the first operation's start to the last one's end. */
  readonly seconds: number
  /** `cpu()` after the loop minus `cpu()` before it (CPU seconds of the measured server); NaN without `cpu`. */
  readonly cpuSeconds: number
  /** Load average (1 min) when the loop started and when it ended. */
  readonly load: readonly [number, number]
}

/**
 * The load generator: `clients` clients, each starting its next operation (`once(client, i)`, i counting that
 * client's operations) when its last one ended, until `seconds` are up; an operation started before the deadline is
 * waited for. `cpu` reads the CPU seconds of whatever is measured (`processCpu` of a server's pid, or a process tree's
 * sum), before and after.
 */
export const closedLoop = async <T extends { readonly ok: boolean }>(options: {
  readonly clients: number
  readonly seconds: number
  readonly once: (client: number, i: number) => Promise<T>
  readonly cpu?: () => number
}): Promise<LoopResult<T>> => {
  const timings: Array<T> = []
  const failures: Array<T> = []
  const load0 = Os.loadavg()[0]!
  const cpu0 = options.cpu?.() ?? NaN
  const started = performance.now()
  const deadline = started + options.seconds * 1000
  await Promise.all(Array.from({ length: options.clients }, async (_, client) => {
    for (let i = 0; performance.now() < deadline; i++) {
      const timing = await options.once(client, i)
      if (timing.ok) timings.push(timing)
      else failures.push(timing)
    }
  }))
  const seconds = (performance.now() - started) / 1000
  const cpuSeconds = (options.cpu?.() ?? NaN) - cpu0
  return { clients: options.clients, timings, failures, seconds, cpuSeconds, load: [load0, Os.loadavg()[0]!] }
}

/** One streamed run as the client saw it. */
export interface RunTiming {
  readonly ok: boolean
  /** Milliseconds from sending the request to the first byte of `event: run.created`, of the first text increment,
   * and to `[DONE]`. */
  readonly created: number
  readonly firstText: number
  readonly total: number
  readonly events: number
  readonly bytes: number
}

/**
 * One streamed run (`POST path` with a JSON body, answered with Atrium's run events as SSE), read as it arrives. It
 * is ok when the answer is 200 and its stream ends with `event: run.completed` and `data: [DONE]`.
 */
export const streamRun = (agent: Http.Agent, base: string, path: string, headers: Record<string, string>, body: unknown) =>
  new Promise<RunTiming>((resolve) => {
    const payload = JSON.stringify(body)
    const t0 = performance.now()
    let created = NaN
    let firstText = NaN
    let text = ""
    let bytes = 0
    const request = Http.request(new URL(path, base), {
      method: "POST",
      agent,
      headers: {
        ...headers,
        "content-type": "application/json",
        "content-length": Buffer.byteLength(payload)
      }
    }, (response) => {
      response.setEncoding("utf8")
      response.on("data", (chunk: string) => {
        bytes += chunk.length
        // Only the new bytes (and the end of the old, where a name may have been cut) are searched.
        const window = text.slice(-32) + chunk
        text += chunk
        if (Number.isNaN(created) && window.includes("event: run.created\n")) created = performance.now() - t0
        if (Number.isNaN(firstText) && window.includes("event: output.text.delta\n")) firstText = performance.now() - t0
      })
      response.on("end", () => {
        const total = performance.now() - t0
        const lastEvent = text.lastIndexOf("event: ")
        const ok = response.statusCode === 200 && text.endsWith("data: [DONE]\n\n") &&
          text.startsWith("event: run.completed\n", lastEvent)
        const events = text.split("\nevent: ").length - 1 + (text.startsWith("event: ") ? 1 : 0)
        resolve({ ok, created, firstText, total, events, bytes })
      })
      response.on("error", () => resolve({ ok: false, created, firstText, total: performance.now() - t0, events: 0, bytes }))
    })
    request.on("error", () => resolve({ ok: false, created, firstText, total: performance.now() - t0, events: 0, bytes }))
    request.write(payload)
    request.end()
  })

/**
 * `--json FILE`: writes `value` as JSON to FILE (NaN and infinities become null), for bench/engine.ts to read. Does
 * nothing when `file` is undefined.
 */
export const writeJson = (file: string | undefined, value: unknown): void => {
  if (file === undefined) return
  Fs.writeFileSync(file, JSON.stringify(value, (_, v) => (typeof v === "number" && !Number.isFinite(v) ? null : v), 2) + "\n")
}


/**
 * The node flags `npm start` runs the platform with (the `--` options between `node` and the script in package.json's
 * start script), then those of BENCH_NODE_ARGS (e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof"): a benchmark measures
 * the platform as it is started, not as a bare `node --import tsx` would run it.
 */
export const platformNodeArgs = (): Array<string> => {
  const pkg = JSON.parse(Fs.readFileSync(Path.resolve(import.meta.dirname, "../package.json"), "utf8"))
  const words = String(pkg.scripts.start).split(/\s+/)
  const start = words.slice(words.indexOf("node") + 1).filter((word) => word.startsWith("--") && word !== "--import")
  return [...start, ...(process.env.BENCH_NODE_ARGS ?? "").split(" ").filter((a) => a.length > 0)]
}

/** The platform as `npm start` runs it; a bench refuses to measure a build older than the sources. */
const BUILT_MAIN = Path.resolve(import.meta.dirname, "../dist/main.js")
const assertBuilt = () => {
  if (buildIsStale()) {
    throw new Error("dist/ is missing or older than src/: run `npm run build` first (benches measure what users run)")
  }
}

/**
 * How long to wait before reading PostgreSQL's transaction counters (`pg_stat_database.xact_commit`) so they hold
 * everything before the read: since PostgreSQL 15 a busy backend reports its counts at most once a second and an idle
 * one up to 10 s later (`PGSTAT_IDLE_INTERVAL`): 1,000 statements of a connection left idle were not counted 3 s
 * later (session 26), so a read 1.5 s after a phase could miss its end or take in the phase before.
 */
export const STATISTICS_LAG_MS = 11_000

/** A database of its own for one bench run, on the server of `adminUrl`. */
export interface BenchDatabase {
  readonly name: string
  readonly url: string
  /** A connection to the server (not to this database), open until `drop`. */
  readonly admin: pg.Client
  /** Drops the database (whoever is still connected) and closes `admin`. */
  readonly drop: () => Promise<void>
}

export const createBenchDatabase = async (adminUrl: string, prefix = "atrium_bench"): Promise<BenchDatabase> => {
  const name = `${prefix}_${Crypto.randomBytes(4).toString("hex")}`
  const admin = new pg.Client({ connectionString: adminUrl })
  await admin.connect()
  await admin.query(`CREATE DATABASE ${name}`)
  const url = new URL(adminUrl)
  url.pathname = `/${name}`
  return {
    name,
    url: url.toString(),
    admin,
    drop: async () => {
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
      await admin.end()
    }
  }
}

/** The platform as its own process, started by `launchBenchPlatform`. */
export interface BenchPlatform {
  readonly base: string
  readonly child: ChildProcess.ChildProcess
  /** Its database, in services mode. */
  readonly db: BenchDatabase | undefined
  /** Its data directory, in embedded mode. */
  readonly dataDir: string | undefined
  /**
   * Stops the process (SIGTERM) and removes its database or data directory; `keepData` keeps them for the caller
   * to read (and remove).
   */
  readonly stop: (options?: { readonly keepData?: boolean }) => Promise<void>
}

/**
 * Starts the platform the way `npm start` does (`platformNodeArgs`, after `nodeArgs`) on a free port, with `env` over
 * this process's environment: in services mode on a database and a Redis key prefix of its own, otherwise embedded
 * in a fresh data directory. Resolves once it answers `/api/health`.
 */
export const launchBenchPlatform = async (options: {
  readonly env: Record<string, string>
  readonly services?: { readonly adminUrl: string; readonly redisUrl: string }
  readonly nodeArgs?: ReadonlyArray<string>
  /** Health checks (100 ms apart) before giving up on the start: 1200 (two minutes) unless said. */
  readonly startTries?: number
}): Promise<BenchPlatform> => {
  const port = await freePort()
  const env: Record<string, string> = { ...(process.env as Record<string, string>) }
  delete env.DATABASE_URL
  delete env.REDIS_URL
  delete env.KEY_PREFIX
  // No access line per request on the bench's own terminal (a bench that measures logging sets LOG_LEVEL itself).
  Object.assign(env, { LOG_LEVEL: "warn" }, options.env, { PORT: String(port), HOST: "127.0.0.1" })
  let db: BenchDatabase | undefined
  let dataDir: string | undefined
  if (options.services !== undefined) {
    db = await createBenchDatabase(options.services.adminUrl)
    Object.assign(env, { DATABASE_URL: db.url, REDIS_URL: options.services.redisUrl, KEY_PREFIX: `bench:${db.name}:` })
  } else {
    dataDir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "atrium-bench-"))
    env.DATA_DIR = dataDir
  }
  assertBuilt()
  const child = ChildProcess.spawn(
    process.execPath,
    // The compiled build, as `npm start` runs it (`npm run build` first): what users run, not the sources.
    [...(options.nodeArgs ?? []), ...platformNodeArgs(), BUILT_MAIN],
    { cwd: Path.resolve(import.meta.dirname, ".."), env, stdio: ["ignore", "inherit", "inherit"] }
  )
  const exited = new Promise((resolve) => child.once("exit", resolve))
  const stop = async (stopOptions: { readonly keepData?: boolean } = {}) => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM")
    await exited
    if (stopOptions.keepData === true) return
    await db?.drop()
    if (dataDir !== undefined) Fs.rmSync(dataDir, { recursive: true, force: true })
  }
  const base = `http://127.0.0.1:${port}`
  try {
    await untilAnswers(base, "/api/health", { tries: options.startTries ?? 1200, gone: () => child.exitCode !== null, what: "the platform" })
  } catch (error) {
    await stop()
    throw error
  }
  return { base, child, db, dataDir, stop }
}

/**
 * Resolves once `GET path` answers 200, asking every 100 ms; fails after `tries` or as soon as the server's process
 * is `gone`, with `detail()` (its output, say) in the message.
 */
export const untilAnswers = async (
  base: string,
  path: string,
  options: { readonly tries: number; readonly gone: () => boolean; readonly what: string; readonly detail?: () => string }
): Promise<void> => {
  const agent = new Http.Agent()
  try {
    for (let i = 0; ; i++) {
      if (i > options.tries || options.gone()) throw new Error(`${options.what} did not start${options.detail ? `:\n${options.detail()}` : ""}`)
      const up = await call(agent, base, "GET", path).then((r) => r.status === 200, () => false)
      if (up) return
      await new Promise((r) => setTimeout(r, 100))
    }
  } finally {
    agent.destroy()
  }
}
