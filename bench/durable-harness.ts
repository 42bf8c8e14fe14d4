/**
 * The durable-runs harness (issue 43 item 6, docs/runs.md "The durable bench"), shared by the bench
 * (`bench/durable.ts`, any size) and its short form in CI (`test/cluster/durable.test.ts`): runners from `dist/` over a
 * PostgreSQL database and a Redis database number of their own, background runs of every kind (multi-step with a
 * tool, slow single steps, tool calls waiting on approvals answered later, some denied, some cancelled), schedules
 * firing every minute, and a webhook receiver that fails a fifth of the deliveries; midway the busiest runner is
 * killed with SIGKILL (and, unless told otherwise, started again). Then it checks, and reports every failure:
 *
 * - every run is terminal within `settleSeconds` of the fault clearing (none `queued` or `in_progress`);
 * - no step billed twice: one ledger entry per key, each run's `credits_charged` equal to its entries' sum, and at
 *   most one entry per model step (`<run>:<n>`, n ≤ the run's steps);
 * - every approved call ran, every denied one was told denied; every cancel honoured (`cancelled`);
 * - every terminal event delivered at least once, with one `webhook-id` per event (the receiver verifies each
 *   signature with `standardwebhooks`);
 * - every schedule firing ran exactly once (one firing row per time, one run per firing, each terminal).
 *
 * A script's code, not a test's: it asserts nothing itself, it returns what failed. `dist/` must be built.
 */
import * as ChildProcess from "node:child_process"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import pg from "pg"
import { Webhook } from "standardwebhooks"
import { call, createBenchDatabase, freePort, platformNodeArgs } from "./support.js"

export interface DurableOptions {
  /** Background runs submitted (40). */
  readonly runs?: number | undefined
  /** Schedules firing every minute (3). */
  readonly schedules?: number | undefined
  /** How long to keep submitting (and schedules firing); 0: everything at once (0). */
  readonly minutes?: number | undefined
  /** How long after the fault cleared every run must be terminal, and every end delivered (60). */
  readonly settleSeconds?: number | undefined
  /** The server the harness makes its database on (dropped at the end). */
  readonly adminUrl?: string | undefined
  /** The Redis whose database number the harness takes (`redisDb`, 1-15, random unless said). */
  readonly redisUrl?: string | undefined
  readonly redisDb?: number | undefined
  /** Runner processes (3); at least 2, since one is killed. */
  readonly runners?: number | undefined
  /** Whether the killed runner is started again (true); when not, the fault clears once the survivors hold its shards. */
  readonly restartKilled?: boolean | undefined
  /** Whether the runners start at once on the empty database (false: the first alone, then the others). */
  readonly startTogether?: boolean | undefined
  /** A directory for the runners' output (a temporary one otherwise). */
  readonly keepLogs?: string | undefined
  /** Keep the database after the checks (to read the runs' rows); it is dropped otherwise. */
  readonly keepDatabase?: boolean | undefined
  /** The runners' `LOG_LEVEL` (`warn`). */
  readonly logLevel?: string | undefined
  readonly log?: ((line: string) => void) | undefined
}

export interface DurableReport {
  /** Every check that failed, in words; empty when all held. */
  readonly failures: ReadonlyArray<string>
  readonly seconds: number
  /** Where the runners' output is. */
  readonly logDir: string
  readonly submitted: number
  readonly answered: number
  readonly cancelled: number
  readonly delivered: number
  readonly firings: number
}

const USERS = 4
const CODE = "123456"
const INTERNAL_TOKEN = "durable-bench-internal-token-0123456789"
const FAIL_RATE = 0.2

export const runDurable = async (options: DurableOptions = {}): Promise<DurableReport> => {
  const RUNS = options.runs ?? 40
  const SCHEDULES = options.schedules ?? 3
  const MINUTES = options.minutes ?? 0
  const SETTLE_SECONDS = options.settleSeconds ?? 60
  const ADMIN_URL = options.adminUrl ?? "postgres://postgres@127.0.0.1:5432/test"
  const REDIS_BASE = options.redisUrl ?? "redis://127.0.0.1:6379"
  const REDIS_DB = options.redisDb ?? 1 + Crypto.randomInt(15)
  const RUNNERS = Math.max(2, options.runners ?? 3)
  const RESTART = options.restartKilled ?? true

  const started = Date.now()
  const print = options.log ?? ((line: string) => console.log(line))
  const log = (line: string) => print(`[${((Date.now() - started) / 1000).toFixed(1).padStart(6)} s] ${line}`)
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
  const agent = new Http.Agent({ keepAlive: true, maxSockets: 64 })
  let submittedCount = 0
  let answeredCount = 0
  let cancelledCount = 0
  let firingCount = 0

  // --- the webhook receiver: verifies every delivery, fails a fifth of them (503) so they are retried ---------------

  interface Delivery {
    readonly webhookId: string
    readonly type: string
    readonly runId: string
    readonly status: string
  }
  const delivered: Array<Delivery> = []
  const secrets = new Map<string, string>()
  let refused = 0
  let unverified = 0
  const receiver = Http.createServer((req, res) => {
    let body = ""
    req.on("data", (chunk) => (body += chunk))
    req.on("end", () => {
      if (Math.random() < FAIL_RATE) {
        refused++
        res.writeHead(503).end("try again")
        return
      }
      const headers = Object.fromEntries(["webhook-id", "webhook-timestamp", "webhook-signature"].map((name) => [name, String(req.headers[name])]))
      const secret = secrets.get(req.url ?? "")
      try {
        const event = new Webhook(secret ?? "").verify(body, headers) as { type: string; data: { id: string; status: string } }
        delivered.push({ webhookId: headers["webhook-id"]!, type: event.type, runId: event.data.id, status: event.data.status })
        res.writeHead(200).end("ok")
      } catch {
        unverified++
        res.writeHead(400).end("bad signature")
      }
    })
  })
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve))
  const receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`

  // --- the cluster: a database and a Redis database number of its own, its runners from dist/ ----------------------

  const db = await createBenchDatabase(ADMIN_URL, "atrium_durable")
  const sql = async (text: string, params: Array<unknown> = []) => {
    const client = new pg.Client({ connectionString: db.url })
    await client.connect()
    try {
      return (await client.query(text, params)).rows
    } finally {
      await client.end()
    }
  }
  const redisUrl = new URL(REDIS_BASE)
  redisUrl.pathname = `/${REDIS_DB}`
  const dataDir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "atrium-durable-"))
  const logDir = options.keepLogs ?? Fs.mkdtempSync(Path.join(Os.tmpdir(), "atrium-durable-logs-"))
  Fs.mkdirSync(logDir, { recursive: true })
  const phones = Array.from({ length: USERS }, (_, i) => `+1555${Crypto.randomInt(1e6).toString().padStart(6, "0")}${i}`)
  const env: Record<string, string> = {
    ...(process.env as Record<string, string>),
    DATABASE_URL: db.url,
    REDIS_URL: redisUrl.toString(),
    KEY_PREFIX: `durable:${db.name}:`,
    DATA_DIR: dataDir,
    JWT_SECRET: Crypto.randomBytes(32).toString("hex"),
    SMS_TEST_OTP: phones.map((p) => `${p}=${CODE}`).join(","),
    SMS_CHALLENGE_AFTER: "100000",
    INTERNAL_TOKEN,
    LOG_LEVEL: options.logLevel ?? "warn",
    HOST: "127.0.0.1",
    // The receiver is on 127.0.0.1, which the outbound rule refuses unless named.
    TOOL_ALLOWED_HOSTS: "127.0.0.1",
    SECRETS_KEY: "durable-bench-secrets-key-0123456789abcdef",
    // Retries within the bench's time (the defaults are for the real world: 5 s doubling, polled every 2 s).
    WEBHOOK_POLL: "200 millis",
    WEBHOOK_RETRY_BASE: "500 millis",
    WEBHOOK_RETRY_MAX_DELAY: "5 seconds",
    WEBHOOK_TIMEOUT: "3 seconds",
    // Approvals are answered by the bench, late but well within these.
    APPROVAL_TIMEOUT: "30 minutes",
    BACKGROUND_RUN_DEADLINE: "2 hours"
  }

  interface Runner {
    readonly index: number
    readonly child: ChildProcess.ChildProcess
    readonly url: string
    /** Its cluster address's port (`RUNNER_PORT`): how its shard locks are told apart from the others'. */
    readonly runnerPort: number
    output: string
  }
  const main = Path.resolve(import.meta.dirname, "../dist/main.js")
  /** Every runner process started, for the clean-up (a replacement may still be starting when the bench ends). */
  const children: Array<ChildProcess.ChildProcess> = []
  const startRunner = async (index: number): Promise<Runner> => {
    const runnerPort = await freePort()
    const httpPort = await freePort()
    const child = ChildProcess.spawn(process.execPath, [...platformNodeArgs(), main], {
      cwd: Path.resolve(import.meta.dirname, ".."),
      env: { ...env, RUNNER_PORT: String(runnerPort), PORT: String(httpPort) },
      stdio: ["ignore", "pipe", "pipe"]
    })
    children.push(child)
    const runner: Runner = { index, child, url: "", runnerPort, output: "" }
    const file = Fs.createWriteStream(Path.join(logDir, `runner-${index}-${child.pid}.log`))
    const take = (chunk: Buffer) => {
      runner.output += chunk.toString()
      file.write(chunk)
    }
    child.stdout!.on("data", take)
    child.stderr!.on("data", take)
    for (let i = 0; i < 1800; i++) {
      if (child.exitCode !== null) throw new Error(`runner ${index} exited:\n${runner.output.slice(-3000)}`)
      const url = `http://127.0.0.1:${httpPort}`
      if (await fetch(`${url}/api/health`).then((r) => r.ok, () => false)) return Object.assign(runner, { url })
      await sleep(100)
    }
    throw new Error(`runner ${index} did not become healthy`)
  }
  /** Waits until `count` runners hold every shard (PostgreSQL advisory locks). */
  const settledOn = async (count: number) => {
    const deadline = Date.now() + 120_000
    while (Date.now() < deadline) {
      const [row] = await sql(
        `SELECT count(DISTINCT l.pid)::int AS runners, count(*)::int AS shards FROM pg_locks l JOIN pg_database d ON d.oid = l.database
         WHERE l.locktype = 'advisory' AND l.granted AND d.datname = $1`,
        [db.name]
      )
      if (row!.runners === count && row!.shards >= 300) return
      await sleep(250)
    }
    throw new Error(`the cluster did not settle on ${count} runners`)
  }

  const runners: Array<Runner> = []
  const failures: Array<string> = []
  const check = (ok: boolean, what: string) => {
    if (!ok) failures.push(what)
  }

  try {
    // The first one migrates the database and the others start after it, unless told to start together (they then
    // migrate it together, as the cluster tests' runners do: one start's wait instead of two).
    if (options.startTogether === true) runners.push(...(await Promise.all(Array.from({ length: RUNNERS }, (_, i) => startRunner(i)))))
    else {
      runners.push(await startRunner(0))
      runners.push(...(await Promise.all(Array.from({ length: RUNNERS - 1 }, (_, i) => startRunner(i + 1)))))
    }
    await settledOn(RUNNERS)
    log(`${RUNNERS} runners up (database ${db.name}, redis db ${REDIS_DB}, logs in ${logDir})`)

    // --- users, agents, webhook endpoints, schedules ----------------------------------------------------------------
    const via = (i: number) => runners[i % runners.length]!.url
    const users = await Promise.all(phones.map(async (phone, i) => {
      const base = via(i)
      const login = await call(agent, base, "POST", "/api/auth/login", { phone, code: CODE })
      if (login.status !== 200) throw new Error(`login: ${JSON.stringify(login.body)}`)
      const token = login.body.token as string
      const auth = { authorization: `Bearer ${token}` }
      const key = (await call(agent, base, "POST", "/api/user/apiKey/create", { name: "durable" }, auth)).body.key as string
      const userId = JSON.parse(Buffer.from(token.split(".")[1]!, "base64url").toString()).userId as string
      await call(agent, base, "POST", `/internal/wallets/${userId}/grants`, { amount: "1000000", idempotency_key: Crypto.randomUUID(), reason: "bench" }, {
        authorization: `Bearer ${INTERNAL_TOKEN}`
      })
      const agentOf = async (tools: Array<{ name: string; permission: string }>) => {
        const made = await call(agent, base, "POST", "/v1/agents", { name: `Durable ${Crypto.randomBytes(3).toString("hex")}`, instructions: "Answer.", tools }, auth)
        if (made.status !== 201) throw new Error(`agent: ${JSON.stringify(made.body)}`)
        return made.body.identifier as string
      }
      const tools = await agentOf([{ name: "calculator", permission: "allow" }])
      const asks = await agentOf([{ name: "calculator", permission: "ask" }])
      const path = `/hook/${i}`
      const hook = await call(agent, base, "POST", "/v1/webhooks", {
        url: `${receiverUrl}${path}`,
        events: ["run.completed", "run.failed", "run.cancelled", "run.incomplete"]
      }, auth)
      if (hook.status !== 201) throw new Error(`webhook: ${JSON.stringify(hook.body)}`)
      secrets.set(path, hook.body.secret as string)
      return { token, key, userId, tools, asks, headers: { authorization: `Bearer ${key}`, "x-end-user-id": "bench" } }
    }))
    const schedules: Array<string> = []
    for (let i = 0; i < SCHEDULES; i++) {
      const user = users[i % users.length]!
      const made = await call(agent, via(i), "POST", "/v1/schedules", { agent: user.tools, cron: "* * * * *", input: `/tool calculator {"expression":"${i} + 1"}` }, user.headers)
      if (made.status !== 201) throw new Error(`schedule: ${JSON.stringify(made.body)}`)
      schedules.push(made.body.id as string)
    }
    log(`${users.length} users, ${schedules.length} schedules (every minute)`)

    // --- the runs ---------------------------------------------------------------------------------------------------
    type Kind = "tool" | "slow" | "approve" | "deny" | "cancel"
    const kindOf = (i: number): Kind => (["tool", "tool", "slow", "tool", "approve", "slow", "deny", "tool", "cancel", "approve"] as const)[i % 10]!
    const runs: Array<{ id: string; kind: Kind; user: (typeof users)[number] }> = []
    let submitFailures = 0
    const submit = async (i: number) => {
      const kind = kindOf(i)
      const user = users[i % users.length]!
      const message = kind === "slow" || kind === "cancel" ? "/slow 20" : `/tool calculator {"expression":"${i} * 2"}`
      const body = { agent: kind === "approve" || kind === "deny" ? user.asks : user.tools, message, background: true }
      // A runner killed mid-request answers nothing: the client retries with its Idempotency-Key, elsewhere.
      const idempotency = Crypto.randomUUID()
      for (let attempt = 0; attempt < 20; attempt++) {
        const reply = await call(agent, via(i + attempt), "POST", "/v1/agents/run", body, { ...user.headers, "idempotency-key": idempotency }).catch(() => undefined)
        if (reply?.status === 202) {
          runs.push({ id: reply.body.id as string, kind, user })
          return
        }
        await sleep(250)
      }
      submitFailures++
    }
    const killAt = Math.floor(RUNS / 2)
    let killedAt = 0
    let faultCleared = 0
    const spread = MINUTES > 0 ? (MINUTES * 60_000) / RUNS : 0
    /**
     * Midway: the busiest runner (the one holding most shard locks, told by its lock connection's application name) is
     * killed as a crash, and started again; requests go to the others meanwhile.
     */
    const kill = async () => {
      const [busiest] = await sql(
        `SELECT b.address, count(*)::int AS n FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
         JOIN cluster_runner_backends b ON b.application_name = a.application_name
         WHERE l.locktype = 'advisory' AND l.granted GROUP BY b.address ORDER BY n DESC LIMIT 1`
      )
      const port = Number(String(busiest?.address ?? "").split(":")[1])
      const victim = runners.find((r) => r.runnerPort === port) ?? runners[1]!
      log(`kill -9 runner ${victim.index} (pid ${victim.child.pid}, ${busiest?.n ?? "?"} shards)`)
      victim.child.kill("SIGKILL")
      killedAt = Date.now()
      const at = runners.indexOf(victim)
      // Until it is back, its place in the rotation sends to a survivor.
      runners[at] = { ...runners[(at + 1) % runners.length]!, index: victim.index }
      if (RESTART) {
        void startRunner(victim.index).then((runner) => {
          runners[at] = runner
          faultCleared = Date.now()
          log(`runner ${victim.index} started again, ${((faultCleared - killedAt) / 1000).toFixed(1)} s after the kill`)
        })
      } else {
        // Not started again (the short form): the fault has cleared once the survivors hold every shard.
        void settledOn(RUNNERS - 1).then(() => {
          faultCleared = Date.now()
          log(`the survivors hold every shard, ${((faultCleared - killedAt) / 1000).toFixed(1)} s after the kill`)
        })
      }
    }
    const submitting = (async () => {
      for (let i = 0; i < RUNS; i += 8) {
        await Promise.all(Array.from({ length: Math.min(8, RUNS - i) }, (_, j) => submit(i + j)))
        if (i < killAt && i + 8 >= killAt) await kill()
        if (spread > 0) await sleep(spread * 8)
      }
    })()

    // Cancels (a second after their run started) and approvals (answered late: after the kill, whoever took them).
    const answered = new Set<string>()
    const cancelled = new Set<string>()
    const answering = (async () => {
      while (runs.length + submitFailures < RUNS || answered.size + cancelled.size < runs.filter((r) => r.kind === "approve" || r.kind === "deny" || r.kind === "cancel").length) {
        for (const run of runs.filter((r) => r.kind === "cancel" && !cancelled.has(r.id))) {
          const reply = await call(agent, via(cancelled.size), "POST", `/v1/runs/${run.id}/cancel`, undefined, run.user.headers).catch(() => undefined)
          if (reply?.status === 200) cancelled.add(run.id)
        }
        if (killedAt > 0) {
          const waiting = await sql(`SELECT id, run_id FROM pending_approvals WHERE run_id IS NOT NULL AND answer IS NULL`)
          for (const row of waiting) {
            const run = runs.find((r) => r.id === row.run_id)
            if (run === undefined || answered.has(run.id)) continue
            const decision = run.kind === "approve" ? { decision: "approve" } : { decision: "deny", reason: "bench says no" }
            const reply = await call(agent, via(answered.size), "POST", `/v1/approvals/${row.id}`, decision, run.user.headers).catch(() => undefined)
            if (reply?.status === 200) answered.add(run.id)
          }
        }
        await sleep(500)
        if (Date.now() - started > (MINUTES * 60 + SETTLE_SECONDS + 180) * 1000) break
      }
    })()
    await submitting
    submittedCount = runs.length
    log(`${runs.length} runs submitted (${submitFailures} could not be)`)
    await answering
    answeredCount = answered.size
    cancelledCount = cancelled.size
    log(`${answered.size} approvals answered, ${cancelled.size} cancels asked`)
    while (faultCleared === 0) {
      if (Date.now() - killedAt > 180_000) throw new Error("the fault never cleared (the killed runner's shards were not taken over)")
      await sleep(200)
    }
    if (MINUTES > 0) await sleep(Math.max(0, MINUTES * 60_000 - (Date.now() - started)))

    // --- every run terminal within SETTLE_SECONDS of the fault clearing ---------------------------------------------
    const ids = runs.map((r) => r.id)
    const firingRuns = async () => (await sql(`SELECT run_id FROM schedule_firings WHERE run_id IS NOT NULL`)).map((r) => r.run_id as string)
    let open: Array<{ id: string; status: string }> = []
    const settleFrom = Math.max(faultCleared, Date.now())
    for (;;) {
      const all = [...ids, ...(await firingRuns())]
      open = await sql(`SELECT id, status FROM runs WHERE id = ANY($1) AND status NOT IN ('completed', 'failed', 'cancelled', 'incomplete')`, [all])
      if (open.length === 0 || Date.now() - settleFrom > SETTLE_SECONDS * 1000) break
      await sleep(500)
    }
    const terminalAfter = (Date.now() - Math.max(faultCleared, killedAt)) / 1000
    check(open.length === 0, `${open.length} runs not terminal ${SETTLE_SECONDS} s after the fault cleared: ${JSON.stringify(open.slice(0, 5))}`)
    check(submitFailures === 0, `${submitFailures} runs could not be submitted`)
    log(`all runs terminal ${terminalAfter.toFixed(1)} s after the fault cleared`)

    // --- statuses as asked: approved calls ran, denied ones were denied, cancels honoured ----------------------------
    const rows = await sql(
      `SELECT id, status, credits_charged::text AS credits, failure_code FROM runs WHERE id = ANY($1)`,
      [ids]
    )
    const byId = new Map(rows.map((r) => [r.id as string, r]))
    const counts = new Map<string, number>()
    for (const run of runs) {
      const row = byId.get(run.id)
      const key = `${run.kind}:${row?.status}`
      counts.set(key, (counts.get(key) ?? 0) + 1)
      if (run.kind === "cancel") check(row?.status === "cancelled" || row?.status === "completed", `cancel of ${run.id} not honoured: ${row?.status}`)
      else check(row?.status === "completed", `${run.kind} run ${run.id} ended ${row?.status} (${row?.failure_code})`)
    }
    const told = async (id: string) => (await sql(`SELECT payload FROM run_events WHERE run_id = $1 ORDER BY seq`, [id])).map((r) => r.payload as Record<string, any>)
    for (const run of runs.filter((r) => r.kind === "approve" || r.kind === "deny")) {
      const events = await told(run.id)
      const types = events.map((e) => e.type)
      if (run.kind === "approve") check(types.includes("tool_call_result"), `approved ${run.id} never ran its tool: ${types.join(",")}`)
      else check(events.some((e) => e.type === "tool_denied" && e.reason === "bench says no"), `denied ${run.id} not told denied: ${types.join(",")}`)
      // One approval per call: a step cut by the kill may tell it again, under the same id (its identity).
      const asked = new Set(events.filter((e) => e.type === "Ask").map((e) => e.approval_id))
      check(asked.size === 1, `${run.id} asked under ${asked.size} approval ids`)
    }
    log(`outcomes: ${[...counts.entries()].sort().map(([k, v]) => `${k} ${v}`).join(", ")}`)

    // --- no step billed twice ---------------------------------------------------------------------------------------
    const doubled = await sql(`SELECT scope, idempotency_key, count(*)::int AS n FROM ledger_entries GROUP BY 1, 2 HAVING count(*) > 1`)
    check(doubled.length === 0, `ledger keys taken twice: ${JSON.stringify(doubled.slice(0, 5))}`)
    const entries = await sql(
      `SELECT split_part(idempotency_key, ':', 1) AS run_id, count(*)::int AS n, (-sum(amount))::text AS total, max(split_part(idempotency_key, ':', 2)::int) AS last
       FROM ledger_entries WHERE scope = 'run' AND idempotency_key LIKE 'run_%' GROUP BY 1`
    )
    const billed = new Map(entries.map((e) => [e.run_id as string, e]))
    let mismatched = 0
    for (const run of runs) {
      const row = byId.get(run.id)
      const entry = billed.get(run.id)
      const total = entry === undefined ? "0" : entry.total
      if (row !== undefined && row.credits !== total) mismatched++
      if (entry !== undefined && entry.n !== entry.last) failures.push(`${run.id}: ${entry.n} entries for ${entry.last} steps`)
    }
    check(mismatched === 0, `${mismatched} runs whose credits_charged differs from their ledger entries`)
    log(`ledger: ${entries.length} runs billed, no key twice, every run's credits equal to its entries`)

    // --- webhooks: every terminal event delivered, one webhook-id per event -----------------------------------------
    const hookDeadline = Date.now() + SETTLE_SECONDS * 1000
    const missing = () => runs.filter((run) => !delivered.some((d) => d.runId === run.id))
    while (missing().length > 0 && Date.now() < hookDeadline) await sleep(500)
    check(missing().length === 0, `${missing().length} runs' end never delivered: ${missing().slice(0, 5).map((r) => r.id).join(", ")}`)
    const idsPerEvent = new Map<string, Set<string>>()
    for (const d of delivered) {
      const event = `${d.runId}:${d.type}`
      idsPerEvent.set(event, (idsPerEvent.get(event) ?? new Set()).add(d.webhookId))
    }
    const split = [...idsPerEvent.entries()].filter(([, set]) => set.size > 1)
    check(split.length === 0, `${split.length} events delivered under several webhook-ids: ${JSON.stringify(split.slice(0, 3).map(([e, s]) => [e, [...s]]))}`)
    check(unverified === 0, `${unverified} deliveries whose signature did not verify`)
    for (const run of runs) {
      const kinds = new Set(delivered.filter((d) => d.runId === run.id).map((d) => d.type))
      check(kinds.size <= 1, `${run.id} told as ${[...kinds].join(" and ")}`)
    }
    log(`webhooks: ${delivered.length} deliveries accepted, ${refused} refused on purpose, ${idsPerEvent.size} events, none under two ids`)

    // --- schedules: each firing once, its run terminal --------------------------------------------------------------
    const firings = await sql(`SELECT schedule_id, fire_at, status, run_id FROM schedule_firings WHERE schedule_id = ANY($1)`, [schedules])
    const perRun = new Map<string, number>()
    for (const f of firings) if (f.run_id !== null) perRun.set(f.run_id, (perRun.get(f.run_id) ?? 0) + 1)
    check([...perRun.values()].every((n) => n === 1), "a run started by two firings")
    check(firings.every((f) => f.status === "started"), `firings not started: ${JSON.stringify(firings.filter((f) => f.status !== "started").slice(0, 3))}`)
    const firedRuns = await sql(`SELECT id, status FROM runs WHERE id = ANY($1)`, [[...perRun.keys()]])
    check(firedRuns.length === perRun.size, `${perRun.size - firedRuns.length} firings whose run does not exist`)
    firingCount = firings.length
    log(`schedules: ${firings.length} firings, each once, ${firedRuns.filter((r) => r.status === "completed").length} of their runs completed`)

    // --- cost of durability: the cluster's messages per run ---------------------------------------------------------
    const [messages] = await sql(`SELECT count(*)::int AS n FROM cluster_messages`)
    log(`cluster_messages: ${messages!.n} (${(messages!.n / Math.max(runs.length, 1)).toFixed(1)} per run: the start, each step's activity, the waits)`)
  } catch (error) {
    failures.push(`the bench itself failed: ${error instanceof Error ? error.stack : String(error)}`)
  } finally {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM")
    await Promise.all(children.map((child) => new Promise((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve(null) : child.once("exit", resolve)))))
    receiver.close()
    agent.destroy()
    if (options.keepDatabase === true) {
      log(`database kept: ${db.url}`)
      await db.admin.end().catch(() => undefined)
    } else await db.drop().catch(() => undefined)
    Fs.rmSync(dataDir, { recursive: true, force: true })
  }

  return {
    failures,
    seconds: (Date.now() - started) / 1000,
    logDir,
    submitted: submittedCount,
    answered: answeredCount,
    cancelled: cancelledCount,
    delivered: delivered.length,
    firings: firingCount
  }
}
