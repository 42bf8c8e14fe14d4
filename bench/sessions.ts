/**
 * Sessions (issue 6): memory per idle active session, how many live subscriptions (`GET /v1/sessions/:id/events`)
 * one process holds, and turn latency under many concurrent sessions, against the platform started as its own
 * process, the way `npm start` runs it.
 *
 *   npx tsx bench/sessions.ts                                                               # embedded (PGlite)
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test REDIS_URL=redis://127.0.0.1:6379 \
 *     npx tsx bench/sessions.ts                                                             # services
 *
 * Flags (defaults in brackets): --sessions 1000,2000 (memory checkpoints: sessions created, one message each),
 * --subscriptions 10000, --sub-sessions 1000 (sessions the subscriptions are spread over), --delivery-sessions 20
 * (sessions that get a message while everyone listens), --turn-sessions 500, --seconds 20 (turn phase), --users 50,
 * --concurrency 100 (creates, first messages and subscription opens in flight at once), --open-seconds 120 (stop
 * opening subscriptions after this long and report how far it got), --idle-commit-seconds 5 (the idle platform's
 * commits counted before the turn phase, to give the turns' net of them), --idle-seconds 10 (server CPU while they are
 * held idle), --idle-profile FILE (a CPU profile of the server over that window; needs the inspector), --gc on|off
 * (force a full GC in the server through the inspector before each memory sample), --phases
 * memory,subscriptions,turns, --json FILE (also write every phase's numbers as JSON, for bench/engine.ts),
 * --heap-snapshots DIR (memory phase: write the server's V8 heap snapshots `warm.heapsnapshot`, after the warm-up's
 * sample, and `last.heapsnapshot`, after the last checkpoint's; compare them with bench/heapdiff.ts).
 * BENCH_NODE_ARGS adds flags to the server's node (as in bench/runs.ts).
 *
 * The server runs with `--inspect=127.0.0.1:<free port>` (unless --gc off) so the script can force a full GC and
 * read the V8 heap (`HeapProfiler.collectGarbage`, `Runtime.getHeapUsage`) from outside; nothing is added to the
 * server's code. RSS comes from /proc/<pid>/status, open sockets from /proc/<pid>/fd.
 *
 * A script, not a test: it prints Markdown tables for BENCHMARKS.md and asserts nothing (it counts and reports what
 * did not arrive).
 */
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Os from "node:os"
import { call, closedLoop, freePort, launchBenchPlatform, pair, processCpu, STATISTICS_LAG_MS, writeJson } from "./support.js"

const args = new Map<string, string>()
for (let i = 2; i < process.argv.length; i += 2) args.set(process.argv[i]!.replace(/^--/, ""), process.argv[i + 1]!)
const CHECKPOINTS = (args.get("sessions") ?? "1000,2000").split(",").map(Number).sort((a, b) => a - b)
const SUBSCRIPTIONS = Number(args.get("subscriptions") ?? 10_000)
const SUB_SESSIONS = Number(args.get("sub-sessions") ?? 1000)
const DELIVERY_SESSIONS = Number(args.get("delivery-sessions") ?? 20)
const TURN_SESSIONS = Number(args.get("turn-sessions") ?? 500)
const SECONDS = Number(args.get("seconds") ?? 20)
const USERS = Number(args.get("users") ?? 50)
const CONCURRENCY = Number(args.get("concurrency") ?? 100)
/** Opening subscriptions stops after this long, so a slow (or loaded) machine still finishes; the table says how far it got. */
const OPEN_SECONDS = Number(args.get("open-seconds") ?? 120)
const GC = (args.get("gc") ?? "on") !== "off"
/** Where to write a CPU profile (.cpuprofile, for Chrome DevTools) of the server while the subscriptions sit idle. */
const IDLE_PROFILE = args.get("idle-profile")
/** How long the held subscriptions sit idle (heartbeats only) while the server's CPU is measured. */
const IDLE_SECONDS = Number(args.get("idle-seconds") ?? 10)
/** How long the idle platform's own commits are counted before the turn phase (to give the turns' commits net of them). */
const IDLE_COMMIT_SECONDS = Number(args.get("idle-commit-seconds") ?? 5)
const PHASES = new Set((args.get("phases") ?? "memory,subscriptions,turns").split(","))
/** Also write every phase's numbers as JSON to this file. */
const JSON_FILE = args.get("json")
/** Where the memory phase writes heap snapshots of the server (needs the inspector). */
const HEAP_SNAPSHOTS = args.get("heap-snapshots")
const WARM_UP_SESSIONS = 50
const SERVICES = process.env.DATABASE_URL !== undefined
const ADMIN_URL = process.env.DATABASE_URL ?? ""
const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379"

/** Requests and turn streams: keep-alive, enough sockets for every turn worker. */
const agent = new Http.Agent({ keepAlive: true, maxSockets: Math.max(TURN_SESSIONS, CONCURRENCY, DELIVERY_SESSIONS) + 20 })
/** Subscriptions: one socket each, spread over several agents of at most 2000 sockets. */
const subAgents = Array.from(
  { length: Math.max(1, Math.ceil(SUBSCRIPTIONS / 2000)) },
  () => new Http.Agent({ keepAlive: false, maxSockets: 2000 })
)

/** One SSE frame as read: its event name and `id:` (the session's seq); comments have neither. */
interface Frame {
  readonly comment?: string
  readonly name?: string
  readonly id?: number
  readonly done?: boolean
}

const parseFrame = (raw: string): Frame => {
  if (raw.startsWith(":")) return { comment: raw.slice(1).trim() }
  let name: string | undefined
  let id: number | undefined
  let done = false
  for (const line of raw.split("\n")) {
    if (line.startsWith("event: ")) name = line.slice(7)
    else if (line.startsWith("id: ")) id = Number(line.slice(4))
    else if (line === "data: [DONE]") done = true
  }
  return { ...(name !== undefined ? { name } : {}), ...(id !== undefined ? { id } : {}), done }
}

/** Splits a stream into frames as it arrives (frames end with a blank line). */
const framer = (onFrame: (frame: Frame) => void) => {
  let buffer = ""
  return (chunk: string) => {
    buffer += chunk
    let end: number
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const raw = buffer.slice(0, end)
      buffer = buffer.slice(end + 2)
      if (raw.length > 0) onFrame(parseFrame(raw))
    }
  }
}

interface TurnTiming {
  readonly ok: boolean
  readonly status: number
  /** performance.now() when the request went out; milliseconds from then to run.created, first text, [DONE]. */
  readonly t0: number
  readonly created: number
  readonly firstText: number
  readonly total: number
  /** Each event's seq and when it arrived (performance.now()). */
  readonly events: ReadonlyArray<{ readonly name: string; readonly seq: number; readonly at: number }>
}

/** One turn: `POST /v1/sessions/:id/events {type: "message"}`, read as it arrives until `[DONE]`. */
const streamTurn = (base: string, token: string, sessionId: string, message: string) =>
  new Promise<TurnTiming>((resolve) => {
    const payload = JSON.stringify({ type: "message", message })
    const t0 = performance.now()
    let created = NaN
    let firstText = NaN
    let done = false
    let status = 0
    const events: Array<{ name: string; seq: number; at: number }> = []
    const finish = (ok: boolean) =>
      resolve({ ok, status, t0, created, firstText, total: performance.now() - t0, events })
    const request = Http.request(new URL(`/v1/sessions/${sessionId}/events`, base), {
      method: "POST",
      agent,
      headers: {
        authorization: `Bearer ${token}`,
        "content-type": "application/json",
        "content-length": Buffer.byteLength(payload)
      }
    }, (response) => {
      status = response.statusCode ?? 0
      response.setEncoding("utf8")
      response.on("data", framer((frame) => {
        const at = performance.now()
        if (frame.done) done = true
        if (frame.name === undefined) return
        events.push({ name: frame.name, seq: frame.id ?? NaN, at })
        if (Number.isNaN(created) && frame.name === "run.created") created = at - t0
        if (Number.isNaN(firstText) && frame.name === "output.text.delta") firstText = at - t0
      }))
      response.on("end", () => finish(status === 200 && done && events[events.length - 1]?.name === "run.completed"))
      response.on("error", () => finish(false))
    })
    request.on("error", () => finish(false))
    request.write(payload)
    request.end()
  })

/** VmRSS of a process in bytes. */
const rssOf = (pid: number): number => {
  try {
    const line = Fs.readFileSync(`/proc/${pid}/status`, "utf8").split("\n").find((l) => l.startsWith("VmRSS:"))
    return Number(line!.split(/\s+/)[1]) * 1024
  } catch {
    return NaN
  }
}

const fdsOf = (pid: number | "self"): number => {
  try {
    return Fs.readdirSync(`/proc/${pid}/fd`).length
  } catch {
    return NaN
  }
}

const openFilesLimit = (pid: number | "self"): string => {
  try {
    const line = Fs.readFileSync(`/proc/${pid}/limits`, "utf8").split("\n").find((l) => l.startsWith("Max open files"))
    const [soft, hard] = line!.replace("Max open files", "").trim().split(/\s+/)
    return `${soft} (hard ${hard})`
  } catch {
    return "?"
  }
}

/** The part of a `ws` WebSocket used here (the package ships no types of its own). */
interface WsSocket {
  once(event: "open" | "error", listener: (error?: Error) => void): void
  on(event: "message", listener: (data: Buffer) => void): void
  off(event: "message", listener: (data: Buffer) => void): void
  send(data: string): void
  close(): void
}

/** A DevTools protocol session on the server's inspector: calls one method at a time. */
const inspectorSession = async (port: number) => {
  const targets = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json() as Array<{ webSocketDebuggerUrl: string }>
  // `ws` comes with @effect/platform-node; Node 20 has no WebSocket client of its own.
  const wsModule: string = "ws"
  const { default: WebSocket } = (await import(wsModule)) as { default: new(url: string) => WsSocket }
  const socket = new WebSocket(targets[0]!.webSocketDebuggerUrl)
  await new Promise<void>((resolve, reject) => {
    socket.once("open", () => resolve())
    socket.once("error", reject)
  })
  let id = 0
  /** Notifications (messages without an id) go to `onEvent`, e.g. a heap snapshot's chunks. */
  let onEvent: ((method: string, params: any) => void) | undefined
  socket.on("message", (data: Buffer) => {
    const message = JSON.parse(data.toString())
    if (message.id === undefined && message.method !== undefined) onEvent?.(message.method, message.params)
  })
  const send = (method: string, params: Record<string, unknown> = {}) =>
    new Promise<any>((resolve, reject) => {
      const mine = ++id
      const onMessage = (data: Buffer) => {
        const message = JSON.parse(data.toString())
        if (message.id !== mine) return
        socket.off("message", onMessage)
        if (message.error !== undefined) reject(new Error(JSON.stringify(message.error)))
        else resolve(message.result)
      }
      socket.on("message", onMessage)
      socket.send(JSON.stringify({ id: mine, method, params }))
    })
  /** Writes a heap snapshot (after a full GC, as the samples are taken) to `file`, chunk by chunk. */
  const heapSnapshot = async (file: string) => {
    const fd = Fs.openSync(file, "w")
    try {
      onEvent = (method, params) => {
        if (method === "HeapProfiler.addHeapSnapshotChunk") Fs.writeSync(fd, params.chunk as string)
      }
      await send("HeapProfiler.collectGarbage")
      await send("HeapProfiler.takeHeapSnapshot", { reportProgress: false, captureNumericValue: false })
    } finally {
      onEvent = undefined
      Fs.closeSync(fd)
    }
  }
  return { send, heapSnapshot, close: () => socket.close() }
}

/** Memory phase, --heap-snapshots: the server's heap as `DIR/<name>.heapsnapshot`. */
const writeHeapSnapshot = async (inspectPort: number | undefined, name: string) => {
  if (HEAP_SNAPSHOTS === undefined || inspectPort === undefined) return
  Fs.mkdirSync(HEAP_SNAPSHOTS, { recursive: true })
  const file = `${HEAP_SNAPSHOTS}/${name}.heapsnapshot`
  const session = await inspectorSession(inspectPort)
  try {
    await session.heapSnapshot(file)
  } finally {
    session.close()
  }
  progress(`heap snapshot ${file} (${(Fs.statSync(file).size / 1024 / 1024).toFixed(0)} MiB)`)
}

interface Sample {
  /** RSS before and after the forced GC (the same when --gc off), V8 heap used after it. */
  readonly rss: number
  readonly rssAfterGc: number
  readonly heap: number
  readonly fds: number
  readonly load: number
}

const sample = async (pid: number, inspectPort: number | undefined): Promise<Sample> => {
  // Let the last responses and writes settle first.
  await new Promise((r) => setTimeout(r, 1000))
  const rss = rssOf(pid)
  let heap = NaN
  if (inspectPort !== undefined) {
    const session = await inspectorSession(inspectPort)
    try {
      await session.send("HeapProfiler.collectGarbage")
      heap = (await session.send("Runtime.getHeapUsage")).usedSize as number
    } finally {
      session.close()
    }
  }
  return { rss, rssAfterGc: rssOf(pid), heap, fds: fdsOf(pid), load: Os.loadavg()[0]! }
}

/** Runs `work(i)` for i in [from, to) with at most `limit` in flight. */
const progress = (message: string) => console.error(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}`)

const pool = async (from: number, to: number, limit: number, work: (i: number) => Promise<void>) => {
  let next = from
  await Promise.all(Array.from({ length: Math.min(limit, to - from) }, async () => {
    while (next < to) await work(next++)
  }))
}

interface Subscription {
  readonly session: number
  request?: Http.ClientRequest
  status: number
  greeted: boolean
  failed: string | undefined
  pings: number
  closed: boolean
  /** Events while recording, with when they arrived. */
  recording: boolean
  events: Array<{ name: string; seq: number; at: number }>
}

const main = async () => {
  const startLoad = Os.loadavg()
  const inspectPort = GC ? await freePort() : undefined
  const phones = Array.from({ length: USERS }, (_, i) => `+1555${String(3_000_000 + i).padStart(7, "0")}`)
  // The platform's Prometheus port: the turn phase reads how many wallet round trips its turns made from it.
  const metricsPort = await freePort()
  const platform = await launchBenchPlatform({
    env: { SMS_TEST_OTP: phones.map((p) => `${p}=123456`).join(","), SIGNUP_CREDITS: "1000000", METRICS_PORT: String(metricsPort) },
    ...(SERVICES ? { services: { adminUrl: ADMIN_URL, redisUrl: REDIS_URL } } : {}),
    // The inspector's "Debugger listening" notice goes to stderr; the server's own logs stay visible.
    nodeArgs: inspectPort !== undefined ? [`--inspect=127.0.0.1:${inspectPort}`] : []
  })
  const { base, child, db } = platform
  const pid = child.pid!
  const lines: Array<string> = []
  const out = (line = "") => {
    lines.push(line)
    console.log(line)
  }
  const f = (n: number, digits = 1) => Number.isNaN(n) ? "-" : n.toFixed(digits)
  const mib = (bytes: number) => f(bytes / 1024 / 1024, 1)
  const subscriptions: Array<Subscription> = []
  /** What --json writes: each phase's numbers (bytes, seconds, milliseconds; CPU in cores busy). */
  const report: Record<string, unknown> = {
    mode: SERVICES ? "services" : "embedded",
    loadStart: startLoad
  }
  /** Transactions PostgreSQL committed in the bench database (services mode), once its statistics caught up. */
  const commits = async (): Promise<number> => {
    if (db === undefined) return NaN
    await new Promise((r) => setTimeout(r, STATISTICS_LAG_MS))
    const result = await db.admin.query("SELECT xact_commit::bigint AS n FROM pg_stat_database WHERE datname = $1", [db.name])
    return Number(result.rows[0].n)
  }

  /** Wallet round trips the platform made so far (`wallet_requests_total`, every kind; NaN when not scraped). */
  const walletRequests = async (): Promise<number> => {
    const text = await fetch(`http://127.0.0.1:${metricsPort}/metrics`).then((r) => r.text(), () => "")
    let total = NaN
    for (const line of text.split("\n")) {
      const match = /^wallet_requests_total(?:\{[^}]*\})? (\S+)/.exec(line)
      if (match !== null) total = (Number.isNaN(total) ? 0 : total) + Number(match[1])
    }
    return total
  }

  /**
   * Transactions that wrote (each takes a transaction id; read-only ones do not). The counter is the whole
   * PostgreSQL server's, so this is only meaningful on a quiet one; the probe itself takes one id.
   */
  const writes = async (): Promise<number> => {
    if (db === undefined) return NaN
    const result = await db.admin.query("SELECT txid_current()::bigint AS n")
    return Number(result.rows[0].n)
  }

  try {
    const users = await Promise.all(phones.map(async (phone, i) => {
      const token = (await call(agent, base, "POST", "/api/auth/login", { phone, code: "123456" })).body.token as string
      const created = await call(agent, base, "POST", "/v1/agents", { name: `Bench ${i}`, instructions: "Answer briefly." }, {
        authorization: `Bearer ${token}`
      })
      if (created.status !== 201) throw new Error(`create agent: ${created.status} ${JSON.stringify(created.body)}`)
      return { token, agent: created.body.identifier as string }
    }))

    /** Sessions in creation order; session i belongs to user i % USERS. */
    const sessions: Array<{ id: string; token: string }> = []
    let firstTurnFailures = 0
    /** How the failed first turns ended: HTTP status and last event, counted. */
    const firstTurnEnds = new Map<string, number>()
    let firstSessionAt = NaN
    /** Creates sessions up to `total`, each with one message answered, so each Session entity is active. */
    const grow = async (total: number) => {
      const from = sessions.length
      const slots: Array<{ id: string; token: string }> = []
      await pool(from, total, CONCURRENCY, async (i) => {
        const user = users[i % users.length]!
        // A keep-alive socket the server closes as the request goes out (its idle timeout, after a sample's pause)
        // resets it: sent again. No idempotency key (embedded, its memory store would count in the heap per
        // session); a reset request that did create a session leaves a row whose entity never starts.
        const create = () =>
          call(agent, base, "POST", "/v1/sessions", { agent: user.agent, title: `bench ${i}` }, {
            authorization: `Bearer ${user.token}`
          })
        const created = await create().catch((error) => error?.code === "ECONNRESET" ? create() : Promise.reject(error))
        if (created.status !== 201) throw new Error(`create session: ${created.status} ${JSON.stringify(created.body)}`)
        slots[i - from] = { id: created.body.id as string, token: user.token }
        if (Number.isNaN(firstSessionAt)) firstSessionAt = performance.now()
        const turn = await streamTurn(base, user.token, created.body.id, "hello")
        if (!turn.ok) {
          firstTurnFailures++
          const end = `${turn.status} ${turn.events[turn.events.length - 1]?.name ?? "(no event)"}`
          firstTurnEnds.set(end, (firstTurnEnds.get(end) ?? 0) + 1)
        }
      })
      sessions.push(...slots)
    }

    out(`mode: ${SERVICES ? "services (PostgreSQL + Redis)" : "embedded (PGlite, in-memory store)"}; node ${process.version}; ${Os.cpus().length} cores`)
    out(`load average at the start: ${startLoad.map((l) => l.toFixed(2)).join(" ")}`)
    out(`open files limit: bench process ${openFilesLimit("self")}, server process ${openFilesLimit(pid)}`)
    out(`forced GC before memory samples: ${GC ? "yes (inspector)" : "no (RSS only; heap not measured)"}`)

    // 1. Memory per idle active session.
    if (PHASES.has("memory")) {
      const warmStart = performance.now()
      await grow(WARM_UP_SESSIONS)
      // A few more turns on the warm-up sessions, so the JIT and pools are warm before the baseline.
      await pool(0, WARM_UP_SESSIONS * 4, CONCURRENCY, async (i) => {
        const session = sessions[i % WARM_UP_SESSIONS]!
        await streamTurn(base, session.token, session.id, "hello")
      })
      const warmSeconds = (performance.now() - warmStart) / 1000
      progress(`warm-up done in ${warmSeconds.toFixed(1)} s`)
      const baseline = await sample(pid, inspectPort)
      await writeHeapSnapshot(inspectPort, "warm")
      const rows: Array<{ n: number; s: Sample; seconds: number }> = [{ n: sessions.length, s: baseline, seconds: 0 }]
      let started = performance.now()
      let oldest = 0
      for (const checkpoint of CHECKPOINTS) {
        const total = WARM_UP_SESSIONS + checkpoint
        await grow(total)
        const seconds = (performance.now() - started) / 1000
        progress(`${total} sessions (${seconds.toFixed(1)} s)`)
        rows.push({ n: total, s: await sample(pid, inspectPort), seconds })
        oldest = (performance.now() - firstSessionAt) / 1000
        if (checkpoint === CHECKPOINTS[CHECKPOINTS.length - 1]) await writeHeapSnapshot(inspectPort, "last")
        started = performance.now()
      }
      out()
      out(`### 1. Memory per idle active session`)
      out()
      out(`Each session created and sent one \`hello\` (answered), so its Session entity is active (maxIdleTime 5 min) and idle.`)
      out(`Baseline after ${WARM_UP_SESSIONS} warm-up sessions and ${WARM_UP_SESSIONS * 4} more turns on them (${f(warmSeconds, 0)} s); first-turn failures: ${firstTurnFailures}${
          firstTurnFailures > 0 ? ` (${Array.from(firstTurnEnds, ([end, n]) => `${n}× ${end}`).join(", ")})` : ""
        }.`)
      out()
      out("| active sessions | created in s | server RSS MiB | RSS after GC MiB | V8 heap after GC MiB | RSS / session (vs baseline) | heap / session (vs baseline) | server fds | load avg |")
      out("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
      for (const row of rows) {
        const n = row.n - rows[0]!.n
        const perRss = n === 0 ? NaN : (row.s.rssAfterGc - baseline.rssAfterGc) / n
        const perHeap = n === 0 ? NaN : (row.s.heap - baseline.heap) / n
        out(
          `| ${row.n}${n === 0 ? " (baseline)" : ""} | ${n === 0 ? "-" : f(row.seconds, 1)} | ${mib(row.s.rss)} | ${mib(row.s.rssAfterGc)} | ${mib(row.s.heap)} | ` +
            `${Number.isNaN(perRss) ? "-" : `${f(perRss / 1024, 1)} KiB`} | ${Number.isNaN(perHeap) ? "-" : `${f(perHeap / 1024, 1)} KiB`} | ` +
            `${row.s.fds} | ${f(row.s.load, 2)} |`
        )
      }
      report.memory = {
        warmUpSessions: WARM_UP_SESSIONS,
        firstTurnFailures,
        oldestSeconds: oldest,
        rows: rows.map((row) => ({ sessions: row.n, seconds: row.seconds, ...row.s }))
      }
      out()
      out(`The first session was created ${f(oldest, 0)} s before the last sample (an entity passivates after 5 min without a message).`)
      if (rows.length >= 3) {
        const a = rows[rows.length - 2]!
        const b = rows[rows.length - 1]!
        out()
        out(
          `Marginal (${a.n} → ${b.n}): ${f((b.s.rssAfterGc - a.s.rssAfterGc) / (b.n - a.n) / 1024, 1)} KiB RSS, ` +
            `${f((b.s.heap - a.s.heap) / (b.n - a.n) / 1024, 1)} KiB heap per session.`
        )
      }
    }

    // 2. Concurrent open subscriptions.
    if (PHASES.has("subscriptions") && SUBSCRIPTIONS > 0) {
      const deliverySessions = Math.min(DELIVERY_SESSIONS, SUB_SESSIONS)
      if (sessions.length < SUB_SESSIONS + deliverySessions) await grow(SUB_SESSIONS + deliverySessions)
      const before = await sample(pid, inspectPort)
      // The server's CPU with no subscription open, over the same idle window as below, for comparison.
      progress(`quiet for ${IDLE_SECONDS} s before opening`)
      const quietCpu0 = processCpu(pid)
      await new Promise((r) => setTimeout(r, IDLE_SECONDS * 1000))
      const quietCpu = (processCpu(pid) - quietCpu0) / IDLE_SECONDS
      const cpu0 = processCpu(pid)
      const open = (i: number) =>
        new Promise<Subscription>((resolve) => {
          const session = sessions[i % SUB_SESSIONS]!
          const sub: Subscription = {
            session: i % SUB_SESSIONS,
            status: 0,
            greeted: false,
            failed: undefined,
            pings: 0,
            closed: false,
            recording: false,
            events: []
          }
          subscriptions.push(sub)
          let settled = false
          const settle = () => {
            if (!settled) {
              settled = true
              resolve(sub)
            }
          }
          const request = Http.request(new URL(`/v1/sessions/${session.id}/events`, base), {
            method: "GET",
            agent: subAgents[i % subAgents.length],
            headers: { authorization: `Bearer ${session.token}`, accept: "text/event-stream" }
          }, (response) => {
            sub.status = response.statusCode ?? 0
            if (sub.status !== 200) {
              sub.failed = `status ${sub.status}`
              response.resume()
              settle()
              return
            }
            response.setEncoding("utf8")
            response.on("data", framer((frame) => {
              if (frame.comment === "connected") {
                sub.greeted = true
                settle()
              } else if (frame.comment === "ping") sub.pings++
              else if (frame.name !== undefined && sub.recording) {
                sub.events.push({ name: frame.name, seq: frame.id ?? NaN, at: performance.now() })
              }
            }))
            response.on("end", () => {
              sub.closed = true
              settle()
            })
            response.on("error", () => {
              sub.closed = true
              settle()
            })
          })
          sub.request = request
          request.on("error", (error) => {
            sub.failed ??= error.message
            sub.closed = true
            settle()
          })
          request.end()
        })
      const marks: Array<{ n: number; seconds: number; rss: number; fds: number }> = []
      const started = performance.now()
      let greeted = 0
      let lastMark = 0
      let consecutiveFailures = 0
      let stoppedAt: number | undefined
      let timedOut = false
      await pool(0, SUBSCRIPTIONS, CONCURRENCY, async (i) => {
        if (!timedOut && performance.now() - started > OPEN_SECONDS * 1000) timedOut = true
        if (stoppedAt !== undefined || timedOut) return
        const sub = await open(i)
        if (sub.greeted) {
          greeted++
          consecutiveFailures = 0
        } else if (++consecutiveFailures > 200 && stoppedAt === undefined) {
          stoppedAt = i
        }
        if (greeted >= lastMark + SUBSCRIPTIONS / 4 || greeted === SUBSCRIPTIONS) {
          lastMark = greeted
          marks.push({ n: greeted, seconds: (performance.now() - started) / 1000, rss: rssOf(pid), fds: fdsOf(pid) })
        }
      })
      const openSeconds = (performance.now() - started) / 1000
      const openCpu = (processCpu(pid) - cpu0) / openSeconds
      progress(`${greeted} subscriptions open in ${openSeconds.toFixed(1)} s; idle for ${IDLE_SECONDS} s`)
      const held = await sample(pid, inspectPort)
      const idlePings0 = subscriptions.reduce((sum, s) => sum + s.pings, 0)
      const idleCpu0 = processCpu(pid)
      const idleStart = performance.now()
      if (IDLE_PROFILE !== undefined && inspectPort !== undefined) {
        const session = await inspectorSession(inspectPort)
        await session.send("Profiler.enable")
        await session.send("Profiler.start")
        await new Promise((r) => setTimeout(r, IDLE_SECONDS * 1000))
        const { profile } = await session.send("Profiler.stop")
        session.close()
        Fs.writeFileSync(IDLE_PROFILE, JSON.stringify(profile))
        progress(`idle CPU profile written to ${IDLE_PROFILE}`)
      } else {
        await new Promise((r) => setTimeout(r, IDLE_SECONDS * 1000))
      }
      const idleSeconds = (performance.now() - idleStart) / 1000
      const idleCpu = (processCpu(pid) - idleCpu0) / idleSeconds
      const idlePings = (subscriptions.reduce((sum, s) => sum + s.pings, 0) - idlePings0) / idleSeconds
      const idleLoad = Os.loadavg()[0]!
      const alive = subscriptions.filter((s) => s.greeted && !s.closed).length
      const failures = new Map<string, number>()
      for (const s of subscriptions) if (!s.greeted) failures.set(s.failed ?? "no greeting", (failures.get(s.failed ?? "no greeting") ?? 0) + 1)

      // A message on a few sessions while everyone listens: every subscriber must see the turn's events, once.
      for (const s of subscriptions) {
        if (s.session < deliverySessions) {
          s.recording = true
          s.events = []
        }
      }
      const deliveryCpu0 = processCpu(pid)
      const deliveryStart = performance.now()
      // The same turn at the same moment on as many sessions nobody subscribes to, for comparison.
      const controls = sessions.slice(SUB_SESSIONS, SUB_SESSIONS + deliverySessions)
      const [turns, controlTurns] = await Promise.all([
        Promise.all(Array.from({ length: deliverySessions }, (_, k) =>
          streamTurn(base, sessions[k]!.token, sessions[k]!.id, "hello everyone listening"))),
        Promise.all(controls.map((c) => streamTurn(base, c.token, c.id, "hello everyone listening")))
      ])
      const watchers = subscriptions.filter((s) => s.session < deliverySessions && s.greeted && !s.closed)
      for (let waited = 0; waited < 30_000; waited += 50) {
        if (watchers.every((s) => s.events.some((e) => e.name === "run.completed"))) break
        await new Promise((r) => setTimeout(r, 50))
      }
      const deliverySeconds = (performance.now() - deliveryStart) / 1000
      const deliveryCpu = (processCpu(pid) - deliveryCpu0) / deliverySeconds
      let complete = 0
      const lags: Array<number> = []
      const toCompleted: Array<number> = []
      for (const s of watchers) {
        const turn = turns[s.session]!
        const expected = turn.events.map((e) => e.seq).join(",")
        if (turn.ok && s.events.map((e) => e.seq).join(",") === expected) complete++
        for (const event of s.events) {
          const sent = turn.events.find((e) => e.seq === event.seq)
          if (sent !== undefined) lags.push(event.at - sent.at)
          if (event.name === "run.completed") toCompleted.push(event.at - turn.t0)
        }
      }
      const pings = subscriptions.reduce((sum, s) => sum + s.pings, 0)
      const heldFor = (performance.now() - started) / 1000

      // Close every subscription; the server should drop their sockets and hub subscriptions.
      const closeStart = performance.now()
      for (const s of subscriptions) s.request?.destroy()
      for (let waited = 0; waited < 10_000 && fdsOf(pid) > before.fds + 20; waited += 100) {
        await new Promise((r) => setTimeout(r, 100))
      }
      const closeSeconds = (performance.now() - closeStart) / 1000
      const after = await sample(pid, inspectPort)
      await new Promise((r) => setTimeout(r, 15_000))
      const later = await sample(pid, inspectPort)
      const lag = pair(lags)
      const completed = pair(toCompleted)

      out()
      out(`### 2. Concurrent open subscriptions (GET /v1/sessions/:id/events)`)
      out()
      out(
        `Target ${SUBSCRIPTIONS} over ${SUB_SESSIONS} sessions (${f(SUBSCRIPTIONS / SUB_SESSIONS, 0)} per session), ` +
          `${CONCURRENCY} opening at once, ${subAgents.length} http.Agents; a subscription counts once its \`: connected\` greeting arrived.`
      )
      out()
      out("| held (greeted) | still open at the end | failed | time to open s | opens/s | server RSS MiB | V8 heap after GC MiB | server fds | server CPU | load avg |")
      out("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
      out(
        `| ${greeted} | ${alive} | ${subscriptions.length - greeted} | ${f(openSeconds, 1)} | ${f(greeted / openSeconds, 0)} | ` +
          `${mib(held.rss)} (+${mib(held.rss - before.rss)}) | ${mib(held.heap)} (+${mib(held.heap - before.heap)}) | ${held.fds} | ` +
          `${f(openCpu, 2)} | ${f(held.load, 2)} |`
      )
      out()
      if (timedOut) out(`**Opening stopped after ${OPEN_SECONDS} s (--open-seconds) at ${subscriptions.length} opened of ${SUBSCRIPTIONS}.**`)
      out(`Ramp: ${marks.map((m) => `${m.n} at ${f(m.seconds, 1)} s (RSS ${mib(m.rss)} MiB, ${m.fds} fds)`).join("; ")}.`)
      if (failures.size > 0) out(`Failures: ${[...failures].map(([why, n]) => `${n} × ${why}`).join("; ")}${stoppedAt !== undefined ? `; stopped opening at #${stoppedAt}` : ""}.`)
      out(
        `Per subscription: ${f((held.rss - before.rss) / Math.max(1, greeted) / 1024, 1)} KiB RSS, ` +
          `${f((held.heap - before.heap) / Math.max(1, greeted) / 1024, 1)} KiB heap. Heartbeats received while held (${f(heldFor, 0)} s): ${pings}.`
      )
      out(
        `Held idle for ${f(idleSeconds, 0)} s (nothing but heartbeats, ${f(idlePings, 0)} pings/s): server CPU ${f(idleCpu, 2)} ` +
          `(${f(quietCpu, 2)} with none open), load avg ${f(idleLoad, 2)}.`
      )
      out()
      out(
        `Delivery: one message on ${deliverySessions} sessions at once, ${watchers.length} subscribers listening ` +
          `(turns ok: ${turns.filter((t) => t.ok).length}/${deliverySessions}; server CPU ${f(deliveryCpu, 2)}).`
      )
      out()
      out("| subscribers with every event exactly once, in order | lag behind the sender's stream p50 / p99 ms | send → run.completed at subscriber p50 / p99 ms | sender's whole turn p50 / p99 ms | load avg |")
      out("| ---: | ---: | ---: | ---: | ---: |")
      const senderTotal = pair(turns.map((t) => t.total))
      const controlTotal = pair(controlTurns.map((t) => t.total))
      out(
        `| ${complete} / ${watchers.length} | ${f(lag[0], 1)} / ${f(lag[1], 1)} | ${f(completed[0], 1)} / ${f(completed[1], 1)} | ` +
          `${f(senderTotal[0], 1)} / ${f(senderTotal[1], 1)} | ${f(Os.loadavg()[0]!, 2)} |`
      )
      out()
      if (controlTurns.length > 0) {
        out(
          `The same turn at the same moment on ${controlTurns.length} sessions without subscribers: p50 / p99 ` +
            `${f(controlTotal[0], 1)} / ${f(controlTotal[1], 1)} ms (ok: ${controlTurns.filter((t) => t.ok).length}).`
        )
      }
      out(
        `After closing them all (server fds back in ${f(closeSeconds, 1)} s): server fds ${after.fds} (before opening: ${before.fds}), ` +
          `RSS ${mib(after.rssAfterGc)} MiB, V8 heap after GC ${mib(after.heap)} MiB (before opening: ${mib(before.heap)} MiB); ` +
          `15 s later: RSS ${mib(later.rssAfterGc)} MiB, heap ${mib(later.heap)} MiB.`
      )
      report.subscriptions = {
        target: SUBSCRIPTIONS,
        subSessions: SUB_SESSIONS,
        opened: subscriptions.length,
        greeted,
        alive,
        openSeconds,
        openCpu,
        timedOut,
        failures: Object.fromEntries(failures),
        before,
        held,
        after,
        later,
        idleSeconds,
        idleCpu,
        quietCpu,
        idlePings,
        pings,
        delivery: {
          sessions: deliverySessions,
          turnsOk: turns.filter((t) => t.ok).length,
          watchers: watchers.length,
          complete,
          lag,
          toCompleted: completed,
          senderTotal,
          controlTotal,
          cpu: deliveryCpu
        }
      }
      subscriptions.length = 0
      for (const a of subAgents) a.destroy()
    }

    // 3. Turn latency under many concurrent sessions.
    if (PHASES.has("turns") && TURN_SESSIONS > 0) {
      if (sessions.length < TURN_SESSIONS) await grow(TURN_SESSIONS)
      progress(`turn phase: ${TURN_SESSIONS} sessions for ${SECONDS} s`)
      const statuses = new Map<number, number>()
      // The idle platform's own commits (its polls: cluster storage, schedules, webhooks, the eval driver), over
      // IDLE_COMMIT_SECONDS before the load, so the turns' figure can be given net of them.
      const idle0 = await commits()
      const idleAt = Date.now()
      await new Promise((r) => setTimeout(r, IDLE_COMMIT_SECONDS * 1000))
      const commits0 = await commits()
      const commitsFrom = Date.now()
      const idleCommitsPerSecond = (commits0 - idle0) / ((commitsFrom - idleAt) / 1000)
      const writes0 = await writes()
      const wallet0 = await walletRequests()
      const { timings, failures, seconds, cpuSeconds } = await closedLoop({
        clients: TURN_SESSIONS,
        seconds: SECONDS,
        once: (worker) => streamTurn(base, sessions[worker]!.token, sessions[worker]!.id, "hello"),
        cpu: () => processCpu(pid)
      })
      const failed = failures.length
      for (const timing of failures) statuses.set(timing.status, (statuses.get(timing.status) ?? 0) + 1)
      const cpu = cpuSeconds / seconds
      const created = pair(timings.map((t) => t.created))
      const firstText = pair(timings.map((t) => t.firstText))
      const total = pair(timings.map((t) => t.total))
      const s = await sample(pid, undefined)
      const committed = await commits() - commits0
      // The idle platform's commits over the whole window the two reads span (the turns, the wait for the
      // statistics, the samples between), not over the turns' seconds alone.
      const idleCommits = idleCommitsPerSecond * ((Date.now() - commitsFrom) / 1000)
      const wrote = await writes() - writes0 - 1
      // Every turn sent, answered or not, as commits are counted (issue 45 item 2: at most 2 however many steps).
      const walletPerTurn = (await walletRequests() - wallet0) / Math.max(1, timings.length + failed)
      out()
      out(`### 3. Turn latency, ${TURN_SESSIONS} concurrent sessions`)
      out()
      out(`Each of ${TURN_SESSIONS} sessions sends \`hello\` to the builtin model in a loop (next turn when the last one's \`[DONE]\` arrived) for ${SECONDS} s.`)
      out()
      out("| sessions | turns/s | run.created p50 / p99 ms | first output.text.delta p50 / p99 ms | turn (request → [DONE]) p50 / p99 ms | failed | server CPU | server RSS MiB | load avg |")
      out("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
      out(
        `| ${TURN_SESSIONS} | ${f(timings.length / seconds, 1)} | ${f(created[0])} / ${f(created[1])} | ${f(firstText[0])} / ${f(firstText[1])} | ` +
          `${f(total[0])} / ${f(total[1])} | ${failed} | ${f(cpu, 2)} | ${mib(s.rss)} | ${f(s.load, 2)} |`
      )
      const events = timings.reduce((sum, t) => sum + t.events.length, 0) / Math.max(1, timings.length)
      out()
      out(
        `${f(events, 1)} events per turn` +
          (Number.isNaN(committed)
            ? "."
            : `; PostgreSQL committed ${f(committed / Math.max(1, timings.length + failed), 1)} transactions per turn ` +
              `(${f(committed / seconds, 0)}/s), ${f(wrote / Math.max(1, timings.length + failed), 2)} of them writing; ` +
              `net of the idle platform's own ${f(idleCommitsPerSecond, 1)} commits/s: ` +
              `${f((committed - idleCommits) / Math.max(1, timings.length + failed), 1)} per turn.`) +
          ` Wallet round trips per turn: ${f(walletPerTurn, 2)}.`
      )
      if (failed > 0) out(`Failed turns by status: ${[...statuses].map(([st, n]) => `${n} × ${st}`).join(", ")}.`)
      report.turns = {
        sessions: TURN_SESSIONS,
        seconds,
        ok: timings.length,
        failed,
        statuses: Object.fromEntries(statuses),
        created,
        firstText,
        total,
        cpu,
        rss: s.rss,
        load: s.load,
        eventsPerTurn: events,
        committed,
        wrote,
        walletPerTurn
      }
    }
  } finally {
    for (const s of subscriptions) s.request?.destroy()
    agent.destroy()
    for (const a of subAgents) a.destroy()
    await platform.stop()
  }
  console.log("\n---- summary ----\n")
  console.log(lines.join("\n"))
  console.log(`\nload average at the end: ${Os.loadavg().map((l) => l.toFixed(2)).join(" ")}`)
  writeJson(JSON_FILE, { ...report, loadEnd: Os.loadavg() })
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
