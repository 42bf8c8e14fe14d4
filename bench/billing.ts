/**
 * Billing throughput: POST /v1/events on ONE hot wallet and on many wallets, 64 concurrent connections, against
 * the platform in services mode (real PostgreSQL, durable commits), and in the same run the naive baseline: one
 * PostgreSQL transaction per charge (`UPDATE wallets SET balance = balance - price WHERE ... AND balance >= price`
 * plus its ledger row) on the same database.
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test REDIS_URL=redis://127.0.0.1:6379 \
 *     npx tsx bench/billing.ts [--seconds 10] [--concurrency 64] [--users 64] [--phases floor,hot,many,naive-hot,naive-many]
 *       [--json FILE]
 *
 * `--phases` picks the runs; `floor` is GET /v1/meters, the cheapest route of the same server (no auth, no body, no
 * database), for reference: what the HTTP stack alone costs per request.
 * Each row also says where the CPU went, since the server, PostgreSQL and this load generator share the machine: the
 * platform process's CPU (cores busy, and CPU ms per request), this process's, the whole machine's (other work on it
 * included), the load average, and the transactions PostgreSQL committed per second in the bench database.
 * BENCH_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof" profiles the server under load. `--json FILE` also writes the
 * rows as JSON (for bench/engine.ts).
 *
 * A script, not a test: it prints a Markdown table for BENCHMARKS.md and asserts nothing.
 */
import * as Crypto from "node:crypto"
import * as Http from "node:http"
import * as Fs from "node:fs"
import * as Os from "node:os"
import pg from "pg"
import { Pool } from "undici"
import { call, launchBenchPlatform, percentile, processCpu, writeJson } from "./support.js"

/** The operator bearer the benchmark's platform gets for its `/internal/*` grants. */
const BENCH_INTERNAL_TOKEN = "bench-internal-token-0123456789abcdef"

const args = new Map<string, string>()
for (let i = 2; i < process.argv.length; i += 2) args.set(process.argv[i]!.replace(/^--/, ""), process.argv[i + 1]!)
const SECONDS = Number(args.get("seconds") ?? 10)
const CONCURRENCY = Number(args.get("concurrency") ?? 64)
const USERS = Number(args.get("users") ?? 64)
const ADMIN_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test"
const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379"
/** Which runs, in this order: floor (GET /v1/meters, for reference), hot, many, naive-hot, naive-many. */
const PHASES = new Set((args.get("phases") ?? "floor,hot,many,naive-hot,naive-many").split(","))
/** Also write the rows as JSON to this file. */
const JSON_FILE = args.get("json")

const agent = new Http.Agent({ keepAlive: true, maxSockets: CONCURRENCY })

interface Result {
  readonly name: string
  readonly ok: number
  readonly failed: number
  readonly seconds: number
  readonly p50: number
  readonly p99: number
  /** Load average (1 min) when the phase ended. */
  readonly load: number
  /** CPU seconds per second of wall time: the platform process, this load generator, the whole machine. */
  readonly serverCpu: number
  readonly benchCpu: number
  readonly machineCpu: number
  /** Transactions PostgreSQL committed in the bench database, per second. */
  readonly commits: number
}

/** Busy CPU seconds of the whole machine (all cores), from /proc/stat. */
const machineBusy = (): number => {
  try {
    const cpu = Fs.readFileSync("/proc/stat", "utf8").split("\n")[0]!.split(/\s+/).slice(1).map(Number)
    const idle = cpu[3]! + cpu[4]!
    return (cpu.reduce((a, b) => a + b, 0) - idle) / 100
  } catch {
    return NaN
  }
}

interface Probe {
  readonly serverPid: number | undefined
  readonly commits: () => Promise<number>
}

/** Runs `CONCURRENCY` workers calling `once(worker, i)` until the time is up. */
const load = async (name: string, probe: Probe, once: (worker: number, i: number) => Promise<boolean>): Promise<Result> => {
  const latencies: Array<number> = []
  let failed = 0
  const commits0 = await probe.commits()
  const server0 = processCpu(probe.serverPid)
  const bench0 = process.cpuUsage()
  const machine0 = machineBusy()
  const deadline = performance.now() + SECONDS * 1000
  const started = performance.now()
  await Promise.all(Array.from({ length: CONCURRENCY }, async (_, worker) => {
    for (let i = 0; performance.now() < deadline; i++) {
      const t0 = performance.now()
      const ok = await once(worker, i)
      if (ok) latencies.push(performance.now() - t0)
      else failed++
    }
  }))
  const seconds = (performance.now() - started) / 1000
  const bench = process.cpuUsage(bench0)
  const serverCpu = (processCpu(probe.serverPid) - server0) / seconds
  const machineCpu = (machineBusy() - machine0) / seconds
  const commits = (await probe.commits() - commits0) / seconds
  latencies.sort((a, b) => a - b)
  return {
    name,
    ok: latencies.length,
    failed,
    seconds,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    load: Os.loadavg()[0]!,
    serverCpu,
    benchCpu: (bench.user + bench.system) / 1e6 / seconds,
    machineCpu,
    commits
  }
}

const main = async () => {
  const startLoad = Os.loadavg()
  const phones = Array.from({ length: USERS }, (_, i) => `+1555${String(1_000_000 + i).padStart(7, "0")}`)
  const platform = await launchBenchPlatform({
    env: { INTERNAL_TOKEN: BENCH_INTERNAL_TOKEN, SMS_TEST_OTP: phones.map((p) => `${p}=123456`).join(","), SIGNUP_CREDITS: "0" },
    services: { adminUrl: ADMIN_URL, redisUrl: REDIS_URL }
  })
  const { base, child } = platform
  const db = platform.db!
  const results: Array<Result> = []
  try {
    // Setup over the public API: users, an app with a meter, each user authorizes it, credits for everyone.
    const tokens = await Promise.all(phones.map(async (phone) =>
      (await call(agent, base, "POST", "/api/auth/login", { phone, code: "123456" })).body.token as string
    ))
    const userIds = tokens.map((t) => JSON.parse(Buffer.from(t.split(".")[1]!, "base64url").toString()).userId as string)
    const redirectUri = "http://127.0.0.1:9/cb"
    const app = (await call(agent, base, "POST", "/api/apps", { name: "bench", redirect_uris: [redirectUri] }, {
      authorization: `Bearer ${tokens[0]}`
    })).body
    await call(agent, base, "POST", `/api/apps/${app.id}/meters`, { event_name: "bench.call", credits_per_use: 0.01 }, {
      authorization: `Bearer ${tokens[0]}`
    })
    const accessTokens = await Promise.all(tokens.map(async (token) => {
      const verifier = Crypto.randomBytes(32).toString("base64url")
      const challenge = Crypto.createHash("sha256").update(verifier).digest("base64url")
      const consent = await call(agent, base, "POST", "/oauth/authorize", new URLSearchParams({
        response_type: "code", client_id: app.client_id, redirect_uri: redirectUri, scope: "events", state: "s",
        code_challenge: challenge, code_challenge_method: "S256", decision: "approve"
      }).toString(), { authorization: `Bearer ${token}`, "content-type": "application/x-www-form-urlencoded" })
      const code = new URL(consent.headers.location!).searchParams.get("code")!
      const exchanged = await call(agent, base, "POST", "/oauth/token", new URLSearchParams({
        grant_type: "authorization_code", code, redirect_uri: redirectUri, code_verifier: verifier,
        client_id: app.client_id, client_secret: app.client_secret
      }).toString(), { "content-type": "application/x-www-form-urlencoded" })
      return exchanged.body.access_token as string
    }))
    await Promise.all(userIds.map((id) =>
      call(agent, base, "POST", `/internal/wallets/${id}/grants`, { amount: 1_000_000, idempotency_key: `seed-${id}`, reason: "bench" }, {
        authorization: `Bearer ${BENCH_INTERNAL_TOKEN}`
      })
    ))

    // The load itself goes through an undici Pool of CONCURRENCY keep-alive connections: about half the client CPU
    // of node:http with an Agent, which shares the two cores with the server (undici comes with
    // @effect/platform-node).
    const loadPool = new Pool(base, { connections: CONCURRENCY, pipelining: 1 })
    const post = (path: string, body: unknown, authorization?: string) =>
      loadPool.request({
        path,
        method: "POST",
        headers: { "content-type": "application/json", ...(authorization ? { authorization } : {}) },
        body: JSON.stringify(body)
      }).then(async (r) => {
        const text = await r.body.text()
        return r.statusCode === 200 && text.startsWith("{")
      }, () => false)
    const event = (accessToken: string, key: string) =>
      post("/v1/events", { event: "bench.call", idempotency_key: key }, `Bearer ${accessToken}`)

    // Transactions committed in the bench database (the platform's and the baseline's), read from the statistics.
    const stats = new pg.Client({ connectionString: db.url })
    await stats.connect()
    const probe: Probe = {
      serverPid: child.pid,
      commits: async () => {
        await stats.query("SELECT pg_stat_clear_snapshot()")
        const rows = await stats.query("SELECT xact_commit::text FROM pg_stat_database WHERE datname = current_database()")
        return Number(rows.rows[0].xact_commit)
      }
    }

    // Warm up the JIT, the pools and the wallet entities.
    await load("warm-up", probe, (w, i) => event(accessTokens[w % USERS]!, `warm-${w}-${i}`)).catch(() => undefined)
    results.length = 0
    if (PHASES.has("floor")) {
      // Not a charge: the cheapest route of the same server (no auth, no database), the HTTP stack's own cost.
      results.push(await load("reference: GET /v1/meters (no auth, no database)", probe, () =>
        loadPool.request({ path: "/v1/meters", method: "GET" }).then(async (r) => {
          await r.body.text()
          return r.statusCode === 200
        }, () => false)))
    }
    if (PHASES.has("hot")) {
      results.push(await load("POST /v1/events, one hot wallet", probe, (w, i) => event(accessTokens[0]!, `hot-${w}-${i}`)))
    }
    if (PHASES.has("many")) {
      results.push(await load(`POST /v1/events, ${USERS} wallets`, probe, (w, i) => event(accessTokens[w % USERS]!, `many-${w}-${i}`)))
    }

    // The naive baseline on the same database: each charge its own transaction on a row lock.
    const pool = new pg.Pool({ connectionString: db.url, max: CONCURRENCY })
    await pool.query(`CREATE TABLE naive_wallets (user_id text PRIMARY KEY, balance bigint NOT NULL CHECK (balance >= 0))`)
    await pool.query(`CREATE TABLE naive_ledger (key text PRIMARY KEY, user_id text NOT NULL, amount bigint NOT NULL, created_at timestamptz NOT NULL DEFAULT now())`)
    await pool.query(`INSERT INTO naive_wallets SELECT 'u' || g, 1000000000000 FROM generate_series(0, ${USERS - 1}) g`)
    const naive = async (user: string, key: string) => {
      const client = await pool.connect()
      try {
        await client.query("BEGIN")
        const updated = await client.query(
          "UPDATE naive_wallets SET balance = balance - 10000 WHERE user_id = $1 AND balance >= 10000 RETURNING balance",
          [user]
        )
        if (updated.rowCount !== 1) {
          await client.query("ROLLBACK")
          return false
        }
        await client.query("INSERT INTO naive_ledger (key, user_id, amount) VALUES ($1, $2, -10000)", [key, user])
        await client.query("COMMIT")
        return true
      } catch {
        await client.query("ROLLBACK").catch(() => undefined)
        return false
      } finally {
        client.release()
      }
    }
    if (PHASES.has("naive-hot")) {
      results.push(await load("naive baseline, one hot wallet (direct SQL, no HTTP)", probe, (w, i) => naive("u0", `hot-${w}-${i}`)))
    }
    if (PHASES.has("naive-many")) {
      results.push(await load(`naive baseline, ${USERS} wallets (direct SQL, no HTTP)`, probe, (w, i) => naive(`u${w % USERS}`, `many-${w}-${i}`)))
    }
    await pool.end()
    await stats.end()
    await loadPool.close()
  } finally {
    agent.destroy()
    await platform.stop()
  }

  const rate = (r: Result) => r.ok / r.seconds
  console.log(`\n${SECONDS} s per run, ${CONCURRENCY} concurrent connections, PostgreSQL fsync=on, synchronous_commit=on\n`)
  console.log(`load average at the start: ${startLoad.map((l) => l.toFixed(2)).join(" ")}; CPU = cores busy (of ${Os.cpus().length})\n`)
  console.log(
    "| run | charges/s | p50 ms | p99 ms | failed | load avg | server CPU | server CPU ms/req | bench CPU | machine CPU | commits/s |"
  )
  console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
  for (const r of results) {
    const perRequest = r.name.startsWith("naive") ? "-" : (r.serverCpu * 1000 / rate(r)).toFixed(3)
    console.log(
      `| ${r.name} | ${rate(r).toFixed(0)} | ${r.p50.toFixed(1)} | ${r.p99.toFixed(1)} | ${r.failed} | ${r.load.toFixed(2)} | ` +
        `${r.serverCpu.toFixed(2)} | ${perRequest} | ${r.benchCpu.toFixed(2)} | ${r.machineCpu.toFixed(2)} | ${r.commits.toFixed(0)} |`
    )
  }
  const hot = results.find((r) => r.name.includes("events, one hot"))
  const naiveHot = results.find((r) => r.name.includes("naive baseline, one hot"))
  if (hot && naiveHot) console.log(`\nhot wallet vs naive hot baseline: ${(rate(hot) / rate(naiveHot)).toFixed(2)}x`)
  writeJson(JSON_FILE, {
    seconds: SECONDS,
    concurrency: CONCURRENCY,
    users: USERS,
    loadStart: startLoad,
    loadEnd: Os.loadavg(),
    // serverCpu, benchCpu, machineCpu: cores busy; commits: per second; p50, p99 in ms.
    results: results.map((r) => ({ ...r, rate: rate(r) })),
    hotVsNaive: hot && naiveHot ? rate(hot) / rate(naiveHot) : null
  })
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
