import { RunnerAddress } from "@effect/cluster"
import { Duration, Effect, HashRing, Scope } from "effect"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import pg from "pg"
import { failoverBudget } from "../../src/platform/cluster/Budget.js"
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
  /**
   * Promises seen broken while the faults ran (a recovery over 5 s, an interrupt lost in a hand-over, a run that
   * disagrees with the ledger after a fault), each saying what, where and by how much; asserted empty at the end.
   */
  readonly broken: Array<string>
  /**
   * Timing promises missed (a recovery over 5 s, other wallets' p99 over 1 s) when `FAULTS_TIMING=report`: printed,
   * not failed on (CI's form, while the 5 s bound is not yet met on its machine: docs/testing.md, "The fault
   * checker"). Unset, they are broken promises like the rest.
   */
  readonly late: Array<string>
  /** Every interrupt sent at a running turn during a fault, and how it was answered (checked again at the end). */
  readonly interrupts: Array<InterruptCase>
  /** Checks still running when their fault's step ended (an interrupt waiting out a hand-over): awaited at the end. */
  readonly pending: Array<Promise<unknown>>
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
    return { status: response.status, body, text, retryAfter: response.headers.get("retry-after") }
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
    return { status: hung ? null : 0, body: undefined, text: "", retryAfter: null }
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
    const phones = Array.from({ length: 80 }, (_, i) => `+1555${Crypto.randomInt(1e6).toString().padStart(6, "0")}${i}`)
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
    return {
      runners: [first, ...rest],
      db,
      services: { postgres, redis },
      env,
      answers: [],
      paused: new Set<number>(),
      pauses: [],
      runnerPorts,
      startRunner,
      broken: [],
      late: [],
      interrupts: [],
      pending: []
    }
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
export const newUser = (h: Harness) => Effect.promise(() => createUser(h))

/** A user with a key and 100,000 credits (one of the harness's phones). */
export const createUser = async (h: Harness): Promise<User> => {
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
}

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
  // A request the stopped runner itself had taken when it stopped hangs until it wakes (docs/operations.md: "its own
  // requests hang until it wakes"): a pause and the woken runner's catching up may outlast the client's 15 s.
  const heldByPause = (a: Answer) =>
    h.pauses.some((p) => a.detail?.startsWith(`${p.url}/`) === true && a.at <= p.from && a.at + REQUEST_DEADLINE_MS > p.from)
  // A time bound, so a timing promise: only reported under FAULTS_TIMING=report, failed otherwise (CI fails on it
  // since session 32). In a PostgreSQL stop a charge still waits out its wallet's deadline and its resends
  // after a hand-over, and was answered 503 at 15.0 s once, just past the client's 15 s (session 24).
  for (const a of h.answers) {
    if (a.status === null) {
      if (!heldByPause(a)) timing(h, `${a.what}: no answer within 15 s (${a.detail})`)
    } else if (a.status === 0) options.cutsAllowed !== true && found.push(`${a.what}: connection cut (${a.detail})`)
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
  // Sessions, every one in the database (the load's and the faults' own): no seq gap, one end per turn that logged.
  const every = (await h.db(`SELECT id FROM sessions ORDER BY id`)).map((r) => r.id as string)
  for (const session of every) {
    const seqs = (await h.db(`SELECT seq::int AS seq FROM session_events WHERE session_id = $1 ORDER BY seq`, [session])).map((r) => r.seq as number)
    const hole = seqs.findIndex((seq, i) => seq !== i + 1)
    if (hole >= 0) found.push(`${session}: seq ${hole + 1} missing (the log has ${seqs[hole]} there)`)
    const ends = await h.db(
      `SELECT turn, count(*) FILTER (WHERE payload->>'type' IN ('complete', 'error'))::int AS ends FROM session_events
       WHERE session_id = $1 GROUP BY turn HAVING count(*) FILTER (WHERE payload->>'type' IN ('complete', 'error')) <> 1`,
      [session]
    )
    for (const row of ends) found.push(`${session} turn ${row.turn}: ${row.ends} terminal events`)
  }
  // Runs: each one's status and credits as its log and the ledger say, and every one with its events.
  found.push(...(await runViolations(h)))
  // Held subscribers of the load's sessions: every event once, in order, to the end.
  for (const session of sessions) {
    const max = (await h.db(`SELECT coalesce(max(seq), 0)::int AS max FROM session_events WHERE session_id = $1`, [session]))[0]!.max as number
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
  // A turn an interrupt reached ended as interrupted (it did not go on to complete).
  for (const c of h.interrupts.filter((c) => c.outcome === "interrupted")) {
    const end = await turnEnd(h, c.session, c.turn)
    if (end?.type !== "error") found.push(`${c.what}: answered {"interrupted": true}, but turn ${c.turn} of ${c.session} ended ${end?.type ?? "never"}`)
  }
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
 * How long until every shard's lock is held by the runner the assignment gives it, or `null` past `limitMs`: the
 * assignment as every runner computes it (the healthy runners of `cluster_runners`, `HashRing.getShards` as
 * `@effect/cluster` calls it, docs/operations.md "Shard assignment"). Until then a runner that came back (or a
 * replacement) is still taking its shards over: a wallet whose lock the runner giving it up still holds is the
 * newcomer's, not a bystander's.
 */
export const assignmentHeld = async (h: Harness, limitMs = 15_000) => {
  const from = Date.now()
  while (Date.now() - from < limitMs) {
    const [runners, locks] = await Promise.all([
      // As the runners read them (`getRunners`, src/platform/cluster/Locks.ts): healthy, and beating within the shard
      // lock's expiry.
      h.db(`SELECT address FROM cluster_runners WHERE healthy AND last_heartbeat > NOW() - make_interval(secs => $1)`, [
        Duration.toSeconds(failoverBudget.lockExpiration)
      ]),
      h.db(
        `SELECT l.objid::bigint - 1000000 AS shard, b.address FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
         JOIN cluster_runner_backends b ON b.application_name = a.application_name
         WHERE l.locktype = 'advisory' AND l.granted AND l.objid::bigint BETWEEN 1000001 AND 1000300`
      )
    ]).catch(() => [[], []])
    if (runners.length > 0) {
      const ring = HashRing.make<RunnerAddress.RunnerAddress>()
      for (const { address } of runners) {
        const [host, port] = (address as string).split(":")
        HashRing.add(ring, RunnerAddress.make(host!, Number(port)), { weight: 1 })
      }
      const holders = new Map(locks.map((row) => [Number(row.shard), row.address as string]))
      const assigned = HashRing.getShards(ring, 300)!
      if (assigned.every((runner, i) => holders.get(i + 1) === `${runner.host}:${runner.port}`)) return Date.now() - from
    }
    // Polled: hand-overs are seen only in pg_locks.
    await sleep(100)
  }
  return null
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
  /** The charges over 1 s: which wallet, through which runner, when; what a missed bound names. */
  const slow: Array<{ userId: string; shard: string; via: string; at: string; ms: number; status: number | null }> = []
  const done = Promise.all(Array.from({ length: loops }, async (_, l) => {
    for (let n = l; !stopped; n++) {
      const serving = h.runners.filter((_, i) => !h.paused.has(i))
      const user = users[n % users.length]!
      const via = serving[n % serving.length]!.url
      const started = Date.now()
      const reply = await call(h.answers, what, `${via}/openapi/credit/consume`, {
        token: user.apiKey,
        body: { amount: "0.01", idempotency_key: Crypto.randomUUID() }
      })
      const ms = Date.now() - started
      latencies.push(ms)
      statuses.push(reply.status)
      if (ms > 1_000) slow.push({ userId: user.userId, shard: shardOf(user.userId), via, at: new Date(started).toISOString(), ms, status: reply.status })
      // A caller's back-off after a refused charge, so an outage is not a busy loop.
      if (reply.status !== 200) await sleep(100)
    }
  }))
  return {
    latencies,
    statuses,
    slow,
    stop: async () => {
      stopped = true
      await done
    }
  }
}

/**
 * How long after its owner's shards moved the charge in flight to the stopped owner may still wait: the watch's poll,
 * its statement and the resend, on a loaded machine. Without the cut it waits for its last try, 10 s after it left.
 */
const IN_FLIGHT_AFTER_MOVE_MS = 2_000

/** The promised bound on every recovery (docs/operations.md "The failover budget"; issue 42 item 7). */
export const RECOVERY_BOUND_MS = 5_000

/** Records `ms` for `what` and a broken promise when it is over the bound (or never came: `null`). */
export const bounded = (h: Harness, what: string, ms: number | null, bound = RECOVERY_BOUND_MS) => {
  if (ms === null) h.broken.push(`${what}: never within the checker's limit`)
  else if (ms > bound) timing(h, `${what}: ${(ms / 1000).toFixed(1)} s, over ${bound / 1000} s`)
}

/** A timing promise missed: broken, or only reported under `FAULTS_TIMING=report` (`Harness.late`). */
const timing = (h: Harness, missed: string) => (process.env.FAULTS_TIMING === "report" ? h.late : h.broken).push(missed)

/**
 * Every run against its log and the ledger, an empty list when all agree (issue 42 item 7: "after every fault a run's
 * recorded status and credits equal the ledger, and every run row has its events"):
 * - a run of a session has its events: the `preparing` event that names it (which also tells its turn);
 * - a finished run's turn has its end in the log, and the run's status says the same (`complete` is `completed`,
 *   `error` is `failed` or `cancelled`);
 * - its recorded credits are what the ledger holds for its turn (`session:<id>:<turn>:<step>`);
 * - a turn whose run was never recorded (cut right after it began) was charged nothing.
 * Runs still `running` are left to a later call (`violations` requires that none is, once the load stopped).
 */
export const runViolations = async (h: Harness): Promise<Array<string>> => {
  const found: Array<string> = []
  const rows = await h.db(
    `SELECT r.id, r.status, r.session_id, r.credits_charged::text AS recorded, p.turn,
       (SELECT e.payload->>'type' FROM session_events e WHERE e.session_id = r.session_id AND e.turn = p.turn
          AND e.payload->>'type' IN ('complete', 'error') LIMIT 1) AS ended,
       coalesce((SELECT -sum(l.amount) FROM ledger_entries l WHERE l.scope = 'run'
          AND l.idempotency_key LIKE 'session:' || r.session_id || ':' || p.turn || ':%'), 0)::text AS ledger
     FROM runs r LEFT JOIN LATERAL (
       SELECT e.turn FROM session_events e WHERE e.session_id = r.session_id AND e.payload->>'type' = 'preparing'
         AND e.payload->>'run_id' = r.id LIMIT 1) p ON true
     WHERE r.session_id IS NOT NULL`
  )
  for (const row of rows) {
    const run = `run ${row.id} (session ${row.session_id}${row.turn === null ? "" : ` turn ${row.turn}`}, ${row.status})`
    if (row.turn === null) {
      found.push(`${run}: has no events in its session's log`)
      continue
    }
    if (row.status === "running") continue
    if (row.ended === null) found.push(`${run}: finished, but its turn has no end in the log`)
    else if ((row.ended === "complete") !== (row.status === "completed")) found.push(`${run}: recorded ${row.status}, the log ended it with ${row.ended}`)
    if (row.recorded !== row.ledger) found.push(`${run}: recorded ${row.recorded} credits, the ledger holds ${row.ledger}`)
  }
  const unrecorded = await h.db(
    `SELECT e.session_id, e.turn, e.payload->>'run_id' AS run,
       coalesce((SELECT -sum(l.amount) FROM ledger_entries l WHERE l.scope = 'run'
          AND l.idempotency_key LIKE 'session:' || e.session_id || ':' || e.turn || ':%'), 0)::text AS ledger
     FROM session_events e WHERE e.payload->>'type' = 'preparing'
       AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = e.payload->>'run_id')`
  )
  for (const row of unrecorded) {
    if (row.ledger !== "0") found.push(`session ${row.session_id} turn ${row.turn}: run ${row.run} never recorded, the ledger holds ${row.ledger}`)
  }
  // A background run keeps its events in `run_events` (none in this load; checked all the same).
  const silent = await h.db(
    `SELECT r.id FROM runs r WHERE r.background AND r.status NOT IN ('queued')
       AND NOT EXISTS (SELECT 1 FROM run_events e WHERE e.run_id = r.id)`
  )
  for (const row of silent) found.push(`background run ${row.id}: no events`)
  return found
}

/** The end (`complete` or `error`) of a session's turn as its log holds it, with when it was written. */
export const turnEnd = async (h: Harness, session: string, turn: number) => {
  const rows = await h.db(
    `SELECT payload->>'type' AS type, payload->>'code' AS code, (extract(epoch FROM created_at) * 1000)::float8 AS at
     FROM session_events WHERE session_id = $1 AND turn = $2 AND payload->>'type' IN ('complete', 'error')`,
    [session, turn]
  )
  return rows[0] as { type: string; code: string | null; at: number } | undefined
}

/**
 * A long turn (`/slow n`, n tenths of a second of text, charged at its end) sent through `via`. `running` answers the
 * turn's number once its first text arrived (it runs on the session's owner), or `null` when it did not start
 * within 20 s.
 */
export const longTurn = (h: Harness, token: string, via: string, session: string, n: number) => {
  let started: (turn: number | null) => void = () => {}
  const running = new Promise<number | null>((resolve) => (started = resolve))
  const limit = setTimeout(() => started(null), 20_000)
  const done = (async () => {
    try {
      const response = await fetch(`${via}/v1/sessions/${session}/events`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
        body: JSON.stringify({ type: "message", message: `/slow ${n}` }),
        signal: AbortSignal.timeout(60_000)
      })
      const reader = response.body!.getReader()
      const decoder = new TextDecoder()
      let text = ""
      let seen = false
      for (;;) {
        const chunk = await reader.read()
        if (chunk.done) break
        text += decoder.decode(chunk.value, { stream: true })
        if (!seen && text.includes("event: output.text.delta")) {
          seen = true
          const rows = await h.db(`SELECT max(turn)::int AS turn FROM session_events WHERE session_id = $1`, [session])
          started(rows[0]?.turn ?? null)
        }
      }
      return text
    } catch {
      return ""
    } finally {
      clearTimeout(limit)
      started(null)
    }
  })()
  return { running, done }
}

export interface InterruptCase {
  readonly what: string
  readonly session: string
  readonly turn: number
  /** Each answer: its status, `interrupted` when 200, and when it was sent and answered. */
  readonly answers: Array<{ status: number | null; interrupted?: boolean; sentAt: number; ms: number }>
  outcome: "interrupted" | "ended" | "undelivered" | "broken"
  /** For `{"interrupted": false}`: the turn's end as the log held it then (`complete`, or `error` with its code). */
  end?: string
}

/**
 * Interrupts the running `turn` of `session` through `via()`, as a client would: a 503 with `Retry-After` is "not
 * delivered, retry" (it waits as told, at most 2 s, and tries again, for up to 30 s). The promise (issue 42 item 7):
 * an interrupt reaches the turn wherever it runs (`{"interrupted": true}`, and the turn ends interrupted: checked by
 * `violations`), or is answered as not delivered with a retryable status; `{"interrupted": false}` only for a turn
 * that had ended when it was sent (its end is in the log, and is not a completion written after the interrupt left:
 * that turn went on and was billed while the interrupt was lost).
 */
export const interruptTurn = async (h: Harness, token: string, via: () => string, session: string, turn: number, what: string) => {
  const c: InterruptCase = { what, session, turn, answers: [], outcome: "undelivered" }
  h.interrupts.push(c)
  const from = Date.now()
  const broke = (why: string) => {
    c.outcome = "broken"
    h.broken.push(`${what}: ${why} (answers: ${JSON.stringify(c.answers.map((a) => [a.status, a.interrupted, a.ms]))})`)
  }
  while (Date.now() - from < 30_000) {
    const sentAt = Date.now()
    const runner = via()
    const reply = await call(h.answers, what, `${runner}/v1/sessions/${session}/interrupt`, { token })
    const answer = { status: reply.status, sentAt, ms: Date.now() - sentAt, ...(reply.status === 200 ? { interrupted: reply.body?.interrupted } : {}) }
    c.answers.push(answer)
    if (reply.status === 200 && reply.body?.interrupted === true) {
      c.outcome = "interrupted"
      return c
    }
    if (reply.status === 200 && reply.body?.interrupted === false) {
      const end = await turnEnd(h, session, turn)
      c.end = end === undefined ? "none" : `${end.type}${end.code === null ? "" : ` ${end.code}`}`
      if (end === undefined) broke(`answered {"interrupted": false} while turn ${turn} of ${session} was still running`)
      else if (end.type === "complete" && end.at > sentAt + 1_000) {
        broke(`answered {"interrupted": false}; turn ${turn} of ${session} went on and completed ${((end.at - sentAt) / 1000).toFixed(1)} s after the interrupt was sent`)
      } else c.outcome = "ended"
      return c
    }
    if (reply.status === 503 && reply.retryAfter !== null) {
      // Retryable: as a client honouring Retry-After (capped at 2 s, so the checker stays short).
      await sleep(Math.min(Math.max(Number(reply.retryAfter) || 1, 0.25), 2) * 1000)
      continue
    }
    // The runner it went to was stopped while it waited (the next fault): held by the pause, as any request it had
    // taken; asked again elsewhere.
    if (reply.status === null && h.pauses.some((p) => p.url === runner && p.from >= sentAt)) continue
    broke(`answered ${reply.status}`)
    return c
  }
  // Every answer was "not delivered, retry" (503 with Retry-After), as the promise allows, but for 30 s: a bound on
  // the hand-over, so a timing promise (only reported under FAULTS_TIMING=report).
  // What it cost stays checked: the turn's run, log and ledger must still agree (`violations`). Its outcome stays
  // "undelivered", as it began.
  timing(h, `${what}: no answer other than 503 within 30 s (answers: ${JSON.stringify(c.answers.map((a) => [a.status, a.interrupted, a.ms]))})`)
  return c
}

/**
 * How long from `from` until one of the probes `fire` starts every 250 ms is answered 200 (`null` past `limitMs`):
 * a client asking again and again sees the recovery at the first answer, however long earlier asks hang.
 */
export const firstAnswer = (fire: () => Promise<{ status: number | null }>, from: number, limitMs = 20_000) =>
  new Promise<number | null>((resolve) => {
    let done = false
    const tick = () => {
      if (done) return
      if (Date.now() - from > limitMs) {
        done = true
        resolve(null)
        return
      }
      void fire().then((reply) => {
        if (!done && reply.status === 200) {
          done = true
          resolve(Date.now() - from)
        }
      })
      // Polled: the next ask, as a client's retry would come.
      setTimeout(tick, 250)
    }
    tick()
  })

/** Ids among `ids` whose entity's shard runner `index` acquired last (its owner now, between hand-overs). */
export const ownedBy = async (h: Harness, index: number, ids: ReadonlyArray<string>) => {
  const owners = await ownersOf(h, ids)
  return ids.filter((id) => owners.get(id)?.runner === addressOf(h, index))
}

/** An interrupt case as the reports print it: its outcome, its turn's end, each answer's status, body and time. */
export const summary = (c: InterruptCase) => ({
  what: c.what,
  outcome: c.outcome,
  end: c.end,
  answers: c.answers.map((a) => [a.status, a.interrupted, a.ms])
})

/** The context a fault of an owner needs: who creates sessions, and pools to find (or grow) what the owner owns. */
export interface OwnerFaultContext {
  readonly owner: User
  readonly agent: string
  /** What `recovery` asks every runner once the faulted runner is back: a charge of `payer`, a read of `session`. */
  readonly payer: User
  readonly session: string
  /** Wallets to choose the probe wallet from; grown with new users until one is the faulted runner's. */
  readonly wallets: Array<User>
  /** Idle sessions (not the load's) to choose from; grown until the faulted runner owns enough of them. */
  readonly sessions: Array<string>
  /** Wallets charged by the other runners' callers during the fault: those the faulted runner does not own answer. */
  readonly bystanders: ReadonlyArray<User>
}

export interface OwnerFault {
  readonly name: string
  readonly kind: "kill" | "pause" | "split"
  /** How long the runner stays stopped (pause, split). */
  readonly pauseMs?: number
  /** Split brain: when its database sessions are ended from outside (`pg_terminate_backend`), from SIGSTOP. */
  readonly cutAfterMs?: number
}

const ownedOrMore = async <A>(h: Harness, index: number, pool: Array<A>, idOf: (a: A) => string, count: number, more: () => Promise<A>) => {
  for (let tries = 0; tries < 30; tries++) {
    const ids = await ownedBy(h, index, pool.map(idOf))
    const owned = pool.filter((a) => ids.includes(idOf(a)))
    if (owned.length >= count) return owned.slice(0, count)
    pool.push(await more())
  }
  throw new Error(`runner ${index} owns fewer than ${count} of ${pool.length} entities`)
}

/**
 * kill -9, SIGSTOP, or the split brain (SIGSTOP, its database sessions ended from outside, SIGCONT) of the busiest
 * owner, under the load, with at the moment it stops:
 * - a charge in flight to it: a wallet it owns is charged in a loop through runner B, and once more right after the
 *   stop (that charge is then outstanding to the stopped owner, behind whatever B's lane had on its way);
 * - a turn running on it (`/slow`, sent through B), interrupted through runner C right after the stop;
 * and, for a pause, a turn started on one of its sessions while it is away (it runs on the new owner), interrupted
 * just after it is back: its shards then move back to it, a hand-over in which the new owner finishes the turn.
 * Measured from the stop, each bounded at 5 s: its shards moved (its locks gone, the others hold all 300); its
 * wallet answers a charge through B; the charge in flight answered 200; a session it owns answers through C. After
 * it is back (SIGCONT, or a replacement runner after kill -9): every serving runner answers within 5 s. Then each
 * run's status and credits against its log and the ledger. Broken promises land in `h.broken`.
 */
export const faultOwner = (h: Harness, fault: OwnerFault, ctx: OwnerFaultContext) =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    // The previous fault's interrupt during the hand-over back answered first: stopped again meanwhile, the runner that
    // took its session back can only answer it 503 (not delivered, retry) until this fault ends, which would judge the
    // hand-over by this fault's pause.
    yield* Effect.promise(() => Promise.all(h.pending))
    // The previous fault's hand-overs over: which wallets are another runner's is then what the assignment says.
    const settledMs = yield* Effect.promise(() => assignmentHeld(h))
    if (settledMs === null) timing(h, `before ${fault.name}: the shards were not where the assignment puts them within 15 s`)
    const index = yield* Effect.promise(() => busiestRunner(h))
    const serving = h.runners.map((_, i) => i).filter((i) => i !== index && !h.paused.has(i))
    const b = serving[0]!
    const c = serving[1] ?? b
    const url = (i: number) => h.runners[i]!.url
    const base = url(b)
    const newSession = async () => {
      const created = await call(h.answers, "setup", `${base}/v1/sessions`, { token: ctx.owner.token, body: { agent: ctx.agent } })
      if (created.status !== 201) throw new Error(`session: ${created.text}`)
      return created.body.id as string
    }
    const report: Record<string, unknown> = { fault: fault.name, runner: index, settledMs }
    /**
     * Every probe charge's key and answer: the charge in flight at the stop is sent again to the new owner while the
     * first delivery may still reach the stopped one when it wakes (issue 42 item 7); its key must keep it one charge.
     */
    const probeKeys = new Map<string, number | null>()
    const pre = yield* Effect.promise(async () => {
      const [wallet] = await ownedOrMore(h, index, ctx.wallets, (u) => u.userId, 1, () => createUser(h))
      const [running, idle, rejoin] = await ownedOrMore(h, index, ctx.sessions, (s) => s, 3, newSession)
      const charge = async (what: string) => {
        const key = Crypto.randomUUID()
        probeKeys.set(key, null)
        const reply = await call(h.answers, what, `${base}/openapi/credit/consume`, { token: wallet!.apiKey, body: { amount: "0.01", idempotency_key: key } })
        probeKeys.set(key, reply.status)
        return reply
      }
      // Warm: the wallet active on its owner, B's way to it open.
      const warm = await charge("probe")
      if (warm.status !== 200) throw new Error(`the probe wallet did not answer before the fault: ${warm.status}`)
      const owners = await ownersOf(h, ctx.bystanders.map((u) => u.userId))
      const held = await h.db(`SELECT shard, generation FROM shard_generations WHERE runner = $1`, [addressOf(h, index)])
      const turn = longTurn(h, ctx.owner.token, base, running!, 150)
      const turnNumber = await turn.running
      return { wallet: wallet!, running: running!, idle: idle!, rejoin: rejoin!, charge, owners, held, turnNumber }
    })
    if (pre.turnNumber === null) h.broken.push(`${fault.name}: the long turn on ${pre.running} did not start`)
    // The lane to the wallet busy when the owner stops: charges back to back through B.
    let laneOn = true
    const lane = (async () => {
      while (laneOn) await pre.charge("probe")
    })()
    // The fault.
    h.paused.add(index)
    const runner = h.runners[index]!
    const pause = { url: runner.url, from: Date.now(), to: Infinity }
    if (fault.kind === "kill") yield* Effect.promise(() => runner.kill())
    else {
      h.pauses.push(pause)
      runner.signal("SIGSTOP")
    }
    const stoppedAt = pause.from
    // Sent at once: outstanding to the stopped owner (its shards have not moved yet), behind what the lane had.
    const inFlight = pre.charge("probe in flight").then((reply) => ({ status: reply.status, ms: Date.now() - stoppedAt }))
    laneOn = false
    // The other runners' callers meanwhile (never sent to the stopped runner, as a load balancer would skip it).
    const elsewhere = ctx.bystanders.filter((u) => pre.owners.get(u.userId)?.runner !== addressOf(h, index))
    const others = chargeLoop(h, elsewhere.length > 0 ? elsewhere : ctx.bystanders, "bystander")
    const interrupted = pre.turnNumber === null ? Promise.resolve(undefined) : interruptTurn(
      h,
      ctx.owner.token,
      () => url(c),
      pre.running,
      pre.turnNumber,
      `${fault.name}: interrupt of a turn on the stopped owner`
    )
    const moved = shardsMoved(h, index, stoppedAt, 30_000)
    const wallet = firstAnswer(() => pre.charge("probe"), stoppedAt)
    const session = firstAnswer(() => call(h.answers, "probe", `${url(c)}/v1/sessions/${pre.idle}/interrupt`, { token: ctx.owner.token }), stoppedAt)
    if (fault.kind === "split") {
      yield* Effect.promise(async () => {
        await sleep(fault.cutAfterMs ?? 1_000)
        await h.db(
          `SELECT pg_terminate_backend(a.pid) FROM pg_stat_activity a JOIN cluster_runner_backends b
           ON b.application_name = a.application_name WHERE b.address = $1`,
          [addressOf(h, index)]
        )
      })
    }
    const [movedMs, walletMs, sessionMs, inFlightAnswer] = yield* Effect.promise(() => Promise.all([moved, wallet, session, inFlight]))
    yield* Effect.promise(() => lane)
    // Held by the stopped owner: answered no sooner than 2 s after the stop (nothing can take a stopped owner's shard
    // sooner: the others call it unhealthy after 2.5 s of silence, or about 3 s of unanswered pings). Answered sooner,
    // the owner never had it (the harness took a wallet whose shard was moving): reported, and the short form
    // requires two of its three pauses to have held theirs.
    const held = inFlightAnswer.ms >= 2_000
    Object.assign(report, {
      stoppedAt: new Date(stoppedAt).toISOString(),
      shardsMovedMs: movedMs,
      walletMs,
      sessionMs,
      chargeInFlight: { ...inFlightAnswer, held, afterMoveMs: movedMs === null ? null : inFlightAnswer.ms - movedMs },
      // The machine's load as the fault ended (other checks share it): the timings above are read against it.
      loadAverage: Os.loadavg().map((l) => Number(l.toFixed(1)))
    })
    bounded(h, `${fault.name}: its shards moved`, movedMs)
    bounded(h, `${fault.name}: its wallet (a charge in flight to it) answers elsewhere`, walletMs)
    bounded(h, `${fault.name}: a session it owns answers elsewhere`, sessionMs)
    if (inFlightAnswer.status !== 200) h.broken.push(`${fault.name}: the charge in flight at the stop answered ${inFlightAnswer.status} after ${(inFlightAnswer.ms / 1000).toFixed(1)} s, not 200`)
    else bounded(h, `${fault.name}: the charge in flight at the stop answered`, inFlightAnswer.ms)
    // Cut and sent again to the new owner once its shard moved (ShardMoves, src/platform/cluster/Moves.ts), not
    // answered by its last try 2 s before its 12 s deadline: within a few polls of the move, not seconds later.
    if (held && fault.kind !== "kill" && inFlightAnswer.status === 200 && movedMs !== null && inFlightAnswer.ms - movedMs > IN_FLIGHT_AFTER_MOVE_MS) {
      timing(h, `${fault.name}: the charge in flight answered ${((inFlightAnswer.ms - movedMs) / 1000).toFixed(1)} s after its owner's shards moved (not cut and sent again to the new owner)`)
    }
    let rejoin: Promise<InterruptCase | undefined> = Promise.resolve(undefined)
    if (fault.kind === "kill") {
      yield* Effect.promise(() => others.stop())
      // A replacement in its place (a new address: its share is taken from the others by ordinary hand-overs).
      const startedAt = Date.now()
      h.runners[index] = yield* Scope.extend(h.startRunner(index), scope)
      report.replacementStartMs = Date.now() - startedAt
    } else {
      // A turn on one of its sessions while it is away: it runs on the session's new owner.
      const turn = longTurn(h, ctx.owner.token, base, pre.rejoin, 100)
      const turnNumber = yield* Effect.promise(() => turn.running)
      if (turnNumber === null) h.broken.push(`${fault.name}: the turn on ${pre.rejoin} during the pause did not start`)
      yield* Effect.sleep(`${Math.max(0, (fault.pauseMs ?? 9_000) - (Date.now() - stoppedAt))} millis`)
      yield* Effect.promise(() => others.stop())
      runner.signal("SIGCONT")
      pause.to = Date.now()
      if (turnNumber !== null) {
        // Back: once the cluster counts it healthy again its shards are assigned to it, and the runner that holds
        // the session finishes its turn within its grace meanwhile. The interrupt comes in that hand-over.
        rejoin = (async () => {
          const deadline = Date.now() + 10_000
          while (Date.now() < deadline) {
            const rows = await h.db(`SELECT healthy FROM cluster_runners WHERE address = $1`, [addressOf(h, index)]).catch(() => [])
            if (rows[0]?.healthy === true) break
            // Polled: its return is seen only in the cluster's table.
            await sleep(100)
          }
          // The others' assignment refresh (0.5 s), so the session is assigned to it.
          await sleep(1_000)
          // Through C, or another serving runner once C is stopped by a later fault (this may outlast this one).
          const serving = () => url(h.paused.has(c) ? h.runners.findIndex((_, i) => !h.paused.has(i)) : c)
          return interruptTurn(h, ctx.owner.token, serving, pre.rejoin, turnNumber, `${fault.name}: interrupt during the hand-over back`)
        })()
      }
    }
    h.paused.delete(index)
    const recovered = yield* Effect.promise(() => recovery(h, ctx.payer, ctx.owner, ctx.session).catch(() => null))
    report.recoveryMs = recovered
    bounded(h, `${fault.name}: every runner answers again after ${fault.kind === "kill" ? "its replacement started" : "SIGCONT"}`, recovered)
    // The interrupt during the hand-over back may wait out the old owner's grace: awaited by the next fault before it
    // stops a runner, and before the final checks (`h.pending`).
    h.pending.push(rejoin)
    const first = yield* Effect.promise(() => interrupted)
    report.interrupts = first === undefined ? [] : [summary(first)]
    const notOk = others.statuses.filter((s) => s !== 200).length
    report.otherWallets = { charges: others.latencies.length, p50: percentile(others.latencies, 50), p99: percentile(others.latencies, 99), notOk }
    if (fault.kind !== "kill") {
      if (notOk > 0) h.broken.push(`${fault.name}: ${notOk} charges of other runners' wallets not answered 200 during the pause`)
      if (percentile(others.latencies, 99) > 1_000) {
        // Each slow charge with its wallet's owner before the fault and now: a wallet whose shard moved meanwhile was
        // not a bystander's.
        const now = yield* Effect.promise(() => ownersOf(h, others.slow.map((c) => c.userId)))
        const slow = others.slow.map((c) => ({ ...c, ownerBefore: pre.owners.get(c.userId)?.runner, ownerNow: now.get(c.userId)?.runner }))
        timing(h, `${fault.name}: other runners' wallets answered with p99 ${percentile(others.latencies, 99)} ms (stopped ${addressOf(h, index)}; slow: ${JSON.stringify(slow)})`)
      }
      // Every shard it held before was acquired since by another runner, under a newer generation.
      const after = yield* Effect.promise(() =>
        h.db(`SELECT shard, generation FROM shard_generations WHERE shard = ANY($1)`, [pre.held.map((r) => r.shard)])
      )
      const newer = new Map(after.map((r) => [r.shard as string, BigInt(r.generation)]))
      const unmoved = pre.held.filter((r) => !((newer.get(r.shard) ?? 0n) > BigInt(r.generation)))
      if (unmoved.length > 0) h.broken.push(`${fault.name}: ${unmoved.length} of its ${pre.held.length} shards never acquired by another runner`)
    }
    // After the fault: every run as its log and the ledger say.
    for (const v of yield* Effect.promise(() => runViolations(h))) h.broken.push(`after ${fault.name}: ${v}`)
    // Every probe charge once in the ledger when answered 200, at most once otherwise: none doubled by a resend. The
    // stopped owner has woken by now (a pause), so a first delivery it still held has had its chance to post.
    if (fault.kind !== "kill") yield* Effect.promise(() => sleep(1_000))
    const probeLedger = yield* Effect.promise(() =>
      h.db(`SELECT idempotency_key AS key, count(*)::int AS n FROM ledger_entries WHERE idempotency_key = ANY($1) GROUP BY 1`, [
        Array.from(probeKeys.keys())
      ])
    )
    const posted = new Map(probeLedger.map((row) => [row.key as string, row.n as number]))
    for (const [key, status] of probeKeys) {
      const n = posted.get(key) ?? 0
      if (n > 1 || (status === 200 && n !== 1)) h.broken.push(`${fault.name}: probe charge ${key} answered ${status}, ${n} ledger entries`)
    }
    report.probeCharges = { sent: probeKeys.size, answered200: Array.from(probeKeys.values()).filter((s) => s === 200).length }
    console.log(JSON.stringify(report))
    return report
  })
