/**
 * What one run and one session turn do, counted in the server (issue 28): fibers started, Effect ops evaluated
 * (the fiber run loop's steps), socket writes by peer (HTTP writes and `writev`s, PostgreSQL and Redis sends, the
 * round trips' upper bound) and CPU, per run, over `--runs` runs at `--concurrency` after a warm-up. The counts come
 * from `bench/probe.mjs`, preloaded into the platform with `--import` (it patches Effect's fiber run loop and
 * `net.Socket`, so its CPU numbers are not the platform's: read CPU from bench/runs.ts).
 *
 *   npm run build && DATABASE_URL=postgres://postgres@127.0.0.1:5432/test REDIS_URL=redis://127.0.0.1:6379 \
 *     npx tsx bench/count-run.ts [--runs 300] [--concurrency 10] [--users 10]
 *
 * PROBE_OPS=1 adds the ops by span, PROBE_FIBERS=1 the fibers by where they start, PROBE_TRACE=1 the last HTTP writes
 * (bench/probe.mjs), PROBE_SQL=1 the statements sent to PostgreSQL per run by their text. It prints one JSON line per phase (runs, turns, then hot-wallet charges: `POST /v1/events` with
 * an OAuth access token on one wallet, as bench/billing.ts's hot phase): counts per run, turn or charge.
 * `--phases run,turn,charge` picks the phases.
 */
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Path from "node:path"
import { call, launchBenchPlatform, streamRun } from "./support.js"

const args = new Map<string, string>()
for (let i = 2; i < process.argv.length; i += 2) args.set(process.argv[i]!.replace(/^--/, ""), process.argv[i + 1]!)
const RUNS = Number(args.get("runs") ?? 300)
const CONCURRENCY = Number(args.get("concurrency") ?? 10)
const USERS = Number(args.get("users") ?? 10)
const SERVICES = process.env.DATABASE_URL !== undefined
const OUT = `/tmp/count-run-${process.pid}.json`
const PHASES = new Set((args.get("phases") ?? "run,turn,charge").split(","))

const agent = new Http.Agent({ keepAlive: true, maxSockets: CONCURRENCY + 10 })

interface Counts {
  readonly ops: number
  readonly fibers: number
  readonly writes: Record<string, number>
  readonly writev: Record<string, number>
  readonly responseWrites?: number
  readonly opsBySpan: Record<string, number>
  readonly cpu: { user: number; system: number }
}

const snapshot = async (pid: number): Promise<Counts> => {
  Fs.rmSync(OUT, { force: true })
  process.kill(pid, "SIGUSR2")
  for (let i = 0; i < 100 && !Fs.existsSync(OUT); i++) await new Promise((r) => setTimeout(r, 20))
  return JSON.parse(Fs.readFileSync(OUT, "utf8"))
}

const perRun = (a: Counts, b: Counts, n: number) => {
  const keyed = (x: Record<string, number>, y: Record<string, number>) =>
    Object.fromEntries([...new Set([...Object.keys(x), ...Object.keys(y)])].map((k) => [k, ((y[k] ?? 0) - (x[k] ?? 0)) / n]))
  return {
    fibers: (b.fibers - a.fibers) / n,
    ops: (b.ops - a.ops) / n,
    writes: keyed(a.writes, b.writes),
    writev: keyed(a.writev, b.writev),
    responseWrites: ((b.responseWrites ?? 0) - (a.responseWrites ?? 0)) / n,
    opsBySpan: Object.fromEntries(Object.entries(keyed(a.opsBySpan, b.opsBySpan)).filter(([, n]) => n >= 1).sort((x, y) => y[1] - x[1])),
    cpuMs: (b.cpu.user + b.cpu.system - a.cpu.user - a.cpu.system) / 1000 / n
  }
}

const pool = async (n: number, concurrency: number, once: (i: number) => Promise<boolean>) => {
  let next = 0
  let failed = 0
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < n) if (!(await once(next++))) failed++
  }))
  return failed
}

const main = async () => {
  const phones = Array.from({ length: USERS }, (_, i) => `+1555${String(3_000_000 + i).padStart(7, "0")}`)
  const platform = await launchBenchPlatform({
    env: { SMS_TEST_OTP: phones.map((p) => `${p}=123456`).join(","), SIGNUP_CREDITS: "1000000", PROBE_OUT: OUT, PROBE_FIBERS: process.env.PROBE_FIBERS ?? "0", PROBE_OPS: process.env.PROBE_OPS ?? "0", PROBE_TRACE: process.env.PROBE_TRACE ?? "0", PROBE_SITES: process.env.PROBE_SITES ?? "0", PROBE_SQL: process.env.PROBE_SQL ?? "0" },
    nodeArgs: ["--import", Path.resolve(import.meta.dirname, "probe.mjs")],
    ...(SERVICES ? { services: { adminUrl: process.env.DATABASE_URL!, redisUrl: process.env.REDIS_URL ?? "redis://127.0.0.1:6379" } } : {})
  })
  const { base, child } = platform
  try {
    const users = await Promise.all(phones.map(async (phone, i) => {
      const token = (await call(agent, base, "POST", "/api/auth/login", { phone, code: "123456" })).body.token as string
      const created = await call(agent, base, "POST", "/v1/agents", { name: `Count ${i}`, instructions: "Answer briefly." }, {
        authorization: `Bearer ${token}`
      })
      const session = await call(agent, base, "POST", "/v1/sessions", { agent: created.body.identifier, title: `count ${i}` }, {
        authorization: `Bearer ${token}`
      })
      return { token, agent: created.body.identifier as string, session: session.body.id as string }
    }))
    const run = async (i: number) => {
      const user = users[i % users.length]!
      return (await streamRun(agent, base, "/v1/agents/run", { authorization: `Bearer ${user.token}` }, {
        agent: user.agent,
        message: "hello there, world of agents"
      })).ok
    }
    // A turn's stream is read to its end; ok when it ends with [DONE] (one turn per session at a time: a worker per user).
    const turn = (i: number) =>
      new Promise<boolean>((resolve) => {
        const user = users[i % users.length]!
        const payload = JSON.stringify({ type: "message", message: "hello" })
        const request = Http.request(new URL(`/v1/sessions/${user.session}/events`, base), {
          method: "POST",
          agent,
          headers: { authorization: `Bearer ${user.token}`, "content-type": "application/json", "content-length": Buffer.byteLength(payload) }
        }, (response) => {
          let text = ""
          response.setEncoding("utf8")
          response.on("data", (chunk: string) => void (text += chunk))
          response.on("end", () => resolve(response.statusCode === 200 && text.endsWith("data: [DONE]\n\n")))
          response.on("error", () => resolve(false))
        })
        request.on("error", () => resolve(false))
        request.end(payload)
      })
    const measure = async (name: string, once: (i: number) => Promise<boolean>, concurrency: number) => {
      await pool(Math.max(50, RUNS / 3), concurrency, once)
      const a = await snapshot(child.pid!)
      const failed = await pool(RUNS, concurrency, once)
      const sitesA = Fs.existsSync(`${OUT}.sites`) ? new Map<string, number>(JSON.parse(Fs.readFileSync(`${OUT}.sites`, "utf8"))) : undefined
      const sqlA = Fs.existsSync(`${OUT}.sql`) ? new Map<string, number>(JSON.parse(Fs.readFileSync(`${OUT}.sql`, "utf8"))) : undefined
      const fibersA = Fs.existsSync(`${OUT}.fibers`) ? new Map<string, number>(JSON.parse(Fs.readFileSync(`${OUT}.fibers`, "utf8"))) : undefined
      const b = await snapshot(child.pid!)
      if (process.env.PROBE_TRACE === "1") console.log(Fs.readFileSync(`${OUT}.trace`, "utf8").split("\n").slice(-12).join("\n"))
      console.log(JSON.stringify({ name, runs: RUNS, failed, ...perRun(a, b, RUNS) }))
      if (sitesA !== undefined) {
        await new Promise((r) => setTimeout(r, 200))
        const sitesB: Array<[string, number]> = JSON.parse(Fs.readFileSync(`${OUT}.sites`, "utf8"))
        for (const [site, n] of sitesB.map(([k, n]): [string, number] => [k, (n - (sitesA.get(k) ?? 0)) / RUNS]).filter(([, n]) => n >= 0.05).sort((x, y) => y[1] - x[1])) {
          console.log(`  ${n.toFixed(2)} ${site}`)
        }
      }
      if (sqlA !== undefined) {
        const sqlB: Array<[string, number]> = JSON.parse(Fs.readFileSync(`${OUT}.sql`, "utf8"))
        for (const [text, n] of sqlB.map(([k, n]): [string, number] => [k, (n - (sqlA.get(k) ?? 0)) / RUNS]).filter(([, n]) => n >= 0.05).sort((x, y) => y[1] - x[1])) {
          console.log(`  ${n.toFixed(2)} ${text.slice(0, 400)}`)
        }
      }
      if (fibersA !== undefined) {
        await new Promise((r) => setTimeout(r, 200))
        const fibersB: Array<[string, number]> = JSON.parse(Fs.readFileSync(`${OUT}.fibers`, "utf8"))
        for (const [site, n] of fibersB.map(([k, n]): [string, number] => [k, (n - (fibersA.get(k) ?? 0)) / RUNS]).filter(([, n]) => n >= 0.05).sort((x, y) => y[1] - x[1])) {
          console.log(`  ${n.toFixed(2)} ${site}`)
        }
      }
    }
    // The hot wallet: an app with a meter, authorized by the first user, whose wallet every event charges.
    const charge = async () => {
      const redirectUri = "http://127.0.0.1:9/cb"
      const owner = `Bearer ${users[0]!.token}`
      const app = (await call(agent, base, "POST", "/api/apps", { name: "count", redirect_uris: [redirectUri] }, { authorization: owner })).body
      await call(agent, base, "POST", `/api/apps/${app.id}/meters`, { event_name: "count.call", credits_per_use: 0.01 }, { authorization: owner })
      const verifier = Crypto.randomBytes(32).toString("base64url")
      const challenge = Crypto.createHash("sha256").update(verifier).digest("base64url")
      const consent = await call(agent, base, "POST", "/oauth/authorize", new URLSearchParams({
        response_type: "code", client_id: app.client_id, redirect_uri: redirectUri, scope: "events", state: "s",
        code_challenge: challenge, code_challenge_method: "S256", decision: "approve"
      }).toString(), { authorization: owner, "content-type": "application/x-www-form-urlencoded" })
      const code = new URL(consent.headers.location!).searchParams.get("code")!
      const accessToken = (await call(agent, base, "POST", "/oauth/token", new URLSearchParams({
        grant_type: "authorization_code", code, redirect_uri: redirectUri, code_verifier: verifier,
        client_id: app.client_id, client_secret: app.client_secret
      }).toString(), { "content-type": "application/x-www-form-urlencoded" })).body.access_token as string
      let n = 0
      return async () => {
        const answer = await call(agent, base, "POST", "/v1/events", { event: "count.call", idempotency_key: `count-${n++}` }, {
          authorization: `Bearer ${accessToken}`
        })
        return answer.status === 200
      }
    }
    if (PHASES.has("run")) await measure("run", run, CONCURRENCY)
    if (PHASES.has("turn")) await measure("turn", turn, Math.min(CONCURRENCY, USERS))
    if (PHASES.has("charge")) await measure("charge", await charge(), CONCURRENCY)
  } finally {
    agent.destroy()
    await platform.stop()
  }
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
