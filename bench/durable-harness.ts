/**
 * The durable-runs harness (issue 43 item 6, docs/runs.md "The durable bench"), shared by the bench
 * (`bench/durable.ts`, any size) and its short form in CI (`test/cluster/durable.test.ts`): runners from `dist/` over a
 * PostgreSQL database and a Redis database of their own, background runs of every kind (multi-step with a tool, slow
 * single steps, tool calls waiting on approvals answered later, some denied, some cancelled), schedules firing every
 * minute, and a webhook receiver that fails a fifth of the deliveries. Meanwhile it injects faults, one after the
 * other, spread over the submissions (`faults`, in their order):
 *
 *   kill      kill -9 of the busiest runner (most shard locks), started again unless told otherwise
 *   stop      SIGSTOP of the busiest runner for `pauseSeconds` (20), then SIGCONT
 *   postgres  a PostgreSQL restart (`pg_ctl restart -m fast`: every connection cut)
 *   redis     a Redis restart (killed, started empty on the same port)
 *
 * The PostgreSQL and Redis faults need a PostgreSQL and a Redis of the harness's own (test/support/Services.ts, as
 * the fault checker's): the machine's shared 5432 and 6379 are never restarted. Without those faults the harness
 * makes its database on `adminUrl`'s server and takes a database number of `redisUrl`, unless `ownServices`.
 * A fault clears when what it broke is back (the killed runner answers again, or the survivors hold every shard when
 * it is not started again; SIGCONT; the restart returned); the next fault comes once the cluster holds every shard
 * again. Then it checks, and reports every failure:
 *
 * - every run is terminal within `settleSeconds` of the last fault clearing (none `queued` or `in_progress`);
 * - no step billed twice: one ledger entry per key, each run's `credits_charged` equal to its entries' sum, and at
 *   most one entry per model step (`<run>:<n>`, n ≤ the run's steps);
 * - every approved call ran, every denied one was told denied; every cancel honoured (`cancelled`);
 * - every terminal event delivered at least once (the bench's runs and the firings' runs), with one `webhook-id` per
 *   event (the receiver verifies each signature with `standardwebhooks`);
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
import { Effect, Exit, Scope } from "effect"
import pg from "pg"
import { Webhook } from "standardwebhooks"
import { type OwnPostgres, ownPostgres, type OwnRedis, ownRedis, servicesAvailable } from "../test/support/Services.js"
import { call, createBenchDatabase, freePort, platformNodeArgs } from "./support.js"

/** The faults the harness can inject (see above). */
export const DURABLE_FAULTS = ["kill", "stop", "postgres", "redis"] as const
export type DurableFault = (typeof DURABLE_FAULTS)[number]

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
  /** The faults, in their order (kill -9 alone unless said); each at most once. */
  readonly faults?: ReadonlyArray<DurableFault> | undefined
  /** How long a stopped runner stays stopped (20 s). */
  readonly pauseSeconds?: number | undefined
  /**
   * Start a PostgreSQL and a Redis of the harness's own (forced by the `postgres` and `redis` faults); `adminUrl` and
   * `redisUrl` are then not used.
   */
  readonly ownServices?: boolean | undefined
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
  /** Each fault injected, when (seconds from the start), and how long until it cleared and the cluster settled again. */
  readonly faults: ReadonlyArray<{ readonly fault: DurableFault; readonly at: number; readonly clearedAfter: number; readonly settledAfter: number }>
  /** Seconds from the last fault clearing until every run was terminal. */
  readonly terminalAfter: number
}

const USERS = 4
const CODE = "123456"
const INTERNAL_TOKEN = "durable-bench-internal-token-0123456789"
const FAIL_RATE = 0.2
const TERMINAL_SQL = "('completed', 'failed', 'cancelled', 'incomplete')"

interface OwnServices {
  readonly postgres: OwnPostgres
  readonly redis: OwnRedis
}

/**
 * Runs the harness; with the `postgres` or `redis` fault (or `ownServices`) over a PostgreSQL and a Redis started for
 * it, stopped at the end (left running when `keepDatabase` asks to read the database afterwards).
 */
export const runDurable = async (options: DurableOptions = {}): Promise<DurableReport> => {
  const faults = options.faults ?? ["kill"]
  if (!(options.ownServices === true || faults.includes("postgres") || faults.includes("redis"))) return runWith(options, undefined)
  if (!servicesAvailable) {
    throw new Error("the postgres and redis faults need PostgreSQL's binaries (initdb, pg_ctl) and redis-server, to start services of the bench's own")
  }
  const scope = Effect.runSync(Scope.make())
  let keep = false
  // Interrupted (Ctrl-C), the services go too: PostgreSQL is a daemon of its own, which nothing else would stop.
  const interrupted = () => void Effect.runPromise(Scope.close(scope, Exit.void)).finally(() => process.exit(130))
  process.once("SIGINT", interrupted)
  process.once("SIGTERM", interrupted)
  try {
    const services = await Effect.runPromise(Scope.extend(Effect.all({ postgres: ownPostgres, redis: ownRedis }, { concurrency: 2 }), scope))
    keep = options.keepDatabase === true
    return await runWith(options, services)
  } finally {
    process.off("SIGINT", interrupted)
    process.off("SIGTERM", interrupted)
    if (!keep) await Effect.runPromise(Scope.close(scope, Exit.void))
  }
}

/** Connection errors worth waiting out (the bench's own reads during a PostgreSQL restart), by code or message. */
const CONNECTION_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "EPIPE", "57P01", "57P02", "57P03", "08000", "08001", "08003", "08006"])
const isConnectionError = (error: unknown) => {
  const { code, message } = error as { code?: string; message?: string }
  return (code !== undefined && CONNECTION_CODES.has(code)) || /terminat|connection|connect ECONN|shutting down|starting up/i.test(message ?? "")
}

const runWith = async (options: DurableOptions, services: OwnServices | undefined): Promise<DurableReport> => {
  const RUNS = options.runs ?? 40
  const SCHEDULES = options.schedules ?? 3
  const MINUTES = options.minutes ?? 0
  const SETTLE_SECONDS = options.settleSeconds ?? 60
  const ADMIN_URL = services?.postgres.url ?? options.adminUrl ?? "postgres://postgres@127.0.0.1:5432/test"
  const REDIS_BASE = services?.redis.url ?? options.redisUrl ?? "redis://127.0.0.1:6379"
  const REDIS_DB = options.redisDb ?? 1 + Crypto.randomInt(15)
  const RUNNERS = Math.max(2, options.runners ?? 3)
  const RESTART = options.restartKilled ?? true
  const FAULTS: ReadonlyArray<DurableFault> = options.faults ?? ["kill"]
  const PAUSE_MS = (options.pauseSeconds ?? 20) * 1000
  for (const fault of FAULTS) if (!DURABLE_FAULTS.includes(fault)) throw new Error(`unknown fault ${fault} (${DURABLE_FAULTS.join(", ")})`)
  if (new Set(FAULTS).size !== FAULTS.length) throw new Error(`a fault named twice: ${FAULTS.join(",")}`)
  // A stop with a runner killed and not started again leaves one serving runner of two: none, when it is stopped.
  if (FAULTS.includes("kill") && FAULTS.includes("stop") && !RESTART && RUNNERS < 3) {
    throw new Error("kill (not restarted) and stop need three runners: one must serve while the other two are down")
  }

  const started = Date.now()
  const print = options.log ?? ((line: string) => console.log(line))
  const log = (line: string) => print(`[${((Date.now() - started) / 1000).toFixed(1).padStart(6)} s] ${line}`)
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
  const agent = new Http.Agent({ keepAlive: true, maxSockets: 64 })
  let submittedCount = 0
  let answeredCount = 0
  let cancelledCount = 0
  let firingCount = 0
  const faultReport: Array<DurableReport["faults"][number]> = []
  let terminalAfter = NaN

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

  const db = await (services === undefined ? createBenchDatabase(ADMIN_URL, "atrium_durable") : ownDatabase(ADMIN_URL))
  /**
   * One statement on a connection of its own; a connection error (PostgreSQL restarting) is waited out for up to a
   * minute, so the bench's own reads do not fail the bench where the runners are expected to recover.
   */
  const sql = async (text: string, params: Array<unknown> = []): Promise<Array<any>> => {
    const until = Date.now() + 60_000
    for (;;) {
      const client = new pg.Client({ connectionString: db.url })
      // A connection cut by the restart is told as an 'error' event, which unheard would end this process.
      client.on("error", () => undefined)
      try {
        await client.connect()
        return (await client.query(text, params)).rows
      } catch (error) {
        if (!isConnectionError(error) || Date.now() > until) throw error
      } finally {
        await client.end().catch(() => undefined)
      }
      await sleep(250)
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
  // Interrupted or exiting early, the runners go with the bench (they would keep their database's connections).
  const orphans = () => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
  }
  process.once("exit", orphans)
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
    /** Runners not sent to: killed and not back yet, or stopped. */
    const down = new Set<number>()
    const serving = () => runners.filter((r) => !down.has(r.index))
    const via = (i: number) => {
      const up = serving()
      return up[i % up.length]!.url
    }
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
    const runs: Array<{ id: string; kind: Kind; user: (typeof users)[number]; submittedAt: number }> = []
    let submitFailures = 0
    const submit = async (i: number) => {
      const kind = kindOf(i)
      const user = users[i % users.length]!
      const message = kind === "slow" || kind === "cancel" ? "/slow 20" : `/tool calculator {"expression":"${i} * 2"}`
      const body = { agent: kind === "approve" || kind === "deny" ? user.asks : user.tools, message, background: true }
      // A runner killed mid-request answers nothing, and PostgreSQL restarting answers 5xx: the client retries with
      // its Idempotency-Key, elsewhere, for up to a minute and a half.
      const idempotency = Crypto.randomUUID()
      const submittedAt = Date.now()
      const until = submittedAt + 90_000
      for (let attempt = 0; Date.now() < until; attempt++) {
        const reply = await call(agent, via(i + attempt), "POST", "/v1/agents/run", body, { ...user.headers, "idempotency-key": idempotency }).catch(() => undefined)
        if (reply?.status === 202) {
          runs.push({ id: reply.body.id as string, kind, user, submittedAt })
          return
        }
        await sleep(250)
      }
      submitFailures++
    }
    const spread = MINUTES > 0 ? (MINUTES * 60_000) / RUNS : 0
    const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`
    /** The busiest serving runner: the one holding most shard locks, told by its lock connection's application name. */
    const busiest = async () => {
      const rows = await sql(
        `SELECT b.address, count(*)::int AS n FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
         JOIN cluster_runner_backends b ON b.application_name = a.application_name
         WHERE l.locktype = 'advisory' AND l.granted GROUP BY b.address ORDER BY n DESC`
      )
      for (const row of rows) {
        const victim = serving().find((r) => r.runnerPort === Number(String(row.address).split(":")[1]))
        if (victim !== undefined) return { victim, shards: row.n as number }
      }
      return { victim: serving()[serving().length - 1]!, shards: 0 }
    }
    /** Runners alive at the end of the faults (a killed one not started again is not). */
    let alive = RUNNERS
    /**
     * Each fault, injected while the submissions go on: resolves once it has cleared (when that was, in
     * `faultCleared`), after which the cluster settles on every live runner before the next.
     */
    const inject = async (fault: DurableFault): Promise<number> => {
      switch (fault) {
        case "kill": {
          const { victim, shards } = await busiest()
          log(`kill -9 runner ${victim.index} (pid ${victim.child.pid}, ${shards} shards)`)
          // Requests go to the others until it is back (as a load balancer whose health check fails would send).
          down.add(victim.index)
          victim.child.kill("SIGKILL")
          if (RESTART) {
            runners[runners.indexOf(victim)] = await startRunner(victim.index)
            down.delete(victim.index)
            return Date.now()
          }
          // Not started again (the short form): the fault has cleared once the survivors hold every shard.
          alive--
          await settledOn(alive)
          return Date.now()
        }
        case "stop": {
          const { victim, shards } = await busiest()
          log(`SIGSTOP runner ${victim.index} (pid ${victim.child.pid}, ${shards} shards) for ${seconds(PAUSE_MS)}`)
          down.add(victim.index)
          victim.child.kill("SIGSTOP")
          await sleep(PAUSE_MS)
          victim.child.kill("SIGCONT")
          const woken = Date.now()
          // Sent to again once it answers (its requests taken before the stop are answered as it wakes).
          void (async () => {
            while (!(await fetch(`${victim.url}/api/health`, { signal: AbortSignal.timeout(5_000) }).then((r) => r.ok, () => false))) await sleep(200)
            down.delete(victim.index)
          })()
          return woken
        }
        case "postgres":
          log("PostgreSQL restart (pg_ctl restart -m fast)")
          await Effect.runPromise(services!.postgres.restart)
          return Date.now()
        case "redis":
          log("Redis restart (killed, started empty)")
          await Effect.runPromise(services!.redis.restart)
          return Date.now()
      }
    }
    let submittedSoFar = 0
    /** When each fault began, in order. */
    const begun: Array<number> = []
    let faultCleared = 0
    const injected: Array<{ fault: DurableFault; at: number; clearedAfter: number; settledAfter: number }> = []
    /** The runs submitted before the k-th fault (of n): k/(n+1) of them. */
    const dueAt = (k: number) => Math.floor((RUNS * (k + 1)) / (FAULTS.length + 1))
    /**
     * The faults, one at a time, each once its share of the runs is submitted and the one before has cleared and the
     * cluster settled again: each finds runs in flight (just submitted, slow, waiting on approvals answered during it).
     */
    const faulting = (async () => {
      for (const [k, fault] of FAULTS.entries()) {
        while (submittedSoFar < dueAt(k)) await sleep(100)
        const at = Date.now()
        begun.push(at)
        faultCleared = await inject(fault)
        log(`${fault}: cleared ${seconds(faultCleared - at)} after it began`)
        await settledOn(alive)
        injected.push({ fault, at: (at - started) / 1000, clearedAfter: (faultCleared - at) / 1000, settledAfter: (Date.now() - at) / 1000 })
        log(`${fault}: ${alive} runners hold every shard ${seconds(Date.now() - at)} after it began`)
      }
    })()
    // A failed fault (the cluster never settled) ends the bench; its error is the bench's failure, and the
    // submissions waiting for it to begin stop.
    let faultFailed = false
    faulting.catch(() => void (faultFailed = true))
    /**
     * In batches of eight, never across a fault's share. All at once (no `minutes`), the share after a fault is
     * submitted as soon as it began (during it), so the next fault finds those runs in flight; spread over minutes,
     * the submissions go on at their pace whatever the faults do.
     */
    const submitting = (async () => {
      const bounds = [...FAULTS.map((_, k) => dueAt(k)), RUNS]
      const paceFrom = Date.now()
      let from = 0
      for (const [k, to] of bounds.entries()) {
        if (spread === 0) {
          while (begun.length < k) {
            if (faultFailed) return await faulting
            await sleep(100)
          }
        }
        for (let i = from; i < to; i += 8) {
          await Promise.all(Array.from({ length: Math.min(8, to - i) }, (_, j) => submit(i + j)))
          submittedSoFar = Math.min(to, i + 8)
          // On a schedule (the i-th run at i × spread), so the submissions take `minutes` however long each batch
          // takes to be answered; behind it, the next batch goes at once.
          if (spread > 0) await sleep(Math.max(0, paceFrom + (i + 8) * spread - Date.now()))
        }
        from = to
      }
    })()

    // Cancels (as soon as their run is submitted) and approvals (answered late: once a fault began after the run was
    // submitted, during it, through whichever runner serves; after the last fault, at once).
    const answered = new Set<string>()
    const cancelled = new Set<string>()
    const answering = (async () => {
      /** Approval runs that ended unanswered by this loop (an answer whose reply was lost, then the run's end). */
      const endedUnanswered = new Set<string>()
      const asking = () => runs.filter((r) => r.kind === "approve" || r.kind === "deny")
      while (runs.length + submitFailures < RUNS || answered.size + endedUnanswered.size + cancelled.size < asking().length + runs.filter((r) => r.kind === "cancel").length) {
        for (const run of runs.filter((r) => r.kind === "cancel" && !cancelled.has(r.id))) {
          const reply = await call(agent, via(cancelled.size), "POST", `/v1/runs/${run.id}/cancel`, undefined, run.user.headers).catch(() => undefined)
          if (reply?.status === 200) cancelled.add(run.id)
        }
        {
          const waiting = await sql(`SELECT id, run_id, answer IS NOT NULL AS done FROM pending_approvals WHERE run_id IS NOT NULL`)
          for (const row of waiting) {
            const run = runs.find((r) => r.id === row.run_id)
            if (run === undefined || answered.has(run.id)) continue
            if (begun.length < FAULTS.length && !begun.some((at) => at > run.submittedAt)) continue
            // Answered by an earlier request whose reply was lost (a runner killed or PostgreSQL restarting meanwhile).
            if (row.done === true) {
              answered.add(run.id)
              continue
            }
            const decision = run.kind === "approve" ? { decision: "approve" } : { decision: "deny", reason: "bench says no" }
            const reply = await call(agent, via(answered.size), "POST", `/v1/approvals/${row.id}`, decision, run.user.headers).catch(() => undefined)
            if (reply?.status === 200) answered.add(run.id)
          }
          const open = asking().filter((r) => !answered.has(r.id) && !endedUnanswered.has(r.id)).map((r) => r.id)
          const ended = open.length === 0 ? [] : await sql(`SELECT id FROM runs WHERE id = ANY($1) AND status IN ${TERMINAL_SQL}`, [open])
          for (const row of ended) endedUnanswered.add(row.id as string)
        }
        await sleep(500)
        if (Date.now() - started > (MINUTES * 60 + SETTLE_SECONDS + 180 + FAULTS.length * 60) * 1000) break
      }
    })()
    await submitting
    submittedCount = runs.length
    log(`${runs.length} runs submitted (${submitFailures} could not be)`)
    await answering
    answeredCount = answered.size
    cancelledCount = cancelled.size
    log(`${answered.size} approvals answered, ${cancelled.size} cancels asked`)
    await faulting
    faultReport.push(...injected)
    if (MINUTES > 0) await sleep(Math.max(0, MINUTES * 60_000 - (Date.now() - started)))

    // --- every run terminal within SETTLE_SECONDS of the fault clearing ---------------------------------------------
    const ids = runs.map((r) => r.id)
    const firingRuns = async () => (await sql(`SELECT run_id FROM schedule_firings WHERE run_id IS NOT NULL`)).map((r) => r.run_id as string)
    let open: Array<{ id: string; status: string }> = []
    const settleFrom = Math.max(faultCleared, Date.now())
    for (;;) {
      const all = [...ids, ...(await firingRuns())]
      open = await sql(`SELECT id, status FROM runs WHERE id = ANY($1) AND status NOT IN ${TERMINAL_SQL}`, [all])
      if (open.length === 0 || Date.now() - settleFrom > SETTLE_SECONDS * 1000) break
      await sleep(500)
    }
    // From the last fault's clearing, or the last submission when the submissions went on after it (the full form).
    terminalAfter = (Date.now() - settleFrom) / 1000
    const afterFault = faultCleared === 0 ? "" : ` (${seconds(Date.now() - faultCleared)} after the last fault cleared)`
    check(open.length === 0, `${open.length} runs not terminal ${SETTLE_SECONDS} s after the last fault cleared and the last submission: ${JSON.stringify(open.slice(0, 5))}`)
    check(submitFailures === 0, `${submitFailures} runs could not be submitted`)
    if (open.length === 0) log(`all runs terminal ${terminalAfter.toFixed(1)} s after the faults and the submissions ended${afterFault}`)

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
    // The bench's runs and the firings' runs: each one's end, to its owner's endpoint.
    const ended = [...ids, ...(await firingRuns())]
    const missing = () => {
      const told = new Set(delivered.map((d) => d.runId))
      return ended.filter((id) => !told.has(id))
    }
    while (missing().length > 0 && Date.now() < hookDeadline) await sleep(500)
    check(missing().length === 0, `${missing().length} runs' end never delivered: ${missing().slice(0, 5).join(", ")}`)
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
    if (options.keepDatabase === true && services !== undefined) {
      log(`PostgreSQL left running: ${db.url} (stop it with: pg_ctl -D ${services.postgres.dataDir} stop -m fast, as postgres)`)
    } else if (options.keepDatabase === true) {
      log(`database kept: ${db.url}`)
      await db.admin?.end().catch(() => undefined)
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
    firings: firingCount,
    faults: faultReport,
    terminalAfter
  }
}

/**
 * The database on a PostgreSQL of the harness's own: made with a connection that is closed at once (the server is
 * restarted by the `postgres` fault and thrown away at the end, so nothing drops it).
 */
const ownDatabase = async (adminUrl: string) => {
  const name = "atrium_durable"
  const admin = new pg.Client({ connectionString: adminUrl })
  await admin.connect()
  try {
    await admin.query(`CREATE DATABASE ${name}`)
  } finally {
    await admin.end()
  }
  const url = new URL(adminUrl)
  url.pathname = `/${name}`
  return { name, url: url.toString(), admin: undefined, drop: () => Promise.resolve() }
}
