/**
 * Cluster mode, side by side: the platform as `WORKERS=1`, `WORKERS=2` and `WORKERS=3` (node:cluster workers sharing
 * the HTTP port, each a cluster runner), same database server, same load: the hot wallet (every charge on one user), 64
 * wallets, and session turns (one short turn per session at a time, many sessions). Then the time a killed runner's
 * sessions need to answer again: two separate runner processes, sessions on both, SIGKILL one, and how long until
 * every session answers a message sent to the survivor.
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test REDIS_URL=redis://127.0.0.1:6379 \
 *     npx tsx bench/cluster.ts [--seconds 10] [--concurrency 64] [--sessions 32] [--workers 1,2,3]
 *       [--phases hot,many,turns,failover]
 *
 * A script, not a test: it prints a Markdown table for BENCHMARKS.md (with the load average next to every number)
 * and asserts nothing. Each row has the CPU the platform's processes (the primary and its workers) spent per request
 * that succeeded, so cost as runners grow reads side by side (issue 45 item 4: from 1 to 3 runners, CPU per charge
 * should rise by at most 1.5×). Under each wallet phase it prints, from every process's metrics (`METRICS_PORT`), how the
 * charges reached their wallets: directly in the owner's entity, or in `Charges` messages, and how many charges each
 * message to another runner carried (issue 28 item 4).
 */
import * as Crypto from "node:crypto"
import * as Http from "node:http"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Fs from "node:fs"
import { call, freePort, launchBenchPlatform, percentile, processCpu } from "./support.js"

const args = new Map<string, string>()
for (let i = 2; i < process.argv.length; i += 2) args.set(process.argv[i]!.replace(/^--/, ""), process.argv[i + 1]!)
const SECONDS = Number(args.get("seconds") ?? 10)
const CONCURRENCY = Number(args.get("concurrency") ?? 64)
const SESSIONS = Number(args.get("sessions") ?? 32)
const ADMIN_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test"
const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379"
const PHASES = new Set((args.get("phases") ?? "hot,many,turns,failover").split(","))
const WORKERS = (args.get("workers") ?? "1,2,3").split(",").map(Number)
const CODE = "123456"
const PHONES = Array.from({ length: 70 }, (_, i) => `+1555${String(7_000_000 + i)}`)

const agent = new Http.Agent({ keepAlive: true, maxSockets: CONCURRENCY })
const load = () => Os.loadavg()[0]!.toFixed(1)

interface User {
  readonly token: string
  readonly apiKey: string
  readonly userId: string
}

const login = async (base: string, phone: string): Promise<User> => {
  const reply = await call(agent, base, "POST", "/api/auth/login", { phone, code: CODE })
  const token = reply.body.token as string
  const key = await call(agent, base, "POST", "/api/user/apiKey/create", { name: "bench" }, { authorization: `Bearer ${token}` })
  const userId = JSON.parse(Buffer.from(token.split(".")[1]!, "base64url").toString()).userId as string
  await call(agent, base, "POST", `/internal/wallets/${userId}/grants`, {
    amount: "1000000",
    idempotency_key: Crypto.randomUUID(),
    reason: "bench"
  })
  return { token, apiKey: key.body.key as string, userId }
}

/** A process and every process below it (node:cluster's workers are the primary's children). */
const processTree = (root: number): Array<number> => {
  const parents = new Map<number, number>()
  for (const entry of Fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = Fs.readFileSync(`/proc/${entry}/stat`, "utf8")
      parents.set(Number(entry), Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]))
    } catch {
      // gone between the listing and the read
    }
  }
  const tree = [root]
  for (let i = 0; i < tree.length; i++) for (const [pid, parent] of parents) if (parent === tree[i]) tree.push(pid)
  return tree
}
const treeCpu = (root: number) => processTree(root).reduce((sum, pid) => sum + (processCpu(pid) || 0), 0)

/** CONCURRENCY callers for SECONDS; each call returns whether it succeeded. `root`: the platform's process, whose tree is measured. */
const drive = async (name: string, one: (i: number) => Promise<boolean>, root: number) => {
  const cpuBefore = treeCpu(root)
  const latencies: Array<number> = []
  let ok = 0
  let failed = 0
  const until = Date.now() + SECONDS * 1000
  const started = Date.now()
  await Promise.all(Array.from({ length: CONCURRENCY }, async (_, caller) => {
    for (let i = caller; Date.now() < until; i += CONCURRENCY) {
      const t = performance.now()
      const good = await one(i).catch(() => false)
      latencies.push(performance.now() - t)
      if (good) ok++
      else failed++
    }
  }))
  const seconds = (Date.now() - started) / 1000
  const cpuMs = ((treeCpu(root) - cpuBefore) * 1000) / Math.max(ok, 1)
  latencies.sort((a, b) => a - b)
  return `| ${name} | ${(ok / seconds).toFixed(0)}/s | ${failed} | ${percentile(latencies, 0.5).toFixed(1)} | ${percentile(latencies, 0.99).toFixed(1)} | ${cpuMs.toFixed(2)} | ${load()} |`
}

const agentOf = async (base: string, user: User) =>
  (await call(agent, base, "POST", "/v1/agents", { name: `Bench ${Crypto.randomBytes(3).toString("hex")}`, instructions: "Answer." }, {
    authorization: `Bearer ${user.token}`
  })).body.identifier as string

const sessionOf = async (base: string, user: User, agentId: string) =>
  (await call(agent, base, "POST", "/v1/sessions", { agent: agentId }, { authorization: `Bearer ${user.token}` })).body.id as string

const turn = async (base: string, user: User, session: string) => {
  const reply = await call(agent, base, "POST", `/v1/sessions/${session}/events`, { type: "message", message: "hello" }, {
    authorization: `Bearer ${user.token}`
  })
  return reply.status === 200 && String(reply.body).includes("run.completed")
}

const portFree = (port: number) =>
  new Promise<boolean>((resolve) => {
    const server = Net.createServer()
    server.once("error", () => resolve(false))
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)))
  })

/** A METRICS_PORT with the `workers` ports after it free too (worker i of WORKERS=N listens on METRICS_PORT + 1 + i). */
const metricsPortBase = async (workers: number) => {
  for (;;) {
    const base = 20_000 + Crypto.randomInt(30_000)
    let free = true
    for (let i = 0; i <= workers && free; i++) free = await portFree(base + i)
    if (free) return base
  }
}

/** A series' key whatever order the exporter prints its labels in: `name{a="1",b="2"}`, labels sorted. */
const seriesKey = (name: string, labels: Record<string, string>) =>
  `${name}{${Object.entries(labels).sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => `${k}="${v}"`).join(",")}}`

/** The wallet counters of one process's Prometheus scrape, by series. */
const walletCounters = async (port: number) => {
  const text = await fetch(`http://127.0.0.1:${port}/metrics`).then((r) => r.text(), () => "")
  const counters = new Map<string, number>()
  for (const line of text.split("\n")) {
    const match = /^(wallet_charges_total|wallet_charge_messages_total)(?:\{([^}]*)\})? (\S+)/.exec(line)
    if (match === null) continue
    const labels: Record<string, string> = {}
    for (const [, key, value] of (match[2] ?? "").matchAll(/(\w+)="([^"]*)"/g)) labels[key!] = value!
    counters.set(seriesKey(match[1]!, labels), Number(match[3]))
  }
  return counters
}

/** The processes that take charges: the one process, or each worker. */
const chargeTakers = (metricsPort: number, workers: number) =>
  workers <= 1 ? [metricsPort] : Array.from({ length: workers }, (_, i) => metricsPort + 1 + i)

/** What each process's wallet counters moved by since `before`, as a line under the table. */
const walletPaths = async (name: string, metricsPort: number, workers: number, before: ReadonlyArray<Map<string, number>>) => {
  const after = await Promise.all(chargeTakers(metricsPort, workers).map(walletCounters))
  const parts = after.map((counters, i) => {
    const moved = (metric: string, labels: Record<string, string>) => {
      const key = seriesKey(metric, labels)
      return (counters.get(key) ?? 0) - (before[i]?.get(key) ?? 0)
    }
    const direct = moved("wallet_charges_total", { via: "direct", to: "this_runner" })
    const here = moved("wallet_charges_total", { via: "message", to: "this_runner" })
    const away = moved("wallet_charges_total", { via: "message", to: "another_runner" })
    const messagesHere = moved("wallet_charge_messages_total", { to: "this_runner" })
    const messagesAway = moved("wallet_charge_messages_total", { to: "another_runner" })
    const perMessage = (charges: number, messages: number) => messages === 0 ? "-" : (charges / messages).toFixed(1)
    return `process ${i + 1}: ${direct} direct, ${here} in ${messagesHere} messages to itself, ` +
      `${away} in ${messagesAway} messages to another runner (${perMessage(away, messagesAway)} charges per message)`
  })
  return `${name}: ${parts.join("; ")}`
}

const env = (workers: number) => ({
  WORKERS: String(workers),
  JWT_SECRET: "bench-cluster-secret-bench-cluster-secret",
  SMS_TEST_OTP: PHONES.map((p) => `${p}=${CODE}`).join(","),
  SMS_IP_HOURLY_LIMIT: "100000"
})

const rows: Array<string> = []
/** How the charges of each wallet phase reached their wallets (from the metrics). */
const paths: Array<string> = []
/** The first few refused charges are printed (a charge should never be refused here: every wallet has credits). */
let refusals = 0
for (const workers of WORKERS) {
  const metricsPort = await metricsPortBase(workers)
  const platform = await launchBenchPlatform({
    env: { ...env(workers), METRICS_PORT: String(metricsPort) },
    services: { adminUrl: ADMIN_URL, redisUrl: REDIS_URL }
  })
  const counted = async (name: string, phase: () => Promise<string>) => {
    const before = await Promise.all(chargeTakers(metricsPort, workers).map(walletCounters))
    rows.push(await phase())
    paths.push(await walletPaths(name, metricsPort, workers, before))
  }
  const root = platform.child.pid!
  try {
    const users = await Promise.all(PHONES.slice(0, 65).map((phone) => login(platform.base, phone)))
    const consume = (user: User) =>
      call(agent, platform.base, "POST", "/openapi/credit/consume", { amount: "0.01", idempotency_key: Crypto.randomUUID() }, {
        authorization: `Bearer ${user.apiKey}`
      }).then((r) => {
        if (r.status !== 200 && refusals++ < 3) console.error(`refused: ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`)
        return r.status === 200
      })
    if (PHASES.has("hot")) {
      await counted(`WORKERS=${workers} hot wallet`, () => drive(`WORKERS=${workers} hot wallet`, () => consume(users[0]!), root))
    }
    if (PHASES.has("many")) {
      await counted(`WORKERS=${workers} 64 wallets`, () => drive(`WORKERS=${workers} 64 wallets`, (i) => consume(users[1 + (i % 64)]!), root))
    }
    if (PHASES.has("turns")) {
      const identifier = await agentOf(platform.base, users[0]!)
      const sessions = await Promise.all(Array.from({ length: SESSIONS }, () => sessionOf(platform.base, users[0]!, identifier)))
      rows.push(await drive(`WORKERS=${workers} session turns (${SESSIONS} sessions)`, (i) => turn(platform.base, users[0]!, sessions[i % SESSIONS]!), root))
    }
  } finally {
    await platform.stop()
  }
}

if (PHASES.has("failover")) {
  // Two separate runner processes on one database: the second joins the first's cluster.
  const first = await launchBenchPlatform({ env: env(1), services: { adminUrl: ADMIN_URL, redisUrl: REDIS_URL } })
  const second = await launchBenchPlatform({
    env: { ...env(1), DATABASE_URL: first.db!.url, REDIS_URL, KEY_PREFIX: `bench:${first.db!.name}:`, RUNNER_PORT: String(await freePort()) }
  })
  try {
    const user = await login(first.base, PHONES[69]!)
    const identifier = await agentOf(first.base, user)
    const sessions = await Promise.all(Array.from({ length: SESSIONS }, () => sessionOf(first.base, user, identifier)))
    await Promise.all(sessions.map((s) => turn(first.base, user, s)))
    // Wallets too: 16 users' wallets, each charged once before the kill (active on their owner).
    const payers = await Promise.all(PHONES.slice(40, 56).map((p) => login(first.base, p)))
    const charge = async (payer: User) =>
      (await call(agent, first.base, "POST", "/openapi/credit/consume", { amount: "0.01", idempotency_key: Crypto.randomUUID() }, {
        authorization: `Bearer ${payer.apiKey}`
      })).status === 200
    await Promise.all(payers.map(charge))
    const killed = Date.now()
    second.child.kill("SIGKILL")
    const again = (one: () => Promise<boolean>) => async () => {
      while (!(await one().catch(() => false))) await new Promise((r) => setTimeout(r, 100))
      return Date.now() - killed
    }
    const [times, walletTimes] = await Promise.all([
      Promise.all(sessions.map((s) => again(() => turn(first.base, user, s))())),
      Promise.all(payers.map((p) => again(() => charge(p))()))
    ])
    times.sort((a, b) => a - b)
    walletTimes.sort((a, b) => a - b)
    rows.push(`| failover: every session answers again after SIGKILL of one of 2 runners | p50 ${percentile(times, 0.5)} ms, max ${times[times.length - 1]} ms | | | | | ${load()} |`)
    rows.push(`| failover: every wallet answers again after SIGKILL of one of 2 runners | p50 ${percentile(walletTimes, 0.5)} ms, max ${walletTimes[walletTimes.length - 1]} ms | | | | | ${load()} |`)
  } finally {
    await second.stop()
    await first.stop()
  }
}

console.log(`| run (${SECONDS} s, ${CONCURRENCY} concurrent) | throughput | failed | p50 ms | p99 ms | CPU ms per success | load |`)
console.log("| --- | --- | --- | --- | --- | --- | --- |")
for (const row of rows) console.log(row)
console.log("")
for (const line of paths) console.log(`- ${line}`)
agent.destroy()
