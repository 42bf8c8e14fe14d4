import { Effect, type Scope } from "effect"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import pg from "pg"
import { freePort, launchPlatform, type PlatformProcess } from "./Process.js"
import { ownPostgres, ownRedis } from "./Services.js"

/**
 * The fault checker of issues 26 and 33, shared by `test/cluster/faults.test.ts` (short, in CI) and
 * `bench/faults.ts` (long, on demand): three runners from `dist/` over a PostgreSQL and a Redis of their own, under
 * charges, turns and held subscriptions, with faults injected between; then the invariants of issue 33 item 5.
 */

const CODE = "123456"
/** The operator's bearer for `/internal` (grants); the harness's own, so a bench need not load the test server. */
const INTERNAL_TOKEN = "faults-internal-token-0123456789abcdef"
const userIdOf = (loginToken: string): string =>
  JSON.parse(Buffer.from(loginToken.split(".")[1]!, "base64url").toString("utf8")).userId as string
const REQUEST_DEADLINE_MS = 15_000

export interface Answer {
  readonly what: string
  readonly status: number | null
  readonly retryAfter: string | null
  readonly ms: number
  readonly at: number
  /** Where it went, and for a cut or a hang what the client saw (to read after a failure). */
  readonly detail?: string
}

export interface Harness {
  readonly runners: Array<PlatformProcess>
  readonly db: (query: string, params?: Array<unknown>) => Promise<Array<any>>
  readonly services: { readonly postgres: Effect.Effect.Success<typeof ownPostgres>; readonly redis: Effect.Effect.Success<typeof ownRedis> }
  readonly env: Record<string, string>
  readonly answers: Array<Answer>
  /** Runners the load does not send to (paused, as a load balancer whose health check fails would skip them). */
  readonly paused: Set<number>
  /**
   * When each runner was paused (SIGSTOP to SIGCONT), by its URL: a request it had taken before the pause can only be
   * answered once it wakes, and a pause longer than the 15 s deadline leaves it unanswered (the client retries it with
   * its key; the ledger check below still asks each charge once).
   */
  readonly pauses: Array<{ readonly url: string; readonly from: number; to: number }>
  /** Each runner's cluster port (its address is `127.0.0.1:<port>`). */
  readonly runnerPorts: Map<PlatformProcess, number>
  /** Starts a runner (another, or one that replaces a killed one at `index`). */
  readonly startRunner: (index: number) => Effect.Effect<PlatformProcess, never, Scope.Scope>
}

/** Every request of the checker: answered within 15 s (else `null`: a hang), recorded with its status. */
export const call = async (
  answers: Array<Answer>,
  what: string,
  url: string,
  init: { method?: string; token?: string; body?: unknown; headers?: Record<string, string> } = {}
) => {
  const started = Date.now()
  const headers: Record<string, string> = { "content-type": "application/json", ...init.headers }
  if (init.token !== undefined) headers.authorization = `Bearer ${init.token}`
  try {
    const response = await fetch(url, {
      method: init.method ?? "POST",
      headers,
      signal: AbortSignal.timeout(REQUEST_DEADLINE_MS),
      ...(init.body !== undefined ? { body: JSON.stringify(init.body) } : {})
    })
    const text = await response.text()
    answers.push({ what, status: response.status, retryAfter: response.headers.get("retry-after"), ms: Date.now() - started, at: started })
    let body: any
    try {
      body = JSON.parse(text)
    } catch {}
    return { status: response.status, body, text }
  } catch (error) {
    // No answer within the deadline is a hang (`null`); a connection that broke first (its runner killed) is a cut (0).
    const hung = (error as { name?: string }).name === "TimeoutError"
    const cause = (error as { cause?: { code?: string; message?: string } }).cause
    answers.push({
      what,
      status: hung ? null : 0,
      retryAfter: null,
      ms: Date.now() - started,
      at: started,
      detail: `${url} at ${new Date(started).toISOString()}: ${cause?.code ?? ""} ${cause?.message ?? String(error)}`
    })
    return { status: hung ? null : 0, body: undefined, text: "" }
  }
}

export const makeHarness = (runnerCount = 3): Effect.Effect<Harness, never, Scope.Scope> =>
  Effect.gen(function*() {
    const [postgres, redis] = yield* Effect.all([ownPostgres, ownRedis], { concurrency: 2 })
    const dataDir = yield* Effect.acquireRelease(
      Effect.sync(() => Fs.mkdtempSync(Path.join(Os.tmpdir(), "atrium-faults-"))),
      (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
    )
    const runnerPorts = new Map<PlatformProcess, number>()
    const phones = Array.from({ length: 40 }, (_, i) => `+1555${Crypto.randomInt(1e6).toString().padStart(6, "0")}${i}`)
    const env: Record<string, string> = {
      DATABASE_URL: postgres.url,
      REDIS_URL: redis.url,
      DATA_DIR: dataDir,
      JWT_SECRET: Crypto.randomBytes(32).toString("hex"),
      SMS_TEST_OTP: phones.map((p) => `${p}=${CODE}`).join(","),
      APPROVAL_TIMEOUT: "60 seconds",
      INTERNAL_TOKEN,
      SMS_CHALLENGE_AFTER: "100000",
      FAULT_PHONES: phones.join(",")
    }
    const startRunner = (_: number) =>
      Effect.flatMap(freePort, (port) =>
        Effect.tap(launchPlatform({ ...env, RUNNER_PORT: String(port) }), (platform) => Effect.sync(() => runnerPorts.set(platform, port))))
    // The first runner applies the migrations; the others start together.
    const first = yield* startRunner(0)
    const rest = yield* Effect.all(Array.from({ length: runnerCount - 1 }, (_, i) => startRunner(i + 1)), { concurrency: "unbounded" })
    const db = async (query: string, params: Array<unknown> = []) => {
      const client = new pg.Client({ connectionString: postgres.url })
      await client.connect()
      try {
        return (await client.query(query, params)).rows
      } finally {
        await client.end()
      }
    }
    return { runners: [first, ...rest], db, services: { postgres, redis }, env, answers: [], paused: new Set<number>(), pauses: [], runnerPorts, startRunner }
  })

/** Waits until the runners hold every shard (advisory locks), as after a start or a fault. */
export const settled = (h: Harness, runners: number) =>
  Effect.promise(async () => {
    const deadline = Date.now() + 120_000
    while (Date.now() < deadline) {
      const rows = await h.db(
        `SELECT count(DISTINCT pid)::int AS runners, count(*)::int AS shards FROM pg_locks
         WHERE locktype = 'advisory' AND granted AND pid <> pg_backend_pid()`
      ).catch(() => [])
      if (rows[0]?.runners === runners && rows[0]?.shards >= 300) return
      // Polled: the runners' shard locks are seen only in pg_locks.
      await new Promise((r) => setTimeout(r, 250))
    }
    throw new Error(`the cluster did not settle on ${runners} runners`)
  })

export interface User {
  readonly token: string
  readonly apiKey: string
  readonly userId: string
}

let phoneIndex = 0
export const newUser = (h: Harness) =>
  Effect.promise(async (): Promise<User> => {
    const phone = h.env.FAULT_PHONES!.split(",")[phoneIndex++]!
    const base = h.runners[0]!.url
    const login = await call(h.answers, "setup", `${base}/api/auth/login`, { body: { phone, code: CODE } })
    if (login.status !== 200) throw new Error(`login: ${login.text}`)
    const token = login.body.token as string
    const key = await call(h.answers, "setup", `${base}/api/user/apiKey/create`, { token, body: { name: "faults" } })
    if (key.status !== 200) throw new Error(`api key: ${key.text}`)
    const userId = userIdOf(token)
    await call(h.answers, "setup", `${base}/internal/wallets/${userId}/grants`, {
      headers: { authorization: `Bearer ${INTERNAL_TOKEN}` },
      body: { amount: "100000", idempotency_key: Crypto.randomUUID(), reason: "faults" }
    })
    return { token, apiKey: key.body.key as string, userId }
  })

/** The load: charges on `payers`, turns on `sessions`, and `subscribers` held on the runners that do not send. */
export interface Load {
  readonly charges: Map<string, { payer: User; status: number | null }>
  readonly received: Array<{ session: string; runner: number; seqs: Array<number>; reconnects: number }>
  readonly turns: { sent: number; ended: number; cut: number }
  /** Stops the charges and turns, waits until the runs they started have ended, then stops the subscribers. */
  readonly stop: () => Promise<void>
}

/** Real pauses of the load's clients (a back-off after a refused call, a poll): they run against real processes. */
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** A `GET …/events` subscription that resumes with `Last-Event-ID` whenever its stream ends, until `stopped()`. */
const hold = (h: Harness, user: User, session: string, runner: number, out: Load["received"][number], stopped: () => boolean) =>
  (async () => {
    let last: number | undefined
    while (!stopped()) {
      const controller = new AbortController()
      const watchdog = setInterval(() => stopped() && controller.abort(), 200)
      try {
        const response = await fetch(`${h.runners[runner]!.url}/v1/sessions/${session}/events`, {
          headers: { authorization: `Bearer ${user.token}`, ...(last !== undefined ? { "last-event-id": String(last) } : {}) },
          signal: controller.signal
        })
        if (response.status !== 200) {
          await response.text()
          // A subscriber's back-off before it reconnects, as a real client's.
          await sleep(500)
          continue
        }
        const reader = response.body!.getReader()
        const decoder = new TextDecoder()
        let buffer = ""
        for (;;) {
          const chunk = await reader.read()
          if (chunk.done) break
          buffer += decoder.decode(chunk.value, { stream: true })
          let end: number
          while ((end = buffer.indexOf("\n\n")) >= 0) {
            const frame = buffer.slice(0, end)
            buffer = buffer.slice(end + 2)
            const id = /^id: (\d+)$/m.exec(frame)
            if (id !== null) {
              last = Number(id[1])
              out.seqs.push(last)
            }
          }
        }
      } catch {} finally {
        clearInterval(watchdog)
      }
      if (!stopped()) {
        out.reconnects++
        // A subscriber's back-off before it reconnects, as a real client's.
        await sleep(250)
      }
    }
  })()

export const startLoad = (h: Harness, payers: Array<User>, owner: User, sessions: Array<string>): Load => {
  let stopped = false
  let unsubscribed = false
  const holders: Array<Promise<void>> = []
  const charges: Load["charges"] = new Map()
  const received: Load["received"] = []
  const turns = { sent: 0, ended: 0, cut: 0 }
  const runner = (n: number) => {
    const serving = h.runners.filter((_, i) => !h.paused.has(i))
    return serving[n % serving.length]!
  }
  const workers: Array<Promise<void>> = []
  payers.forEach((payer, p) =>
    workers.push((async () => {
      for (let n = p; !stopped; n++) {
        const key = Crypto.randomUUID()
        const reply = await call(h.answers, "charge", `${runner(n).url}/openapi/credit/consume`, {
          token: payer.apiKey,
          body: { amount: "0.01", idempotency_key: key }
        })
        charges.set(key, { payer, status: reply.status })
        // A caller's back-off after a refused charge, so an outage is not a busy loop.
        if (reply.status !== 200) await sleep(200)
      }
    })())
  )
  sessions.forEach((session, s) => {
    for (let r = 1; r < h.runners.length; r++) {
      const out = { session, runner: (s + r) % h.runners.length, seqs: [] as Array<number>, reconnects: 0 }
      received.push(out)
      holders.push(hold(h, owner, session, out.runner, out, () => unsubscribed))
    }
    workers.push((async () => {
      for (let n = s; !stopped; n++) {
        turns.sent++
        const started = Date.now()
        try {
          const response = await fetch(`${runner(n).url}/v1/sessions/${session}/events`, {
            method: "POST",
            headers: { "content-type": "application/json", authorization: `Bearer ${owner.token}` },
            body: JSON.stringify({ type: "message", message: "/slow 4" }),
            signal: AbortSignal.timeout(60_000)
          })
          h.answers.push({ what: "turn", status: response.status, retryAfter: response.headers.get("retry-after"), ms: Date.now() - started, at: started })
          const text = await response.text()
          if (/event: run\.(completed|failed)/.test(text)) turns.ended++
          else turns.cut++
          // A caller's back-off after a refused or cut turn, so an outage is not a busy loop.
          if (response.status !== 200) await sleep(300)
        } catch {
          turns.cut++
          await sleep(300)
        }
      }
    })())
  })
  return {
    charges,
    received,
    turns,
    stop: async () => {
      stopped = true
      await Promise.all(workers)
      // Quiet: what was sent has ended (a turn whose send answered 503 may still have been queued), and the
      // subscribers got the last of it. A wait for a state, not a timed assertion: the checks below say what is not.
      const deadline = Date.now() + 30_000
      while (Date.now() < deadline) {
        const running = await h.db(`SELECT count(*)::int AS n FROM runs WHERE status = 'running'`).catch(() => [{ n: 1 }])
        const queued = await h.db(`SELECT count(*)::int AS n FROM session_queue`).catch(() => [{ n: 1 }])
        if (running[0].n === 0 && queued[0].n === 0) break
        await sleep(250)
      }
      // The subscribers' streams trail the database: their last events arrive after the rows ended (no event tells).
      await sleep(1_000)
      unsubscribed = true
      await Promise.all(holders)
    }
  }
}

/** Writes every runner's output to `FAULTS_LOG_DIR/runner-<i>.log` when that is set (to read after a failure). */
export const keepLogs = (h: Harness, name: string) => {
  const dir = process.env.FAULTS_LOG_DIR
  if (dir === undefined) return
  Fs.mkdirSync(dir, { recursive: true })
  h.runners.forEach((r, i) => Fs.writeFileSync(Path.join(dir, `${name}-runner-${i}.log`), r.output()))
}

/** How long after `from` every runner answers a charge and a session read again (the fault's recovery time). */
export const recovery = async (h: Harness, payer: User, owner: User, session: string) => {
  const from = Date.now()
  for (const r of h.runners.filter((_, i) => !h.paused.has(i))) {
    for (;;) {
      const charge = await call(h.answers, "probe", `${r.url}/openapi/credit/consume`, {
        token: payer.apiKey,
        body: { amount: "0.01", idempotency_key: Crypto.randomUUID() }
      })
      const read = await call(h.answers, "probe", `${r.url}/v1/sessions/${session}`, { method: "GET", token: owner.token })
      if (charge.status === 200 && read.status === 200) break
      if (Date.now() - from > 60_000) throw new Error("no recovery within 60 s")
      // Polled: a recovery is seen only as the first charge and read that go through again.
      await sleep(100)
    }
  }
  return Date.now() - from
}

/** The invariants of issue 33 item 5 after the load stopped and the cluster is quiet; an empty list when all hold. */
export const violations = async (h: Harness, load: Load, sessions: Array<string>, options: { readonly cutsAllowed?: boolean } = {}) => {
  const found: Array<string> = []
  // Every request answered within 15 s, 2xx or 503 with Retry-After (a cut only where a runner was killed).
  const heldByPause = (a: Answer) =>
    h.pauses.some((p) => a.detail?.startsWith(`${p.url}/`) === true && a.at <= p.from && a.at + REQUEST_DEADLINE_MS > p.from && p.to - p.from > REQUEST_DEADLINE_MS)
  for (const a of h.answers) {
    if (a.status === null) !heldByPause(a) && found.push(`${a.what}: no answer within 15 s (${a.detail})`)
    else if (a.status === 0) options.cutsAllowed !== true && found.push(`${a.what}: connection cut (${a.detail})`)
    else if (a.status >= 500 && !(a.status === 503 && a.retryAfter !== null)) found.push(`${a.what}: ${a.status} (Retry-After ${a.retryAfter})`)
    else if (a.status >= 300 && a.status !== 503) found.push(`${a.what}: ${a.status}`)
  }
  // Every charge whose answer was not 200 is retried with its key until it is; then each key is in the ledger once.
  for (const [key, charge] of load.charges) {
    for (let attempt = 0; charge.status !== 200 && attempt < 100; attempt++) {
      const reply = await call([], "retry", `${h.runners[0]!.url}/openapi/credit/consume`, {
        token: charge.payer.apiKey,
        body: { amount: "0.01", idempotency_key: key }
      })
      charge.status = reply.status
      // A caller's back-off after a refused charge, so an outage is not a busy loop.
      if (reply.status !== 200) await sleep(200)
    }
    if (charge.status !== 200) found.push(`charge ${key}: never answered 200`)
  }
  const keys = Array.from(load.charges.keys())
  const ledger = await h.db(
    `SELECT idempotency_key AS key, count(*)::int AS n FROM ledger_entries WHERE idempotency_key = ANY($1) GROUP BY 1`,
    [keys]
  )
  const counted = new Map(ledger.map((row) => [row.key as string, row.n as number]))
  for (const key of keys) if (counted.get(key) !== 1) found.push(`charge ${key}: ${counted.get(key) ?? 0} ledger entries`)
  const unbalanced = await h.db(
    `SELECT w.user_id FROM wallets w WHERE w.balance <> (SELECT coalesce(sum(amount), 0) FROM ledger_entries l WHERE l.user_id = w.user_id)`
  ).catch(() => [])
  for (const row of unbalanced) found.push(`wallet ${row.user_id}: balance differs from its ledger`)
  // Sessions: no seq gap, one end per ended turn, every turn ended, runs' credits as the ledger says.
  for (const session of sessions) {
    const seqs = (await h.db(`SELECT seq::int AS seq FROM session_events WHERE session_id = $1 ORDER BY seq`, [session])).map((r) => r.seq as number)
    const hole = seqs.findIndex((seq, i) => seq !== i + 1)
    if (hole >= 0) found.push(`${session}: seq ${hole + 1} missing (the log has ${seqs[hole]} there)`)
    const ends = await h.db(
      `SELECT turn, count(*) FILTER (WHERE payload->>'type' IN ('complete', 'error'))::int AS ends FROM session_events
       WHERE session_id = $1 GROUP BY turn HAVING count(*) FILTER (WHERE payload->>'type' IN ('complete', 'error')) <> 1`,
      [session]
    )
    for (const row of ends) found.push(`${session} turn ${row.turn}: ${row.ends} terminal events`)
    const credits = await h.db(
      `SELECT t.turn, r.status, r.credits_charged::text AS recorded,
         coalesce((SELECT -sum(l.amount) FROM ledger_entries l WHERE l.scope = 'run'
           AND l.idempotency_key LIKE 'session:' || t.session_id || ':' || t.turn || ':%'), 0)::text AS ledger
       FROM session_turns t JOIN runs r ON r.id = t.run_id WHERE t.session_id = $1`,
      [session]
    )
    for (const row of credits) if (row.recorded !== row.ledger) found.push(`${session} turn ${row.turn} (${row.status}): run says ${row.recorded}, ledger ${row.ledger}`)
    const max = seqs[seqs.length - 1] ?? 0
    for (const sub of load.received.filter((r) => r.session === session)) {
      const got = sub.seqs
      for (let i = 1; i < got.length; i++) {
        if (got[i] !== got[i - 1]! + 1) {
          found.push(`${session} subscriber on runner ${sub.runner}: ${got[i - 1]} then ${got[i]}`)
          break
        }
      }
      if (got.length > 0 && got[got.length - 1]! < max) found.push(`${session} subscriber on runner ${sub.runner}: ended at ${got[got.length - 1]} of ${max}`)
    }
  }
  const running = await h.db(`SELECT count(*)::int AS n FROM runs WHERE status = 'running'`)
  if (running[0]!.n !== 0) found.push(`${running[0]!.n} runs still running`)
  return found
}

/** The runner holding the most shard locks (by the pid of its lock connection's `application_name`). */
export const busiestRunner = async (h: Harness) => {
  const rows = await h.db(
    `SELECT b.address, count(*)::int AS n FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
     JOIN cluster_runner_backends b ON b.application_name = a.application_name
     WHERE l.locktype = 'advisory' AND l.granted GROUP BY b.address ORDER BY n DESC LIMIT 1`
  )
  const port = Number(rows[0]?.address.split(":")[1])
  const index = h.runners.findIndex((r) => h.runnerPorts.get(r) === port)
  return index >= 0 ? index : 0
}

/** The shard of an entity id, as `@effect/cluster` computes it (one group, 300 shards: Cluster.ts's defaults). */
export const shardOf = (entityId: string) => {
  let h = 5381
  for (let i = entityId.length; i;) h = (h * 33) ^ entityId.charCodeAt(--i)
  h = (h & 0xbfffffff) | ((h >>> 1) & 0x40000000)
  return `default:${Math.abs(h % 300) + 1}`
}

/** The cluster address (`127.0.0.1:<port>`) of runner `index`. */
export const addressOf = (h: Harness, index: number) => `127.0.0.1:${h.runnerPorts.get(h.runners[index]!)}`

/** Which runner acquired each entity's shard last (fencing's `shard_generations`): the entity's owner. */
export const ownersOf = async (h: Harness, entityIds: ReadonlyArray<string>) => {
  const rows = await h.db(`SELECT shard, runner, generation::text AS generation FROM shard_generations WHERE shard = ANY($1)`, [
    entityIds.map(shardOf)
  ])
  const byShard = new Map(rows.map((row) => [row.shard as string, { runner: row.runner as string, generation: row.generation as string }]))
  return new Map(entityIds.map((id) => [id, byShard.get(shardOf(id))]))
}

/**
 * How long from `from` until runner `index` holds no shard lock and the others hold all 300 (its shards moved), or
 * `null` past `limitMs`.
 */
export const shardsMoved = async (h: Harness, index: number, from: number, limitMs = 60_000) => {
  const address = addressOf(h, index)
  while (Date.now() - from < limitMs) {
    const rows = await h.db(
      `SELECT count(*) FILTER (WHERE b.address = $1)::int AS theirs, count(*) FILTER (WHERE b.address <> $1)::int AS others
       FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
       JOIN cluster_runner_backends b ON b.application_name = a.application_name
       WHERE l.locktype = 'advisory' AND l.granted`,
      [address]
    ).catch(() => [])
    if (rows[0]?.theirs === 0 && rows[0]?.others >= 300) return Date.now() - from
    // Polled: the hand-over of the shard locks is seen only in pg_locks.
    await sleep(50)
  }
  return null
}

/** The `p`th percentile (0-100) of `values`. */
export const percentile = (values: ReadonlyArray<number>, p: number) => {
  if (values.length === 0) return 0
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!
}

/**
 * Charges the wallets of `users` in `loops` loops through the serving runners until stopped: how wallets that are
 * not the paused runner's answer meanwhile. Answers land in `h.answers` as `what` and in the returned `latencies`.
 */
export const chargeLoop = (h: Harness, users: ReadonlyArray<User>, what: string, loops = 2) => {
  let stopped = false
  const latencies: Array<number> = []
  const statuses: Array<number | null> = []
  const done = Promise.all(Array.from({ length: loops }, async (_, l) => {
    for (let n = l; !stopped; n++) {
      const serving = h.runners.filter((_, i) => !h.paused.has(i))
      const user = users[n % users.length]!
      const started = Date.now()
      const reply = await call(h.answers, what, `${serving[n % serving.length]!.url}/openapi/credit/consume`, {
        token: user.apiKey,
        body: { amount: "0.01", idempotency_key: Crypto.randomUUID() }
      })
      latencies.push(Date.now() - started)
      statuses.push(reply.status)
      // A caller's back-off after a refused charge, so an outage is not a busy loop.
      if (reply.status !== 200) await sleep(100)
    }
  }))
  return {
    latencies,
    statuses,
    stop: async () => {
      stopped = true
      await done
    }
  }
}
