/**
 * Run throughput with the builtin model: `POST /v1/agents/run` streams at 1, 50 and 500 concurrent clients (runs per
 * second, time to `run.created` and to the first `output.text.delta`, p50/p99), then events per second through one
 * process with long answers. The platform runs as its own process, the way `npm start` runs it.
 *
 *   npx tsx bench/runs.ts [--seconds 10] [--levels 1,50,500] [--users 50]                  # embedded (PGlite)
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test REDIS_URL=redis://127.0.0.1:6379 \
 *     npx tsx bench/runs.ts                                                                 # services
 *
 * Flags (defaults in brackets): --seconds 10 (per phase), --levels 1,50,500, --users 50, --event-concurrency 50 and
 * --event-words 600 (the long-answer phase), --json FILE (also write the results as JSON, for bench/engine.ts).
 *
 * A script, not a test: it prints a Markdown table for BENCHMARKS.md and asserts nothing (beyond counting the runs
 * whose stream did not end with run.completed and [DONE] as failed).
 */
import * as Http from "node:http"
import * as Os from "node:os"
import { call, closedLoop, launchBenchPlatform, percentile, processCpu, type RunTiming, streamRun, writeJson } from "./support.js"

const args = new Map<string, string>()
for (let i = 2; i < process.argv.length; i += 2) args.set(process.argv[i]!.replace(/^--/, ""), process.argv[i + 1]!)
const SECONDS = Number(args.get("seconds") ?? 10)
const LEVELS = (args.get("levels") ?? "1,50,500").split(",").map(Number)
const USERS = Number(args.get("users") ?? 50)
/** Concurrency of the events/s phase, and the words of its message (three words per text increment). */
const EVENT_CONCURRENCY = Number(args.get("event-concurrency") ?? 50)
const EVENT_WORDS = Number(args.get("event-words") ?? 600)
const SERVICES = process.env.DATABASE_URL !== undefined
const ADMIN_URL = process.env.DATABASE_URL ?? ""
const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379"
/** Also write the results (every phase's numbers, as in the table) as JSON to this file. */
const JSON_FILE = args.get("json")

const agent = new Http.Agent({ keepAlive: true, maxSockets: Math.max(...LEVELS, EVENT_CONCURRENCY) + 10 })

/** One streamed run, read as it arrives. */
const streamAgentRun = (base: string, token: string, body: unknown) =>
  streamRun(agent, base, "/v1/agents/run", { authorization: `Bearer ${token}` }, body)

interface Result {
  readonly name: string
  readonly concurrency: number
  readonly ok: number
  readonly failed: number
  readonly seconds: number
  readonly created: readonly [number, number]
  readonly firstText: readonly [number, number]
  readonly total: readonly [number, number]
  readonly events: number
  readonly bytes: number
  readonly serverCpu: number
  readonly load: number
}

/** `concurrency` clients, each starting its next run when the last one ended, for SECONDS. */
const phase = async (
  name: string,
  concurrency: number,
  serverPid: number | undefined,
  once: (worker: number) => Promise<RunTiming>
): Promise<Result> => {
  const { timings, failures, seconds, cpuSeconds } = await closedLoop({
    clients: concurrency,
    seconds: SECONDS,
    once,
    cpu: () => processCpu(serverPid)
  })
  const sorted = (pick: (t: RunTiming) => number) => timings.map(pick).filter((n) => !Number.isNaN(n)).sort((a, b) => a - b)
  const pair = (values: ReadonlyArray<number>) => [percentile(values, 50), percentile(values, 99)] as const
  return {
    name,
    concurrency,
    ok: timings.length,
    failed: failures.length,
    seconds,
    created: pair(sorted((t) => t.created)),
    firstText: pair(sorted((t) => t.firstText)),
    total: pair(sorted((t) => t.total)),
    events: timings.reduce((sum, t) => sum + t.events, 0),
    bytes: timings.reduce((sum, t) => sum + t.bytes, 0),
    serverCpu: cpuSeconds / seconds,
    load: Os.loadavg()[0]!
  }
}

const main = async () => {
  const startLoad = Os.loadavg()
  const phones = Array.from({ length: USERS }, (_, i) => `+1555${String(2_000_000 + i).padStart(7, "0")}`)
  const platform = await launchBenchPlatform({
    // Enough credits that no wallet runs dry during the bench.
    env: { SMS_TEST_OTP: phones.map((p) => `${p}=123456`).join(","), SIGNUP_CREDITS: "1000000" },
    ...(SERVICES ? { services: { adminUrl: ADMIN_URL, redisUrl: REDIS_URL } } : {})
  })
  const { base, child } = platform
  const results: Array<Result> = []
  try {
    // Users log in (fixed test codes); each has its own agent and wallet, so no single wallet is the bottleneck.
    const users = await Promise.all(phones.map(async (phone, i) => {
      const token = (await call(agent, base, "POST", "/api/auth/login", { phone, code: "123456" })).body.token as string
      const created = await call(agent, base, "POST", "/v1/agents", { name: `Bench ${i}`, instructions: "Answer briefly." }, {
        authorization: `Bearer ${token}`
      })
      if (created.status !== 201) throw new Error(`create agent: ${created.status} ${JSON.stringify(created.body)}`)
      return { token, agent: created.body.identifier as string }
    }))
    const short = (worker: number) => {
      const user = users[worker % users.length]!
      return streamAgentRun(base, user.token, { agent: user.agent, message: "hello there, world of agents" })
    }
    const longMessage = Array.from({ length: EVENT_WORDS }, (_, i) => `w${i}`).join(" ")
    const long = (worker: number) => {
      const user = users[worker % users.length]!
      return streamAgentRun(base, user.token, { agent: user.agent, message: longMessage })
    }

    // Warm up the JIT, the pools and the wallet entities.
    await phase("warm-up", 20, child.pid, short)
    for (const level of LEVELS) results.push(await phase(`short answer, ${level} concurrent`, level, child.pid, short))
    results.push(await phase(`long answer (${EVENT_WORDS} words), ${EVENT_CONCURRENCY} concurrent`, EVENT_CONCURRENCY, child.pid, long))
  } finally {
    agent.destroy()
    await platform.stop()
  }

  const f = (n: number, digits = 1) => Number.isNaN(n) ? "-" : n.toFixed(digits)
  console.log(`\nmode: ${SERVICES ? "services (PostgreSQL + Redis)" : "embedded (PGlite, in-memory store)"}; ${SECONDS} s per phase; ${USERS} users, one agent each`)
  console.log(`load average at the start: ${startLoad.map((l) => l.toFixed(2)).join(" ")}; ${Os.cpus().length} cores\n`)
  console.log("| phase | runs/s | run.created p50 / p99 ms | first text p50 / p99 ms | whole run p50 / p99 ms | events/s | failed | server CPU | load avg |")
  console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
  for (const r of results) {
    console.log(
      `| ${r.name} | ${f(r.ok / r.seconds)} | ${f(r.created[0])} / ${f(r.created[1])} | ${f(r.firstText[0])} / ${f(r.firstText[1])} | ` +
        `${f(r.total[0])} / ${f(r.total[1])} | ${f(r.events / r.seconds, 0)} | ${r.failed} | ${f(r.serverCpu, 2)} | ${f(r.load, 2)} |`
    )
  }
  const last = results[results.length - 1]!
  console.log(`\nevents/s through one process (long answers): ${f(last.events / last.seconds, 0)}; ${f(last.bytes / last.seconds / 1e6, 2)} MB/s of SSE`)
  writeJson(JSON_FILE, {
    mode: SERVICES ? "services" : "embedded",
    seconds: SECONDS,
    users: USERS,
    loadStart: startLoad,
    loadEnd: Os.loadavg(),
    // serverCpu is cores busy (CPU seconds per second); created, firstText, total are [p50, p99] in ms.
    results
  })
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
