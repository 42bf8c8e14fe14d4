/**
 * Billing throughput: POST /v1/events on ONE hot wallet and on many wallets, 64 concurrent connections, against
 * the platform in services mode (real PostgreSQL, durable commits), and in the same run the naive baseline: one
 * PostgreSQL transaction per charge (`UPDATE wallets SET balance = balance - price WHERE ... AND balance >= price`
 * plus its ledger row) on the same database.
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test REDIS_URL=redis://127.0.0.1:6379 \
 *     npx tsx bench/billing.ts [--seconds 10] [--concurrency 64] [--users 64]
 *
 * A script, not a test: it prints a Markdown table for BENCHMARKS.md and asserts nothing.
 */
import * as ChildProcess from "node:child_process"
import * as Crypto from "node:crypto"
import * as Http from "node:http"
import * as Net from "node:net"
import * as Path from "node:path"
import pg from "pg"

const args = new Map<string, string>()
for (let i = 2; i < process.argv.length; i += 2) args.set(process.argv[i]!.replace(/^--/, ""), process.argv[i + 1]!)
const SECONDS = Number(args.get("seconds") ?? 10)
const CONCURRENCY = Number(args.get("concurrency") ?? 64)
const USERS = Number(args.get("users") ?? 64)
const ADMIN_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test"
const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379"

const agent = new Http.Agent({ keepAlive: true, maxSockets: CONCURRENCY })

const call = (base: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
  new Promise<{ status: number; body: any; headers: Http.IncomingHttpHeaders }>((resolve, reject) => {
    const url = new URL(path, base)
    const payload = body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body)
    const request = Http.request(url, {
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

const freePort = () =>
  new Promise<number>((resolve) => {
    const server = Net.createServer()
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as Net.AddressInfo
      server.close(() => resolve(port))
    })
  })

const percentile = (sorted: ReadonlyArray<number>, p: number) =>
  sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!

interface Result {
  readonly name: string
  readonly ok: number
  readonly failed: number
  readonly seconds: number
  readonly p50: number
  readonly p99: number
}

/** Runs `CONCURRENCY` workers calling `once(worker, i)` until the time is up. */
const load = async (name: string, once: (worker: number, i: number) => Promise<boolean>): Promise<Result> => {
  const latencies: Array<number> = []
  let failed = 0
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
  latencies.sort((a, b) => a - b)
  return { name, ok: latencies.length, failed, seconds, p50: percentile(latencies, 50), p99: percentile(latencies, 99) }
}

const main = async () => {
  const dbName = `atrium_bench_${Crypto.randomBytes(4).toString("hex")}`
  const admin = new pg.Client({ connectionString: ADMIN_URL })
  await admin.connect()
  await admin.query(`CREATE DATABASE ${dbName}`)
  const dbUrl = new URL(ADMIN_URL)
  dbUrl.pathname = `/${dbName}`
  const port = await freePort()
  const base = `http://127.0.0.1:${port}`
  const phones = Array.from({ length: USERS }, (_, i) => `+1555${String(1_000_000 + i).padStart(7, "0")}`)
  // BENCH_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof" profiles the server under load.
  const nodeArgs = (process.env.BENCH_NODE_ARGS ?? "").split(" ").filter((a) => a.length > 0)
  const child = ChildProcess.spawn(process.execPath, [...nodeArgs, "--import", "tsx", "src/main.ts"], {
    cwd: Path.resolve(import.meta.dirname, ".."),
    env: {
      ...process.env,
      PORT: String(port),
      HOST: "127.0.0.1",
      DATABASE_URL: dbUrl.toString(),
      REDIS_URL,
      KEY_PREFIX: `bench:${dbName}:`,
      SMS_TEST_OTP: phones.map((p) => `${p}=123456`).join(","),
      SIGNUP_CREDITS: "0"
    },
    stdio: ["ignore", "inherit", "inherit"]
  })
  const results: Array<Result> = []
  try {
    for (let i = 0; ; i++) {
      if (i > 600) throw new Error("server did not start")
      const up = await call(base, "GET", "/api/health").then((r) => r.status === 200, () => false)
      if (up) break
      await new Promise((r) => setTimeout(r, 100))
    }

    // Setup over the public API: users, an app with a meter, each user authorizes it, credits for everyone.
    const tokens = await Promise.all(phones.map(async (phone) =>
      (await call(base, "POST", "/api/auth/login", { phone, code: "123456" })).body.token as string
    ))
    const userIds = tokens.map((t) => JSON.parse(Buffer.from(t.split(".")[1]!, "base64url").toString()).userId as string)
    const redirectUri = "http://127.0.0.1:9/cb"
    const app = (await call(base, "POST", "/api/apps", { name: "bench", redirect_uris: [redirectUri] }, {
      authorization: `Bearer ${tokens[0]}`
    })).body
    await call(base, "POST", `/api/apps/${app.id}/meters`, { event_name: "bench.call", credits_per_use: 0.01 }, {
      authorization: `Bearer ${tokens[0]}`
    })
    const accessTokens = await Promise.all(tokens.map(async (token) => {
      const verifier = Crypto.randomBytes(32).toString("base64url")
      const challenge = Crypto.createHash("sha256").update(verifier).digest("base64url")
      const consent = await call(base, "POST", "/oauth/authorize", new URLSearchParams({
        response_type: "code", client_id: app.client_id, redirect_uri: redirectUri, scope: "events", state: "s",
        code_challenge: challenge, code_challenge_method: "S256", decision: "approve"
      }).toString(), { authorization: `Bearer ${token}`, "content-type": "application/x-www-form-urlencoded" })
      const code = new URL(consent.headers.location!).searchParams.get("code")!
      const exchanged = await call(base, "POST", "/oauth/token", new URLSearchParams({
        grant_type: "authorization_code", code, redirect_uri: redirectUri, code_verifier: verifier,
        client_id: app.client_id, client_secret: app.client_secret
      }).toString(), { "content-type": "application/x-www-form-urlencoded" })
      return exchanged.body.access_token as string
    }))
    await Promise.all(userIds.map((id) =>
      call(base, "POST", `/internal/wallets/${id}/grants`, { amount: 1_000_000, idempotency_key: `seed-${id}`, reason: "bench" })
    ))

    const event = (accessToken: string, key: string) =>
      call(base, "POST", "/v1/events", { event: "bench.call", idempotency_key: key }, {
        authorization: `Bearer ${accessToken}`
      }).then((r) => r.status === 200, () => false)

    // Warm up the JIT, the pools and the wallet entities.
    await load("warm-up", (w, i) => event(accessTokens[w % USERS]!, `warm-${w}-${i}`)).catch(() => undefined)
    results.length = 0
    results.push(await load("POST /v1/events, one hot wallet", (w, i) => event(accessTokens[0]!, `hot-${w}-${i}`)))
    results.push(await load(`POST /v1/events, ${USERS} wallets`, (w, i) => event(accessTokens[w % USERS]!, `many-${w}-${i}`)))

    // The naive baseline on the same database: each charge its own transaction on a row lock.
    const pool = new pg.Pool({ connectionString: dbUrl.toString(), max: CONCURRENCY })
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
    results.push(await load("naive baseline, one hot wallet (direct SQL, no HTTP)", (w, i) => naive("u0", `hot-${w}-${i}`)))
    results.push(await load(`naive baseline, ${USERS} wallets (direct SQL, no HTTP)`, (w, i) => naive(`u${w % USERS}`, `many-${w}-${i}`)))
    await pool.end()
  } finally {
    child.kill("SIGTERM")
    await new Promise((r) => child.once("exit", r))
    agent.destroy()
    await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`)
    await admin.end()
  }

  const rate = (r: Result) => r.ok / r.seconds
  console.log(`\n${SECONDS} s per run, ${CONCURRENCY} concurrent connections, PostgreSQL fsync=on, synchronous_commit=on\n`)
  console.log("| run | charges/s | p50 ms | p99 ms | failed |")
  console.log("| --- | ---: | ---: | ---: | ---: |")
  for (const r of results) {
    console.log(`| ${r.name} | ${rate(r).toFixed(0)} | ${r.p50.toFixed(1)} | ${r.p99.toFixed(1)} | ${r.failed} |`)
  }
  const hot = results.find((r) => r.name.includes("events, one hot"))!
  const naiveHot = results.find((r) => r.name.includes("naive baseline, one hot"))!
  console.log(`\nhot wallet vs naive hot baseline: ${(rate(hot) / rate(naiveHot)).toFixed(2)}x`)
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
