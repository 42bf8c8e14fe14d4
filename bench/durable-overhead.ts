/**
 * What a background run costs over a foreground one (issue 43 item 6, docs/runs.md "The durable bench"): the same
 * builtin run, as `POST /v1/agents/run` streamed (foreground) and with `background: true` followed until it ended
 * (its events read with `GET /v1/runs/:id/events`, or `GET /v1/runs/:id` polled), in alternating rounds on one
 * platform process from `dist/` (as `npm start` runs it), each round a closed loop of `--clients` clients for
 * `--seconds`. Per round: the server's CPU per run and PostgreSQL's commits per run (`pg_stat_database.xact_commit`
 * of the bench's database, as bench/sessions.ts reads it), each also net of what the idle platform spends over the
 * same time (its cluster's heartbeats, the sweeps: measured for `--idle` seconds before the first round).
 *
 *   npm run build
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test REDIS_URL=redis://127.0.0.1:6379 \
 *     npx tsx bench/durable-overhead.ts [--rounds 3] [--seconds 20] [--clients 4] [--idle 10] [--follow events|poll]
 *     [--message '/tool calculator {"expression":"6 * 7"}'] [--json FILE]
 *
 * Services mode only (commits are PostgreSQL's). The default run has two model steps and a tool call: a background
 * run records each as an activity (the cluster's messages), which is what this measures. `--follow poll` polls
 * `GET /v1/runs/:id` every 200 ms instead of reading the run's event stream (each poll is a read, and a read is a
 * commit: the client's way of following counts). A script, not a test: it prints a table and asserts nothing beyond
 * counting runs that did not complete as failed.
 */
import * as Http from "node:http"
import * as Os from "node:os"
import pg from "pg"
import { call, closedLoop, launchBenchPlatform, processCpu, STATISTICS_LAG_MS, streamRun, writeJson } from "./support.js"

const args = new Map<string, string>()
for (let i = 2; i < process.argv.length; i += 2) args.set(process.argv[i]!.replace(/^--/, ""), process.argv[i + 1]!)
const ROUNDS = Number(args.get("rounds") ?? 3)
const SECONDS = Number(args.get("seconds") ?? 20)
const CLIENTS = Number(args.get("clients") ?? 4)
const IDLE_SECONDS = Number(args.get("idle") ?? 10)
const FOLLOW = args.get("follow") ?? "events"
const MESSAGE = args.get("message") ?? `/tool calculator {"expression":"6 * 7"}`
const JSON_FILE = args.get("json")
if (FOLLOW !== "events" && FOLLOW !== "poll") throw new Error("--follow takes events or poll")
if (process.env.DATABASE_URL === undefined) throw new Error("services mode only: set DATABASE_URL (and REDIS_URL); commits are PostgreSQL's")
const ADMIN_URL = process.env.DATABASE_URL
const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379"
const USERS = CLIENTS

const agent = new Http.Agent({ keepAlive: true, maxSockets: CLIENTS * 2 + 10 })
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

interface Timing {
  readonly ok: boolean
  readonly total: number
}

/** A GET answered with SSE, read to its end: ok when its last event is `run.completed` and it ends with [DONE]. */
const followEvents = (base: string, path: string, headers: Record<string, string>) =>
  new Promise<boolean>((resolve) => {
    const request = Http.request(new URL(path, base), { method: "GET", agent, headers }, (response) => {
      let text = ""
      response.setEncoding("utf8")
      response.on("data", (chunk: string) => (text += chunk))
      response.on("end", () => {
        const lastEvent = text.lastIndexOf("event: ")
        resolve(response.statusCode === 200 && text.endsWith("data: [DONE]\n\n") && text.startsWith("event: run.completed\n", lastEvent))
      })
      response.on("error", () => resolve(false))
    })
    request.on("error", () => resolve(false))
    request.end()
  })

const TERMINAL = new Set(["completed", "failed", "cancelled", "incomplete"])

const main = async () => {
  const startLoad = Os.loadavg()
  const phones = Array.from({ length: USERS }, (_, i) => `+1555${String(4_300_000 + i).padStart(7, "0")}`)
  const platform = await launchBenchPlatform({
    env: { SMS_TEST_OTP: phones.map((p) => `${p}=123456`).join(","), SIGNUP_CREDITS: "1000000", SMS_CHALLENGE_AFTER: "100000" },
    services: { adminUrl: ADMIN_URL, redisUrl: REDIS_URL }
  })
  const { base, child, db } = platform
  const stats = new pg.Client({ connectionString: ADMIN_URL })
  await stats.connect()
  /** The bench database's commits so far, once PostgreSQL's statistics caught up (`STATISTICS_LAG_MS`). */
  const commits = async () => {
    await sleep(STATISTICS_LAG_MS)
    const result = await stats.query("SELECT xact_commit::bigint AS n FROM pg_stat_database WHERE datname = $1", [db!.name])
    return Number(result.rows[0].n)
  }
  const cpu = () => processCpu(child.pid)
  /** CPU seconds, commits and wall seconds of whatever `body` does, the statistics' lag included on both ends. */
  const measured = async <A>(body: () => Promise<A>) => {
    const c0 = await commits()
    const cpu0 = cpu()
    const t0 = performance.now()
    const value = await body()
    const c1 = await commits()
    return { value, cpuSeconds: cpu() - cpu0, commits: c1 - c0, seconds: (performance.now() - t0) / 1000 }
  }

  interface Row {
    readonly round: number
    readonly kind: "foreground" | "background"
    readonly runs: number
    readonly failed: number
    readonly seconds: number
    readonly cpuMsPerRun: number
    readonly cpuMsPerRunNet: number
    readonly commitsPerRun: number
    readonly commitsPerRunNet: number
    readonly p50Ms: number
    readonly load: number
  }
  const rows: Array<Row> = []
  let idle = { cpuPerSecond: NaN, commitsPerSecond: NaN }
  try {
    const users = await Promise.all(phones.map(async (phone, i) => {
      const login = await call(agent, base, "POST", "/api/auth/login", { phone, code: "123456" })
      if (login.status !== 200) throw new Error(`login: ${login.status} ${JSON.stringify(login.body)}`)
      const auth = { authorization: `Bearer ${login.body.token as string}` }
      const made = await call(agent, base, "POST", "/v1/agents", {
        name: `Overhead ${i}`,
        instructions: "Answer.",
        tools: [{ name: "calculator", permission: "allow" }]
      }, auth)
      if (made.status !== 201) throw new Error(`create agent: ${made.status} ${JSON.stringify(made.body)}`)
      return { auth, agent: made.body.identifier as string }
    }))
    const foreground = async (client: number): Promise<Timing> => {
      const user = users[client % users.length]!
      const run = await streamRun(agent, base, "/v1/agents/run", user.auth, { agent: user.agent, message: MESSAGE })
      return { ok: run.ok, total: run.total }
    }
    const background = async (client: number): Promise<Timing> => {
      const user = users[client % users.length]!
      const t0 = performance.now()
      const queued = await call(agent, base, "POST", "/v1/agents/run", { agent: user.agent, message: MESSAGE, background: true }, user.auth)
      if (queued.status !== 202) return { ok: false, total: performance.now() - t0 }
      const id = queued.body.id as string
      if (FOLLOW === "events") {
        const ok = await followEvents(base, `/v1/runs/${id}/events`, user.auth)
        return { ok, total: performance.now() - t0 }
      }
      for (;;) {
        await sleep(200)
        const run = await call(agent, base, "GET", `/v1/runs/${id}`, undefined, user.auth)
        if (run.status !== 200) return { ok: false, total: performance.now() - t0 }
        if (TERMINAL.has(run.body.status)) return { ok: run.body.status === "completed", total: performance.now() - t0 }
      }
    }
    const loop = (once: (client: number) => Promise<Timing>) => closedLoop({ clients: CLIENTS, seconds: SECONDS, once })

    // Warm: the JIT, the pools, the wallets, the workflow engine's first executions.
    await loop(foreground)
    await loop(background)
    const quiet = await measured(() => sleep(IDLE_SECONDS * 1000))
    idle = { cpuPerSecond: quiet.cpuSeconds / quiet.seconds, commitsPerSecond: quiet.commits / quiet.seconds }
    console.log(`idle: ${(idle.cpuPerSecond * 1000).toFixed(1)} ms CPU/s, ${idle.commitsPerSecond.toFixed(1)} commits/s`)
    for (let round = 1; round <= ROUNDS; round++) {
      // Alternating which goes first, so neither always follows the other's leftovers.
      const order = round % 2 === 1 ? (["foreground", "background"] as const) : (["background", "foreground"] as const)
      for (const kind of order) {
        const m = await measured(() => loop(kind === "foreground" ? foreground : background))
        const runs = m.value.timings.length
        const per = (n: number) => (runs === 0 ? NaN : n / runs)
        const totals = m.value.timings.map((t) => t.total).sort((a, b) => a - b)
        const row: Row = {
          round,
          kind,
          runs,
          failed: m.value.failures.length,
          seconds: m.seconds,
          cpuMsPerRun: per(m.cpuSeconds * 1000),
          cpuMsPerRunNet: per((m.cpuSeconds - idle.cpuPerSecond * m.seconds) * 1000),
          commitsPerRun: per(m.commits),
          commitsPerRunNet: per(m.commits - idle.commitsPerSecond * m.seconds),
          p50Ms: totals[Math.floor(totals.length / 2)] ?? NaN,
          load: Os.loadavg()[0]!
        }
        rows.push(row)
        console.log(JSON.stringify(row))
      }
    }
  } finally {
    await stats.end()
    agent.destroy()
    await platform.stop()
  }

  const f = (n: number, digits = 1) => (Number.isNaN(n) ? "-" : n.toFixed(digits))
  console.log(`\nservices mode, one process from dist/; ${CLIENTS} clients, ${SECONDS} s per round, ${ROUNDS} rounds alternating; ` +
    `message ${JSON.stringify(MESSAGE)}; background runs followed by ${FOLLOW === "events" ? "their event stream" : "polling GET /v1/runs/:id every 200 ms"}`)
  console.log(`load average at the start: ${startLoad.map((l) => l.toFixed(2)).join(" ")}; ${Os.cpus().length} cores; ` +
    `idle platform: ${f(idle.cpuPerSecond * 1000)} ms CPU/s, ${f(idle.commitsPerSecond)} commits/s\n`)
  console.log("| round | run | runs | failed | runs/s | server CPU ms/run (net of idle) | commits/run (net of idle) | p50 ms | load |")
  console.log("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
  for (const r of rows) {
    console.log(
      `| ${r.round} | ${r.kind} | ${r.runs} | ${r.failed} | ${f(r.runs / r.seconds)} | ${f(r.cpuMsPerRun)} (${f(r.cpuMsPerRunNet)}) | ` +
        `${f(r.commitsPerRun)} (${f(r.commitsPerRunNet)}) | ${f(r.p50Ms, 0)} | ${f(r.load, 2)} |`
    )
  }
  const mean = (kind: Row["kind"], pick: (r: Row) => number) => {
    const values = rows.filter((r) => r.kind === kind).map(pick)
    return values.reduce((a, b) => a + b, 0) / values.length
  }
  const cpuFg = mean("foreground", (r) => r.cpuMsPerRunNet)
  const cpuBg = mean("background", (r) => r.cpuMsPerRunNet)
  const commitsFg = mean("foreground", (r) => r.commitsPerRunNet)
  const commitsBg = mean("background", (r) => r.commitsPerRunNet)
  console.log(`\nmean, net of idle: foreground ${f(cpuFg)} ms CPU and ${f(commitsFg)} commits per run; background ${f(cpuBg)} ms CPU and ` +
    `${f(commitsBg)} commits per run: ${f(cpuBg / cpuFg, 2)}x the CPU, ${f(commitsBg / commitsFg, 2)}x the commits`)
  writeJson(JSON_FILE, { clients: CLIENTS, seconds: SECONDS, rounds: ROUNDS, follow: FOLLOW, message: MESSAGE, idle, loadStart: startLoad, loadEnd: Os.loadavg(), rows })
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
