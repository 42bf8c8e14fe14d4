/**
 * Engine cost (issues 14 and 28) in one run: every target measured on this machine, one load at a time, beside two
 * floors (a bare `node:http` server doing the same thing, bench/floor.ts; a bare Effect `HttpApi` with our package
 * versions doing the same thing, bench/effect-floor.ts) and a peer (the LangGraph.js dev server,
 * bench/peer-langgraph), with one Markdown report. The platform runs from `dist/main.js` (npm run build first).
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test REDIS_URL=redis://127.0.0.1:6379 \
 *     npx tsx bench/engine.ts [--seconds 10] [--levels 1,50,200] [--subscriptions 10000] [--peer on|off] [--out FILE.md]
 *
 * Flags (defaults in brackets):
 * - --seconds 10: length of every measured load (each level of each system).
 * - --warm-up S [seconds / 2, at least 2]: the warm-up load (20 clients) before the floor's, the trivial GET's and the
 *   peer's measured loads (bench/runs.ts warms up for --seconds itself; the turn runs warm up on 50 sessions, below).
 * - --levels 1,50,200: clients for the runs, and concurrent sessions (threads, for the peer) for the turns. The
 *   targets are read at 50 (at the highest level when 50 is not among them, and the row says so).
 * - --trivial-clients 50: clients of the trivial request (`GET /v1/meters`; the floor's `GET /json`).
 * - --subscriptions 10000: idle subscriptions held (Atrium: over min(1000, subscriptions / 10) sessions; the floor:
 *   `GET /hold`).
 * - --sessions 1000,2000: the idle-session memory checkpoints (sessions created, one message each; bench/sessions.ts).
 * - --idle-seconds 45: how long the subscriptions sit idle while the server's CPU is measured: three heartbeat
 *   intervals (15 s), so the floor and the platform ping every held answer the same number of times in the window.
 * - --wallet-connections 64: connections of the hot-wallet run (bench/billing.ts --concurrency).
 * - --peer on|off [on]: the LangGraph peer (installed on demand in bench/peer-langgraph by its `npm ci`).
 * - --parts floor,effect,effect-db,get,runs,turns,sessions,billing,peer [all]: which parts run (always in this order).
 * - --out FILE.md: also write the report to FILE.md (it always goes to stdout; progress and the scripts' own tables go
 *   to stderr).
 *
 * What runs, in order, never two loads at once:
 * 1. floor: bench/floor.ts as its own process (`node --expose-gc --import tsx`): warm-up, `GET /json` at
 *    --trivial-clients, `POST /run` (11 events) at each level, then --subscriptions `GET /hold` held idle (heap per
 *    held answer after a forced GC, CPU over --idle-seconds).
 * 1b. effect: bench/effect-floor.ts the same way (the same routes through HttpApi, NodeHttpServer and Effect streams).
 * 1c. effect-db: the Effect floor with a run's statements (issue 45 item 5): the platform is started once on a fresh
 *    database (PostgreSQL in services mode, a PGlite data directory in embedded mode) to make its tables, 50 users with
 *    their signup grant and an agent each, and stopped; bench/effect-floor.ts then serves `POST /run` on that database
 *    (`--database URL` or `--data-dir DIR`), running before and within each run's events the statements a builtin run
 *    runs, client i naming user i's agent as bench/runs.ts does: warm-up, then `POST /run` at each level. Our run's CPU
 *    over this row's is what our own code adds to the Effect runtime doing the same work.
 * 2. get: `GET /v1/meters` on the platform (started by launchBenchPlatform) at --trivial-clients, the same loop as 1.
 * 3. runs: bench/runs.ts --levels LEVELS (POST /v1/agents/run, its warm-up and its long-answer phase included).
 * 4. turns: bench/sessions.ts --phases memory,turns --sessions 0 --gc off --turn-sessions L, one run per level: the
 *    memory phase with no checkpoint is only the warm-up (50 sessions, 250 turns); the turn phase gives turns/s,
 *    latency, server CPU and PostgreSQL commits per turn.
 * 5. sessions: bench/sessions.ts --phases memory,subscriptions (heap per idle active session; heap per idle
 *    subscription, idle CPU, every event delivered once and in order).
 * 6. billing: bench/billing.ts --phases hot,naive-hot (the hot wallet against one transaction per charge).
 * 7. peer: the LangGraph.js dev server (bench/peer-langgraph/peer.ts): warm-up, stateless runs (`POST /runs/stream`)
 *    at each level, then runs on threads (`POST /threads/:id/runs/stream`, one thread per client, like a session) at
 *    each level; CPU is the whole process tree's, read at the end of each load and again 4 s later (its store
 *    snapshot is written after the load).
 * Floor, trivial GET, Atrium runs and turns (through bench/runs.ts and bench/sessions.ts) and the peer all go
 * through the same load generator, `closedLoop` in bench/support.ts: N clients, each starting its next request when
 * its last one ended, for --seconds; p50/p99 of what the clients saw; server CPU from /proc/<pid>/stat over the load,
 * per completed request.
 *
 * BENCH_NODE_ARGS (e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof") reaches every Atrium server started here, as in the
 * scripts, for the profile that explains a gap (it slows what it profiles: not for the measured run).
 *
 * With the defaults it takes about 10 minutes. A script, not a test: it asserts nothing; the report says which
 * target is met.
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Os from "node:os"
import * as Path from "node:path"
import { createThread, ensureInstalled, startLangGraph, statelessRun, threadRun, type Timing as PeerTiming } from "./peer-langgraph/peer.js"
import { call, closedLoop, freePort, launchBenchPlatform, type LoopResult, pair, processCpu, type RunTiming, streamRun } from "./support.js"

const args = new Map<string, string>()
for (let i = 2; i < process.argv.length; i += 2) args.set(process.argv[i]!.replace(/^--/, ""), process.argv[i + 1]!)
const SECONDS = Number(args.get("seconds") ?? 10)
const WARM_UP = Number(args.get("warm-up") ?? Math.max(2, SECONDS / 2))
const LEVELS = (args.get("levels") ?? "1,50,200").split(",").map(Number).sort((a, b) => a - b)
const TRIVIAL_CLIENTS = Number(args.get("trivial-clients") ?? 50)
const SUBSCRIPTIONS = Number(args.get("subscriptions") ?? 10_000)
const SESSIONS = args.get("sessions") ?? "1000,2000"
const IDLE_SECONDS = Number(args.get("idle-seconds") ?? 45)
const WALLET_CONNECTIONS = Number(args.get("wallet-connections") ?? 64)
const PEER = (args.get("peer") ?? "on") !== "off"
const OUT = args.get("out")
const PARTS = new Set((args.get("parts") ?? "floor,effect,effect-db,get,runs,turns,sessions,billing,peer").split(","))
if (!PEER) PARTS.delete("peer")
const SERVICES = process.env.DATABASE_URL !== undefined
const ADMIN_URL = process.env.DATABASE_URL ?? ""
const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379"
const ROOT = Path.resolve(import.meta.dirname, "..")
/** The level the targets are read at. */
const TARGET_LEVEL = LEVELS.includes(50) ? 50 : LEVELS[LEVELS.length - 1]!
const WARM_UP_CLIENTS = 20
/** How long after a peer load its CPU is read again (its store snapshot is written ~3 s after the last change). */
const PEER_SETTLE_SECONDS = 4
/** The message of every run and turn (the builtin model and the peer's fake model answer it in 3 text pieces). */
const MESSAGE = "hello there, world of agents"

const progress = (message: string) => console.error(`[engine ${new Date().toISOString().slice(11, 19)}] ${message}`)
const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
/** A number read from JSON (null, for NaN, and anything else become NaN). */
const num = (value: unknown): number => (typeof value === "number" ? value : NaN)
const numPair = (value: unknown): readonly [number, number] =>
  Array.isArray(value) ? [num(value[0]), num(value[1])] : [NaN, NaN]

// ---------------------------------------------------------------------------------------------------------------------
// Phases: one load (or one script) each, with its command and the load average around it

interface Phase {
  readonly id: string
  readonly what: string
  readonly command: string
  seconds: number
  loadStart: ReadonlyArray<number>
  loadEnd: ReadonlyArray<number>
  error?: string
}

const phases: Array<Phase> = []
let phaseCount = 0

/** Runs `body` as the next phase; a failure is recorded (and the run goes on) and gives undefined. */
const phase = async <T>(what: string, command: string, body: () => Promise<T>): Promise<{ id: string; value: T | undefined }> => {
  const record: Phase = { id: `P${++phaseCount}`, what, command, seconds: 0, loadStart: Os.loadavg(), loadEnd: [] }
  phases.push(record)
  progress(`${record.id} ${what}`)
  const started = performance.now()
  let value: T | undefined
  try {
    value = await body()
  } catch (error) {
    record.error = error instanceof Error ? error.message.split("\n")[0]! : String(error)
    progress(`${record.id} failed: ${record.error}`)
  }
  record.seconds = (performance.now() - started) / 1000
  record.loadEnd = Os.loadavg()
  return { id: record.id, value }
}

const tmp = Fs.mkdtempSync(Path.join(Os.tmpdir(), "atrium-engine-"))

/** The command line a script phase is shown with. */
const scriptCommand = (file: string, flags: ReadonlyArray<string>) => `npx tsx bench/${file} ${flags.join(" ")} --json FILE`

/** Runs bench/`file` with `flags` and `--json FILE` as its own process (its output to stderr), and reads FILE. */
const runScript = async (file: string, flags: ReadonlyArray<string>): Promise<any> => {
  const json = Path.join(tmp, `${Path.basename(file, ".ts")}-${phaseCount}.json`)
  const child = ChildProcess.spawn(process.execPath, ["--import", "tsx", `bench/${file}`, ...flags, "--json", json], {
    cwd: ROOT,
    env: process.env,
    stdio: ["ignore", "pipe", "pipe"]
  })
  child.stdout!.pipe(process.stderr, { end: false })
  child.stderr!.pipe(process.stderr, { end: false })
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve))
  if (code !== 0) throw new Error(`bench/${file} exited with ${code}`)
  return JSON.parse(Fs.readFileSync(json, "utf8"))
}

// ---------------------------------------------------------------------------------------------------------------------
// Clients

/** One GET, its body read and dropped; ok on 200. */
const getOnce = (agent: Http.Agent, base: string, path: string) =>
  new Promise<{ ok: boolean; total: number }>((resolve) => {
    const t0 = performance.now()
    const request = Http.request(new URL(path, base), { method: "GET", agent }, (response) => {
      response.resume()
      response.on("end", () => resolve({ ok: response.statusCode === 200, total: performance.now() - t0 }))
      response.on("error", () => resolve({ ok: false, total: performance.now() - t0 }))
    })
    request.on("error", () => resolve({ ok: false, total: performance.now() - t0 }))
    request.end()
  })

/** `n` held SSE answers of `GET base/path` (each its own socket), opened `concurrency` at a time; one counts once
 * its `: connected` greeting arrived. */
const openHolds = async (base: string, path: string, n: number, concurrency: number) => {
  const agents = Array.from({ length: Math.max(1, Math.ceil(n / 2000)) }, () => new Http.Agent({ keepAlive: false, maxSockets: 2000 }))
  const requests: Array<Http.ClientRequest> = []
  let greeted = 0
  let closed = 0
  const open = (i: number) =>
    new Promise<void>((resolve) => {
      let settled = false
      const settle = () => {
        if (!settled) {
          settled = true
          resolve()
        }
      }
      const request = Http.request(new URL(path, base), { method: "GET", agent: agents[i % agents.length] }, (response) => {
        let text = ""
        response.setEncoding("utf8")
        response.on("data", (chunk: string) => {
          // Counted once: the pings that follow the greeting arrive in the same small window.
          if (!settled && text.length < 64) {
            text += chunk
            if (text.includes(": connected\n\n")) {
              greeted++
              settle()
            }
          }
        })
        response.on("end", () => (closed++, settle()))
        response.on("error", () => (closed++, settle()))
      })
      request.on("error", () => settle())
      requests.push(request)
      request.end()
    })
  let next = 0
  await Promise.all(Array.from({ length: Math.min(concurrency, n) }, async () => {
    while (next < n) await open(next++)
  }))
  return {
    greeted: () => greeted,
    open: () => greeted - closed,
    close: () => {
      for (const r of requests) r.destroy()
      for (const a of agents) a.destroy()
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------------
// Results

type System = "floor" | "Effect floor" | typeof STATEMENTS_FLOOR | "Atrium" | "LangGraph"
/** bench/effect-floor.ts with a run's statements behind each run (part effect-db). */
const STATEMENTS_FLOOR = "Effect floor with a run's statements"

/** One load of runs, turns or trivial requests, whoever served it. */
interface Row {
  readonly system: System
  readonly what: string
  readonly clients: number
  readonly ok: number
  readonly failed: number
  readonly seconds: number
  /** [p50, p99] in ms: to the first event (run.created; the peer's `metadata`), the first text, the whole answer. */
  readonly firstEvent: readonly [number, number]
  readonly firstText: readonly [number, number]
  readonly total: readonly [number, number]
  /** Server CPU ms per completed request over the load; the peer's also including the 4 s after it. */
  readonly cpuMs: number
  readonly cpuMsSettled?: number
  readonly commitsPerTurn?: number
  /** Wallet round trips per turn (`wallet_requests_total` over every turn sent). */
  readonly walletPerTurn?: number
  /** Load average (1 min) at the start (when known) and end of the load. */
  readonly load: readonly [number, number]
  readonly phase: string
}

const runRows: Array<Row> = []
const turnRows: Array<Row> = []
const trivialRows: Array<Row> = []

const rowOfLoop = <T extends { readonly ok: boolean }>(
  system: System,
  what: string,
  phaseId: string,
  result: LoopResult<T>,
  pick: { firstEvent?: (t: T) => number; firstText?: (t: T) => number; total: (t: T) => number },
  extra: Partial<Row> = {}
): Row => ({
  system,
  what,
  clients: result.clients,
  ok: result.timings.length,
  failed: result.failures.length,
  seconds: result.seconds,
  firstEvent: pick.firstEvent ? pair(result.timings.map(pick.firstEvent)) : [NaN, NaN],
  firstText: pick.firstText ? pair(result.timings.map(pick.firstText)) : [NaN, NaN],
  total: pair(result.timings.map(pick.total)),
  cpuMs: (result.cpuSeconds * 1000) / result.timings.length,
  load: result.load,
  phase: phaseId,
  ...extra
})

const runPick = {
  firstEvent: (t: RunTiming) => t.created,
  firstText: (t: RunTiming) => t.firstText,
  total: (t: RunTiming) => t.total
}
const peerPick = {
  firstEvent: (t: PeerTiming) => t.firstEvent,
  firstText: (t: PeerTiming) => t.firstToken,
  total: (t: PeerTiming) => t.total
}

interface Holds {
  readonly held: number
  readonly heapPer: number
  readonly rssPer: number
  readonly idleCpu: number
  readonly quietCpu?: number
  readonly phase: string
}
let floorHolds: Holds | undefined
let effectHolds: Holds | undefined
let atriumHolds: (Holds & { readonly complete: number; readonly watchers: number; readonly lag: readonly [number, number] }) | undefined
let sessionMemory: { readonly sessions: number; readonly heapPer: number; readonly marginal: number; readonly rssPer: number; readonly phase: string } | undefined
let wallet: {
  readonly hot: { rate: number; p50: number; p99: number; cpuMs: number; failed: number; commits: number; load: number }
  readonly naive: { rate: number; p50: number; p99: number; failed: number; commits: number; load: number }
  readonly phase: string
} | undefined
let peerVersion = ""

// ---------------------------------------------------------------------------------------------------------------------
// The parts

/**
 * A floor's server (`script` with `args`) on a free port, answering `GET /json`: its process, its base URL, a
 * keep-alive agent of `maxSockets`, and `stop` (the agent closed, the process ended and waited for).
 */
const startFloor = async (script: string, args: ReadonlyArray<string>, maxSockets: number) => {
  const port = await freePort()
  const child = ChildProcess.spawn(process.execPath, ["--expose-gc", "--import", "tsx", script, "--port", String(port), ...args], {
    cwd: ROOT,
    stdio: ["ignore", "ignore", "inherit"]
  })
  const exited = new Promise((resolve) => child.once("exit", resolve))
  const kill = () => child.kill("SIGKILL")
  process.once("exit", kill)
  const base = `http://127.0.0.1:${port}`
  const agent = new Http.Agent({ keepAlive: true, maxSockets })
  const stop = async () => {
    agent.destroy()
    child.kill("SIGTERM")
    await exited
    process.removeListener("exit", kill)
  }
  try {
    for (let i = 0; ; i++) {
      if (i > 300 || child.exitCode !== null) throw new Error(`${[script, ...args.slice(0, 1)].join(" ")} did not start`)
      if (await getOnce(agent, base, "/json").then((r) => r.ok)) break
      await sleep(100)
    }
  } catch (error) {
    await stop()
    throw error
  }
  return { child, pid: child.pid!, base, agent, stop }
}

/** One of the two floors, as its own process: bench/floor.ts (bare `node:http`) or bench/effect-floor.ts (a bare
 * Effect `HttpApi` on `NodeHttpServer`, our versions): the same routes, answers and loads. */
const floorPart = (system: "floor" | "Effect floor", script: string) => async () => {
  const { agent, base, pid, stop } = await startFloor(script, [], Math.max(...LEVELS, TRIVIAL_CLIENTS, WARM_UP_CLIENTS) + 10)
  const mem = async () => {
    const response = await fetch(`${base}/mem`)
    return (await response.json()) as { heapUsed: number; rss: number; held: number }
  }
  try {
    const cmd = (what: string) => `engine.ts → node --expose-gc --import tsx ${script}: ${what}`
    const run = () => streamRun(agent, base, "/run", {}, { agent: system, message: MESSAGE })
    await phase(`${system}: warm-up`, cmd(`POST /run, ${WARM_UP_CLIENTS} clients, ${WARM_UP} s`), () =>
      closedLoop({ clients: WARM_UP_CLIENTS, seconds: WARM_UP, once: run }))
    const trivial = await phase(`${system}: GET /json, ${TRIVIAL_CLIENTS} clients`, cmd(`GET /json, ${TRIVIAL_CLIENTS} clients, ${SECONDS} s`), () =>
      closedLoop({ clients: TRIVIAL_CLIENTS, seconds: SECONDS, once: () => getOnce(agent, base, "/json"), cpu: () => processCpu(pid) }))
    if (trivial.value) trivialRows.push(rowOfLoop(system, "GET /json", trivial.id, trivial.value, { total: (t) => t.total }))
    for (const level of LEVELS) {
      const loaded = await phase(`${system}: POST /run, ${plural(level, "client")}`, cmd(`POST /run, ${plural(level, "client")}, ${SECONDS} s`), () =>
        closedLoop({ clients: level, seconds: SECONDS, once: run, cpu: () => processCpu(pid) }))
      if (loaded.value) runRows.push(rowOfLoop(system, "POST /run", loaded.id, loaded.value, runPick))
    }
    agent.destroy()
    if (SUBSCRIPTIONS > 0) {
      const held = await phase(`${system}: ${SUBSCRIPTIONS} held GET /hold`, cmd(`${SUBSCRIPTIONS} × GET /hold held, idle ${IDLE_SECONDS} s`), async () => {
        const before = await mem()
        const holds = await openHolds(base, "/hold", SUBSCRIPTIONS, 100)
        try {
          await sleep(1000)
          const after = await mem()
          const cpu0 = processCpu(pid)
          const t0 = performance.now()
          await sleep(IDLE_SECONDS * 1000)
          const idleCpu = (processCpu(pid) - cpu0) / ((performance.now() - t0) / 1000)
          const n = holds.open()
          return { held: n, heapPer: (after.heapUsed - before.heapUsed) / n, rssPer: (after.rss - before.rss) / n, idleCpu }
        } finally {
          holds.close()
        }
      })
      if (held.value) {
        if (system === "floor") floorHolds = { ...held.value, phase: held.id }
        else effectHolds = { ...held.value, phase: held.id }
      }
    }
  } finally {
    await stop()
  }
}

/** The users (and an agent each) the statements floor's runs are paid by, as bench/runs.ts's --users. */
const FLOOR_USERS = 50

/**
 * The Effect floor with a run's statements: the platform makes the database (its migrations, the users and their
 * wallets, their agents) and stops; bench/effect-floor.ts then runs a builtin run's statements on it, no code of ours
 * in the process.
 */
const statementsFloorPart = async () => {
  const phones = Array.from({ length: FLOOR_USERS }, (_, i) => `+1555${String(4_000_000 + i).padStart(7, "0")}`)
  const platform = await launchBenchPlatform({
    env: { SMS_TEST_OTP: phones.map((p) => `${p}=123456`).join(","), SIGNUP_CREDITS: "1000000" },
    ...(SERVICES ? { services: { adminUrl: ADMIN_URL, redisUrl: REDIS_URL } } : {})
  })
  progress(`${STATEMENTS_FLOOR}: the platform started; making ${FLOOR_USERS} users, their agents and wallets`)
  let agents: Array<string> = []
  const setup = new Http.Agent({ keepAlive: true, maxSockets: 10 })
  try {
    agents = await Promise.all(phones.map(async (phone, i) => {
      const token = (await call(setup, platform.base, "POST", "/api/auth/login", { phone, code: "123456" })).body.token as string
      const created = await call(setup, platform.base, "POST", "/v1/agents", { name: `Floor ${i}`, instructions: "Answer briefly." }, {
        authorization: `Bearer ${token}`
      })
      if (typeof created.body.identifier !== "string") throw new Error(`POST /v1/agents answered ${created.status}`)
      // A wallet is made (with its signup grant) when it is first read.
      const wallet = await call(setup, platform.base, "GET", "/api/wallet", undefined, { authorization: `Bearer ${token}` })
      if (wallet.status !== 200) throw new Error(`GET /api/wallet answered ${wallet.status}`)
      return created.body.identifier as string
    }))
  } finally {
    setup.destroy()
    await platform.stop({ keepData: true })
  }
  progress(`${STATEMENTS_FLOOR}: the database is ready; starting bench/effect-floor.ts on it`)
  const where = platform.db !== undefined ? ["--database", platform.db.url] : ["--data-dir", platform.dataDir!]
  const script = "bench/effect-floor.ts"
  const floor = await startFloor(script, where, Math.max(...LEVELS, WARM_UP_CLIENTS) + 10).catch(async (error) => {
    await platform.db?.drop()
    if (platform.dataDir !== undefined) Fs.rmSync(platform.dataDir, { recursive: true, force: true })
    throw error
  })
  const { agent, base, pid } = floor
  try {
    const cmd = (what: string) => `engine.ts → node --expose-gc --import tsx ${script} ${where[0]} (the platform's database, ${FLOOR_USERS} users): ${what}`
    const run = (client: number) => streamRun(agent, base, "/run", {}, { agent: agents[client % agents.length], message: MESSAGE })
    await phase(`${STATEMENTS_FLOOR}: warm-up`, cmd(`POST /run, ${WARM_UP_CLIENTS} clients, ${WARM_UP} s`), () =>
      closedLoop({ clients: WARM_UP_CLIENTS, seconds: WARM_UP, once: run }))
    for (const level of LEVELS) {
      const loaded = await phase(`${STATEMENTS_FLOOR}: POST /run, ${plural(level, "client")}`, cmd(`POST /run, ${plural(level, "client")}, ${SECONDS} s`), () =>
        closedLoop({ clients: level, seconds: SECONDS, once: run, cpu: () => processCpu(pid) }))
      if (loaded.value) runRows.push(rowOfLoop(STATEMENTS_FLOOR, "POST /run with a run's statements", loaded.id, loaded.value, runPick))
    }
  } finally {
    await floor.stop()
    await platform.db?.drop()
    if (platform.dataDir !== undefined) Fs.rmSync(platform.dataDir, { recursive: true, force: true })
  }
}

const getPart = async () => {
  const platform = await launchBenchPlatform({
    env: {},
    ...(SERVICES ? { services: { adminUrl: ADMIN_URL, redisUrl: REDIS_URL } } : {})
  })
  const agent = new Http.Agent({ keepAlive: true, maxSockets: Math.max(TRIVIAL_CLIENTS, WARM_UP_CLIENTS) + 10 })
  try {
    const pid = platform.child.pid!
    const cmd = (what: string) => `engine.ts → the platform (launchBenchPlatform, ${SERVICES ? "services" : "embedded"}): ${what}`
    const once = () => getOnce(agent, platform.base, "/v1/meters")
    await phase("Atrium: warm-up GET /v1/meters", cmd(`GET /v1/meters, ${WARM_UP_CLIENTS} clients, ${WARM_UP} s`), () =>
      closedLoop({ clients: WARM_UP_CLIENTS, seconds: WARM_UP, once }))
    const loaded = await phase(`Atrium: GET /v1/meters, ${TRIVIAL_CLIENTS} clients`, cmd(`GET /v1/meters, ${TRIVIAL_CLIENTS} clients, ${SECONDS} s`), () =>
      closedLoop({ clients: TRIVIAL_CLIENTS, seconds: SECONDS, once, cpu: () => processCpu(pid) }))
    if (loaded.value) trivialRows.push(rowOfLoop("Atrium", "GET /v1/meters", loaded.id, loaded.value, { total: (t) => t.total }))
  } finally {
    agent.destroy()
    await platform.stop()
  }
}

const runsPart = async () => {
  const flags = ["--seconds", String(SECONDS), "--levels", LEVELS.join(",")]
  const { id, value } = await phase(`Atrium: runs at ${LEVELS.join(", ")} clients`, scriptCommand("runs.ts", flags), () => runScript("runs.ts", flags))
  if (!value) return
  const results = (value.results as Array<any>).filter((r) => String(r.name).startsWith("short answer"))
  let previousLoad = NaN
  for (const r of results) {
    const ok = num(r.ok)
    runRows.push({
      system: "Atrium",
      what: "POST /v1/agents/run",
      clients: num(r.concurrency),
      ok,
      failed: num(r.failed),
      seconds: num(r.seconds),
      firstEvent: numPair(r.created),
      firstText: numPair(r.firstText),
      total: numPair(r.total),
      cpuMs: (num(r.serverCpu) * num(r.seconds) * 1000) / ok,
      load: [previousLoad, num(r.load)],
      phase: id
    })
    previousLoad = num(r.load)
  }
}

const turnsPart = async () => {
  for (const level of LEVELS) {
    const flags = ["--phases", "memory,turns", "--sessions", "0", "--gc", "off", "--turn-sessions", String(level), "--seconds", String(SECONDS)]
    const { id, value } = await phase(`Atrium: session turns, ${plural(level, "session")}`, scriptCommand("sessions.ts", flags), () =>
      runScript("sessions.ts", flags))
    const t = value?.turns
    if (!t) continue
    const ok = num(t.ok)
    const failed = num(t.failed)
    turnRows.push({
      system: "Atrium",
      what: "POST /v1/sessions/:id/events",
      clients: num(t.sessions),
      ok,
      failed,
      seconds: num(t.seconds),
      firstEvent: numPair(t.created),
      firstText: numPair(t.firstText),
      total: numPair(t.total),
      cpuMs: (num(t.cpu) * num(t.seconds) * 1000) / ok,
      // As bench/sessions.ts counts it: commits over every turn sent.
      commitsPerTurn: num(t.committed) / Math.max(1, ok + failed),
      walletPerTurn: num(t.walletPerTurn),
      load: [NaN, num(t.load)],
      phase: id
    })
  }
}

const sessionsPart = async () => {
  const subSessions = Math.min(1000, Math.max(1, Math.ceil(SUBSCRIPTIONS / 10)))
  const flags = [
    "--phases", SUBSCRIPTIONS > 0 ? "memory,subscriptions" : "memory",
    "--sessions", SESSIONS,
    "--subscriptions", String(SUBSCRIPTIONS),
    "--sub-sessions", String(subSessions),
    "--idle-seconds", String(IDLE_SECONDS)
  ]
  const { id, value } = await phase("Atrium: idle sessions and subscriptions", scriptCommand("sessions.ts", flags), () =>
    runScript("sessions.ts", flags))
  const rows = value?.memory?.rows as Array<any> | undefined
  if (rows && rows.length >= 2) {
    const first = rows[0]!
    const last = rows[rows.length - 1]!
    const before = rows[rows.length - 2]!
    const n = num(last.sessions) - num(first.sessions)
    sessionMemory = {
      sessions: n,
      heapPer: (num(last.heap) - num(first.heap)) / n,
      rssPer: (num(last.rssAfterGc) - num(first.rssAfterGc)) / n,
      marginal: rows.length >= 3 ? (num(last.heap) - num(before.heap)) / (num(last.sessions) - num(before.sessions)) : NaN,
      phase: id
    }
  }
  const s = value?.subscriptions
  if (s) {
    const greeted = num(s.greeted)
    atriumHolds = {
      held: greeted,
      heapPer: (num(s.held?.heap) - num(s.before?.heap)) / greeted,
      rssPer: (num(s.held?.rss) - num(s.before?.rss)) / greeted,
      idleCpu: num(s.idleCpu),
      quietCpu: num(s.quietCpu),
      complete: num(s.delivery?.complete),
      watchers: num(s.delivery?.watchers),
      lag: numPair(s.delivery?.lag),
      phase: id
    }
  }
}

const billingPart = async () => {
  if (!SERVICES) {
    await phase("billing: skipped (needs DATABASE_URL and REDIS_URL)", "-", async () => undefined)
    return
  }
  const flags = ["--phases", "hot,naive-hot", "--seconds", String(SECONDS), "--concurrency", String(WALLET_CONNECTIONS)]
  const { id, value } = await phase(`Atrium: hot wallet and its baseline, ${WALLET_CONNECTIONS} connections`, scriptCommand("billing.ts", flags), () =>
    runScript("billing.ts", flags))
  const results = value?.results as Array<any> | undefined
  const hot = results?.find((r) => String(r.name).includes("events, one hot"))
  const naive = results?.find((r) => String(r.name).includes("naive baseline, one hot"))
  if (hot && naive) {
    wallet = {
      hot: {
        rate: num(hot.rate), p50: num(hot.p50), p99: num(hot.p99), cpuMs: (num(hot.serverCpu) * 1000) / num(hot.rate),
        failed: num(hot.failed), commits: num(hot.commits), load: num(hot.load)
      },
      naive: { rate: num(naive.rate), p50: num(naive.p50), p99: num(naive.p99), failed: num(naive.failed), commits: num(naive.commits), load: num(naive.load) },
      phase: id
    }
  }
}

const peerPart = async () => {
  const installed = await phase("LangGraph: install (npm ci in bench/peer-langgraph, when needed)", "ensureInstalled()", () => ensureInstalled().then(() => true))
  if (!installed.value) return
  try {
    const pkg = JSON.parse(Fs.readFileSync(Path.join(ROOT, "bench/peer-langgraph/package.json"), "utf8"))
    peerVersion = `@langchain/langgraph-cli ${pkg.dependencies["@langchain/langgraph-cli"]}, @langchain/langgraph-api ${pkg.dependencies["@langchain/langgraph-api"]}`
  } catch {}
  const server = await startLangGraph()
  const agent = new Http.Agent({ keepAlive: true, maxSockets: Math.max(...LEVELS, WARM_UP_CLIENTS) + 10 })
  try {
    const cmd = (what: string) => `engine.ts → langgraphjs dev (bench/peer-langgraph, in-memory): ${what}`
    await phase("LangGraph: warm-up", cmd(`POST /runs/stream, ${WARM_UP_CLIENTS} clients, ${WARM_UP} s`), () =>
      closedLoop({ clients: WARM_UP_CLIENTS, seconds: WARM_UP, once: () => statelessRun(server.base, agent) }))
    /** A measured load whose CPU is read at its end and again PEER_SETTLE_SECONDS later. */
    const measured = async (once: (client: number) => Promise<PeerTiming>, clients: number) => {
      const marks: Array<number> = []
      const result = await closedLoop({
        clients,
        seconds: SECONDS,
        once,
        cpu: () => {
          const cpu = server.cpu()
          marks.push(cpu)
          return cpu
        }
      })
      await sleep(PEER_SETTLE_SECONDS * 1000)
      return { result, settled: server.cpu() - marks[0]! }
    }
    for (const level of LEVELS) {
      const loaded = await phase(`LangGraph: stateless runs, ${plural(level, "client")}`, cmd(`POST /runs/stream, ${plural(level, "client")}, ${SECONDS} s (+${PEER_SETTLE_SECONDS} s)`), () =>
        measured(() => statelessRun(server.base, agent), level))
      if (loaded.value) {
        const { result, settled } = loaded.value
        runRows.push(rowOfLoop("LangGraph", "POST /runs/stream", loaded.id, result, peerPick, { cpuMsSettled: (settled * 1000) / result.timings.length }))
      }
    }
    for (const level of LEVELS) {
      const loaded = await phase(`LangGraph: runs on threads, ${plural(level, "thread")}`, cmd(`POST /threads (×${level}), then POST /threads/:id/runs/stream, ${plural(level, "client")}, ${SECONDS} s (+${PEER_SETTLE_SECONDS} s)`), async () => {
        const threads = await Promise.all(Array.from({ length: level }, () => createThread(server.base, agent)))
        return measured((client) => threadRun(server.base, threads[client]!, agent), level)
      })
      if (loaded.value) {
        const { result, settled } = loaded.value
        turnRows.push(rowOfLoop("LangGraph", "POST /threads/:id/runs/stream", loaded.id, result, peerPick, { cpuMsSettled: (settled * 1000) / result.timings.length }))
      }
    }
  } finally {
    agent.destroy()
    await server.stop()
  }
}

// ---------------------------------------------------------------------------------------------------------------------
// The report

const f = (n: number, digits = 1) => (Number.isFinite(n) ? n.toFixed(digits) : "-")
const p = (values: readonly [number, number], digits = 1) => `${f(values[0], digits)} / ${f(values[1], digits)}`
const kib = (bytes: number) => (Number.isFinite(bytes) ? `${(bytes / 1024).toFixed(1)} KiB` : "-")
const ratio = (a: number, b: number) => (Number.isFinite(a) && Number.isFinite(b) && b !== 0 ? `${(a / b).toFixed(2)}×` : "-")
const phaseOf = (id: string | undefined) => phases.find((ph) => ph.id === id)
const loadOf = (id: string | undefined) => {
  const ph = phaseOf(id)
  return ph === undefined ? "-" : `${f(ph.loadStart[0]!, 2)} → ${f(ph.loadEnd[0]!, 2)}`
}
const rowLoad = (load: readonly [number, number]) => Number.isFinite(load[0]) ? `${f(load[0], 2)} → ${f(load[1], 2)}` : `… → ${f(load[1], 2)}`

const git = (...argv: Array<string>) => {
  try {
    return ChildProcess.execFileSync("git", argv, { cwd: ROOT, encoding: "utf8" }).trim()
  } catch {
    return "?"
  }
}

const report = (started: Date, loadStart: ReadonlyArray<number>, seconds: number): string => {
  const lines: Array<string> = []
  const out = (line = "") => lines.push(line)
  const at = (rows: ReadonlyArray<Row>, system: System, clients: number) => rows.find((r) => r.system === system && r.clients === clients)
  const dirty = git("status", "--porcelain", "--untracked-files=no").length > 0
  const levelNote = TARGET_LEVEL === 50 ? "" : ` (at ${TARGET_LEVEL}: 50 was not among --levels)`
  const lowest = LEVELS[0]!

  out(`# Engine cost (issue 28): one run`)
  out()
  out(`- date: ${started.toISOString()}; took ${f(seconds / 60, 1)} min`)
  out(`- commit: ${git("rev-parse", "--short", "HEAD")}${dirty ? " (with uncommitted changes)" : ""} — ${git("log", "-1", "--format=%s").slice(0, 100)}`)
  out(`- node ${process.version}; ${Os.cpus().length} cores (${Os.cpus()[0]?.model.trim() ?? "?"}); ${f(Os.totalmem() / 2 ** 30, 1)} GiB`)
  out(`- mode: ${SERVICES ? "services (DATABASE_URL + REDIS_URL: PostgreSQL + Redis)" : "embedded (PGlite; the billing part needs services)"}`)
  out(`- command: \`npx tsx bench/engine.ts ${process.argv.slice(2).join(" ")}\`; ${SECONDS} s per load, warm-up ${WARM_UP} s, levels ${LEVELS.join(", ")}`)
  out(`- peer: ${PARTS.has("peer") ? `LangGraph.js dev server (${peerVersion || "not started"})` : "off"}`)
  out(`- load average (1, 5, 15 min) at the start: ${loadStart.map((l) => l.toFixed(2)).join(" ")}; at the end: ${Os.loadavg().map((l) => l.toFixed(2)).join(" ")}`)
  out()

  // Targets.
  out(`## Issue 28 targets`)
  out()
  out(
    `ours / Effect floor / Node floor / peer: Atrium, a bare Effect \`HttpApi\` with our package versions (bench/effect-floor.ts), ` +
      `the bare node:http server (bench/floor.ts) and the LangGraph.js dev server, each under the same load (phase: see Phases for its command).`
  )
  out()
  out("| # | row | target | ours | Effect floor | Node floor | peer | ours / Effect | ours / Node | ours / peer | met? | load avg (1 min) | phase |")
  out("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |")
  /** true, false, or why it cannot be said. */
  const verdict = (ok: boolean | string | undefined) =>
    ok === undefined ? "not measured" : typeof ok === "string" ? ok : ok ? "yes" : "**no**"
  interface Beside {
    readonly effect?: number | undefined
    readonly floor?: number | undefined
    readonly peer?: number | undefined
  }
  const target = (
    id: string, row: string, goal: string, ours: number, beside: Beside, show: (n: number) => string,
    met: boolean | string | undefined, phaseId: string | undefined, ratios = true
  ) => {
    const e = beside.effect ?? NaN
    const n = beside.floor ?? NaN
    const pe = beside.peer ?? NaN
    out(
      `| ${id} | ${row} | ${goal} | ${show(ours)} | ${show(e)} | ${show(n)} | ${show(pe)} | ${ratios ? ratio(ours, e) : "-"} | ` +
        `${ratios ? ratio(ours, n) : "-"} | ${ratios ? ratio(ours, pe) : "-"} | ${Number.isFinite(ours) ? verdict(met) : "not measured"} | ` +
        `${loadOf(phaseId)} | ${phaseId ?? "-"} |`
    )
  }
  const ms = (digits: number) => (n: number) => Number.isFinite(n) ? `${n.toFixed(digits)} ms` : "-"
  const cpuAt = (rows: ReadonlyArray<Row>, system: System, clients: number) => at(rows, system, clients)?.cpuMs
  const trivialOf = (system: System) => trivialRows.find((x) => x.system === system)
  const cheapest = trivialOf("Atrium")
  {
    const effect = trivialOf("Effect floor")?.cpuMs ?? NaN
    target(`2`, `server CPU per cheapest request (GET /v1/meters; floors GET /json), ${TRIVIAL_CLIENTS} clients`, "≤ 1.5× Effect floor",
      cheapest?.cpuMs ?? NaN, { effect, floor: trivialOf("floor")?.cpuMs }, ms(3), (cheapest?.cpuMs ?? NaN) <= 1.5 * effect, cheapest?.phase)
  }
  {
    const r = at(runRows, "Atrium", TARGET_LEVEL)
    target(`3`, `server CPU per builtin run (POST /v1/agents/run, 11 events), ${TARGET_LEVEL} clients${levelNote}; floors POST /run; peer: stateless run`, "≤ 1.5 ms",
      r?.cpuMs ?? NaN,
      { effect: cpuAt(runRows, "Effect floor", TARGET_LEVEL), floor: cpuAt(runRows, "floor", TARGET_LEVEL), peer: cpuAt(runRows, "LangGraph", TARGET_LEVEL) },
      ms(2), (r?.cpuMs ?? NaN) <= 1.5, r?.phase)
    const withStatements = cpuAt(runRows, STATEMENTS_FLOOR, TARGET_LEVEL)
    target(`(5)`, `server CPU per builtin run, ${TARGET_LEVEL} clients; beside it (Effect column): ${STATEMENTS_FLOOR} (bench/effect-floor.ts --database), ` +
      `so ours / Effect is what our code adds to the runtime doing the same statements and events`, "reference",
      r?.cpuMs ?? NaN, { effect: withStatements }, ms(2), "reference", r?.phase)
    const t = at(turnRows, "Atrium", TARGET_LEVEL)
    target(`3`, `server CPU per session turn, ${TARGET_LEVEL} sessions${levelNote}; floors POST /run; peer: run on a thread`, "≤ 3 ms",
      t?.cpuMs ?? NaN,
      { effect: cpuAt(runRows, "Effect floor", TARGET_LEVEL), floor: cpuAt(runRows, "floor", TARGET_LEVEL), peer: cpuAt(turnRows, "LangGraph", TARGET_LEVEL) },
      ms(2), (t?.cpuMs ?? NaN) <= 3, t?.phase)
    for (const level of [...new Set([lowest, TARGET_LEVEL])]) {
      const turn = at(turnRows, "Atrium", level)
      const c = turn?.commitsPerTurn ?? NaN
      target(`(3)`, `PostgreSQL commits per session turn, ${level} session${level === 1 ? "" : "s"}`, "reference", c, {}, (n) => f(n, 2), "reference", turn?.phase, false)
      const w = turn?.walletPerTurn ?? NaN
      target(`45.2`, `wallet round trips per session turn, ${level} session${level === 1 ? "" : "s"}`, "≤ 2", w, {}, (n) => f(n, 2), w <= 2, turn?.phase, false)
    }
  }
  target(`3`, `heap per idle active session${sessionMemory ? ` (${sessionMemory.sessions} sessions over the baseline)` : ""}`, "≤ 20 KiB",
    sessionMemory?.heapPer ?? NaN, {}, kib, (sessionMemory?.heapPer ?? NaN) <= 20 * 1024, sessionMemory?.phase, false)
  {
    const a = atriumHolds
    const enough = a !== undefined && a.held >= 10_000
    target(`3`, `server CPU, ${a ? a.held : SUBSCRIPTIONS} idle subscriptions (cores; floors: as many GET /hold)`, "≤ 0.05 for 10,000",
      a?.idleCpu ?? NaN, { effect: effectHolds?.idleCpu, floor: floorHolds?.idleCpu }, (n) => f(n, 3),
      a === undefined ? undefined : enough ? a.idleCpu <= 0.05 : `n/a (${a.held} held, the target is for 10,000)`, a?.phase)
    target(`(3)`, `heap per idle open subscription (GET /v1/sessions/:id/events; floors GET /hold)`, "reference",
      a?.heapPer ?? NaN, { effect: effectHolds?.heapPer, floor: floorHolds?.heapPer }, kib, "reference", a?.phase)
    out(
      `| (3) | every event delivered once, in order (subscribers complete / listening) | all | ` +
        `${a ? `${a.complete} / ${a.watchers}` : "-"} | - | - | - | - | - | - | ` +
        `${a ? verdict(a.watchers > 0 && a.complete === a.watchers) : "not measured"} | ${loadOf(a?.phase)} | ${a?.phase ?? "-"} |`
    )
  }
  {
    const w = wallet
    const times = w ? w.hot.rate / w.naive.rate : NaN
    const perS = (n: number) => Number.isFinite(n) ? `${n.toFixed(0)}/s` : "-"
    const cheapestCpu = cheapest?.cpuMs ?? NaN
    target(`4`, `hot wallet: server CPU per charge (POST /v1/events; beside: the cheapest request, row 2)`, "≤ 2× cheapest request",
      w?.hot.cpuMs ?? NaN, { effect: trivialOf("Effect floor")?.cpuMs, floor: trivialOf("floor")?.cpuMs }, ms(3),
      (w?.hot.cpuMs ?? NaN) <= 2 * cheapestCpu, w?.phase)
    target(`4`, `hot wallet: charges/s on one wallet, ${WALLET_CONNECTIONS} connections (beside: one PostgreSQL transaction per charge)`,
      "≥ 3× baseline", w?.hot.rate ?? NaN, { floor: w?.naive.rate }, perS, times >= 3, w?.phase)
    target(`4`, `hot wallet p99 (beside: the baseline's p99)`, "≤ 20 ms", w?.hot.p99 ?? NaN, { floor: w?.naive.p99 }, ms(1),
      (w?.hot.p99 ?? NaN) <= 20, w?.phase)
  }
  {
    const comparison = (row: string, rows: ReadonlyArray<Row>, pick: (r: Row) => number, show: (n: number) => string) => {
      const of = (system: System) => {
        const r = rows.find((x) => x.system === system && x.clients === TARGET_LEVEL)
        return r ? pick(r) : NaN
      }
      const ours = rows.find((r) => r.system === "Atrium" && r.clients === TARGET_LEVEL)
      target(`(5)`, row, "beside the peer", ours ? pick(ours) : NaN,
        { effect: of("Effect floor"), floor: of("floor"), peer: of("LangGraph") }, show, "measured", ours?.phase)
    }
    const rate = (r: Row) => r.ok / r.seconds
    const perS = (n: number) => Number.isFinite(n) ? `${n.toFixed(1)}/s` : "-"
    comparison(`runs/s, ${TARGET_LEVEL} clients (runs)`, runRows, rate, perS)
    comparison(`first event p50, ${TARGET_LEVEL} clients (runs)`, runRows, (r) => r.firstEvent[0], ms(1))
    comparison(`turns/s, ${TARGET_LEVEL} sessions (peer: threads; floors: runs)`, turnRows, rate, perS)
    comparison(`first event p50, ${TARGET_LEVEL} sessions (peer: threads)`, turnRows, (r) => r.firstEvent[0], ms(1))
  }
  out()
  out(
    `Ratios are ours / theirs (for CPU and heap, > 1 means Atrium spends more; for rates, > 1 means Atrium does more). ` +
      `The phase column points to the command in Phases; the load average is the 1-minute one at the phase's start → end. ` +
      `Rows in brackets are references, not targets.`
  )
  out()

  const loadTable = (title: string, rows: ReadonlyArray<Row>, unit: string, units: string, commits: boolean) => {
    out(`## ${title}`)
    out()
    out(
      `| system | request | ${units === "runs" ? "clients" : "sessions"} | ${units}/s | first event p50 / p99 ms | first text p50 / p99 ms | whole p50 / p99 ms | ` +
        `CPU per ${unit} ms |${commits ? " PG commits per turn |" : ""} failed | load avg | phase |`
    )
    out(`| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |${commits ? " ---: |" : ""} ---: | --- | --- |`)
    const order: Array<System> = ["floor", "Effect floor", STATEMENTS_FLOOR, "Atrium", "LangGraph"]
    const sorted = [...rows].sort((a, b) => a.clients - b.clients || order.indexOf(a.system) - order.indexOf(b.system))
    for (const r of sorted) {
      const cpu = r.cpuMsSettled !== undefined ? `${f(r.cpuMs, 2)} (${f(r.cpuMsSettled, 2)} with the ${PEER_SETTLE_SECONDS} s after)` : f(r.cpuMs, 2)
      out(
        `| ${r.system} | ${r.what} | ${r.clients} | ${f(r.ok / r.seconds, 1)} | ${p(r.firstEvent)} | ${p(r.firstText)} | ${p(r.total)} | ${cpu} |` +
          `${commits ? ` ${r.commitsPerTurn !== undefined ? f(r.commitsPerTurn, 2) : "-"} |` : ""} ${r.failed} | ${rowLoad(r.load)} | ${r.phase} |`
      )
    }
    out()
  }
  loadTable("Runs (clients; floors POST /run, Atrium POST /v1/agents/run, LangGraph POST /runs/stream)", runRows, "run", "runs", false)
  loadTable("Session turns (concurrent sessions; Atrium POST /v1/sessions/:id/events, LangGraph POST /threads/:id/runs/stream)", turnRows, "turn", "turns", true)
  if (trivialRows.length > 0) {
    out(`## Trivial request`)
    out()
    out("| system | request | clients | requests/s | p50 / p99 ms | CPU per request ms | failed | load avg | phase |")
    out("| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- |")
    for (const r of trivialRows) {
      out(`| ${r.system} | ${r.what} | ${r.clients} | ${f(r.ok / r.seconds, 0)} | ${p(r.total, 2)} | ${f(r.cpuMs, 3)} | ${r.failed} | ${rowLoad(r.load)} | ${r.phase} |`)
    }
    out()
  }
  if (atriumHolds || floorHolds || effectHolds || sessionMemory) {
    out(`## Idle subscriptions and sessions`)
    out()
    out("| system | held | heap per held | RSS per held | server CPU while idle (cores) | load avg | phase |")
    out("| --- | ---: | ---: | ---: | ---: | --- | --- |")
    for (const [name, holds] of [["Node floor", floorHolds], ["Effect floor", effectHolds]] as const) {
      if (holds) out(`| ${name} (GET /hold) | ${holds.held} | ${kib(holds.heapPer)} | ${kib(holds.rssPer)} | ${f(holds.idleCpu, 3)} | ${loadOf(holds.phase)} | ${holds.phase} |`)
    }
    if (atriumHolds) {
      out(
        `| Atrium (GET /v1/sessions/:id/events) | ${atriumHolds.held} | ${kib(atriumHolds.heapPer)} | ${kib(atriumHolds.rssPer)} | ` +
          `${f(atriumHolds.idleCpu, 3)} (${f(atriumHolds.quietCpu ?? NaN, 3)} with none open) | ${loadOf(atriumHolds.phase)} | ${atriumHolds.phase} |`
      )
    }
    if (sessionMemory) {
      out(
        `| Atrium idle active sessions | ${sessionMemory.sessions} | ${kib(sessionMemory.heapPer)} (marginal ${kib(sessionMemory.marginal)}) | ` +
          `${kib(sessionMemory.rssPer)} | - | ${loadOf(sessionMemory.phase)} | ${sessionMemory.phase} |`
      )
    }
    out()
    if (atriumHolds) {
      out(`Delivery: ${atriumHolds.complete} of ${atriumHolds.watchers} listening subscribers got every event of the turn once, in order; lag behind the sender's stream p50 / p99 ${p(atriumHolds.lag)} ms.`)
      out()
    }
  }
  if (wallet) {
    out(`## Hot wallet (${WALLET_CONNECTIONS} connections)`)
    out()
    out("| run | charges/s | p50 ms | p99 ms | server CPU ms per charge | PG commits/s | failed | load avg at its end |")
    out("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    out(`| POST /v1/events, one hot wallet | ${f(wallet.hot.rate, 0)} | ${f(wallet.hot.p50)} | ${f(wallet.hot.p99)} | ${f(wallet.hot.cpuMs, 3)} | ${f(wallet.hot.commits, 0)} | ${wallet.hot.failed} | ${f(wallet.hot.load, 2)} |`)
    out(`| baseline: one PostgreSQL transaction per charge (direct SQL) | ${f(wallet.naive.rate, 0)} | ${f(wallet.naive.p50)} | ${f(wallet.naive.p99)} | - | ${f(wallet.naive.commits, 0)} | ${wallet.naive.failed} | ${f(wallet.naive.load, 2)} |`)
    out()
  }
  out(`## Phases`)
  out()
  out("| phase | what | command | s | load avg at start | load avg at end |")
  out("| --- | --- | --- | ---: | --- | --- |")
  for (const ph of phases) {
    out(
      `| ${ph.id} | ${ph.what}${ph.error ? ` — **failed: ${ph.error.replace(/\|/g, "\\|")}**` : ""} | \`${ph.command}\` | ${f(ph.seconds, 0)} | ` +
        `${ph.loadStart.map((l) => l.toFixed(2)).join(" ")} | ${ph.loadEnd.map((l) => l.toFixed(2)).join(" ")} |`
    )
  }
  out()
  out(`## Notes`)
  out()
  out(`- CPU per run or turn: the server process's utime + stime (/proc/<pid>/stat) over the load, divided by the completed ones; for LangGraph the sum over its process tree (CLI, tsx, the API server, esbuild), also read ${PEER_SETTLE_SECONDS} s after the load, when its in-memory store's snapshot has been written.`)
  out(`- First event: Atrium's and the floor's \`run.created\`; LangGraph's \`metadata\`, sent when a queue worker picks the run up (idle workers poll every 0–1 s). First text: the first \`output.text.delta\`; LangGraph's first \`messages\` chunk.`)
  out(`- LangGraph's dev server keeps each stream open ~500 ms after its last event (it polls its queue with a 500 ms timeout), so its runs/s with N closed-loop clients is at most about N / 0.55 s and its whole-run latency includes that tail; see bench/peer-langgraph/README.md.`)
  out(`- Atrium's turn rows come from bench/sessions.ts after a warm-up of 50 sessions and 250 turns (its memory phase with no checkpoint); its runs from bench/runs.ts after ${SECONDS} s of warm-up at 20 clients.`)
  out(`- All on one ${Os.cpus().length}-core machine: the load generator (this process, or the script it started), the server and PostgreSQL share it.`)
  return lines.join("\n") + "\n"
}

// ---------------------------------------------------------------------------------------------------------------------

const main = async () => {
  const started = new Date()
  const loadStart = Os.loadavg()
  const t0 = performance.now()
  if (!SERVICES) progress("DATABASE_URL is not set: embedded mode (the targets are for services mode; billing is skipped)")
  try {
    if (PARTS.has("floor")) await part("floor", "bench/floor.ts", floorPart("floor", "bench/floor.ts"))
    if (PARTS.has("effect")) await part("Effect floor", "bench/effect-floor.ts", floorPart("Effect floor", "bench/effect-floor.ts"))
    if (PARTS.has("effect-db")) await part(STATEMENTS_FLOOR, "bench/effect-floor.ts --database", statementsFloorPart)
    if (PARTS.has("get")) await part("Atrium: trivial GET", "launchBenchPlatform", getPart)
    if (PARTS.has("runs")) await part("Atrium: runs", "bench/runs.ts", runsPart)
    if (PARTS.has("turns")) await part("Atrium: turns", "bench/sessions.ts", turnsPart)
    if (PARTS.has("sessions")) await part("Atrium: sessions", "bench/sessions.ts", sessionsPart)
    if (PARTS.has("billing")) await part("Atrium: billing", "bench/billing.ts", billingPart)
    if (PARTS.has("peer")) await part("LangGraph", "bench/peer-langgraph/peer.ts", peerPart)
  } finally {
    Fs.rmSync(tmp, { recursive: true, force: true })
  }
  const text = report(started, loadStart, (performance.now() - t0) / 1000)
  process.stdout.write(text)
  if (OUT !== undefined) Fs.writeFileSync(OUT, text)
}

/** Runs one part; a failure outside its phases (starting a server, say) is listed as a phase of its own, and the
 * run goes on with the next part. */
const part = async (what: string, command: string, body: () => Promise<void>) => {
  const loadStart = Os.loadavg()
  const started = performance.now()
  try {
    await body()
  } catch (error) {
    const message = error instanceof Error ? error.message.split("\n")[0]! : String(error)
    progress(`${what} failed: ${message}`)
    phases.push({
      id: `P${++phaseCount}`, what, command, seconds: (performance.now() - started) / 1000, loadStart, loadEnd: Os.loadavg(), error: message
    })
  }
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
