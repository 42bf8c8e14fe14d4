/**
 * The long fault checker of issues 26, 33 and 42 (the short one is test/cluster/faults.test.ts, in CI): three runners
 * from `dist/` (`npm run build:server` first) over a PostgreSQL and a Redis of their own (test/support/Services.ts:
 * never the machine's 5432/6379), under charges, turns and held subscriptions, and one fault after another:
 *
 *   kill9          kill -9 of the busiest owner (most shard locks), then a new runner in its place
 *   sigstop        SIGSTOP of the busiest owner for 20 s, no help from outside
 *   sigstop-cut    SIGSTOP, its database sessions ended from outside at +1 s (before the others' watch would), SIGCONT
 *                  at +20 s (issue 33's split brain)
 *   pg-restart     pg_ctl restart -m fast
 *   pg-stop        PostgreSQL stopped for 8 s
 *   redis-restart  Redis killed and started empty
 *   redis-flush    FLUSHALL
 *
 *   npx tsx bench/faults.ts [--settle 20] [--pause 20] [--faults kill9,sigstop,sigstop-cut,pg-restart,pg-stop,redis-restart,redis-flush]
 *
 * A fault can be named more than once (`--faults sigstop,sigstop,sigstop,sigstop,sigstop` for five pauses).
 * `--settle` is the seconds of load between faults, `--pause` how long a stopped owner stays stopped. The owner
 * faults (kill9, sigstop, sigstop-cut) are `faultOwner` of test/support/Faults.ts, as in CI: a charge in flight to the
 * stopped owner, a turn running on it interrupted through another runner, for a pause an interrupt during the
 * hand-over back, and the times from the stop until its shards moved, its wallet and a session of its own answered
 * elsewhere and the charge in flight was answered. After each fault it prints how long until every serving runner
 * answered a charge and a session read again, and checks every run against its log and the ledger; at the end the
 * invariants of issue 33 item 5 (every request answered 2xx or 503 with Retry-After within 15 s, cuts allowed only
 * around a kill; every charge once in the ledger; balances equal their ledgers; no seq gap; one end per turn; each
 * run's status and credits as its log and the ledger say, every run with its events; an interrupt that answered
 * `{"interrupted": true}` ended its turn; every held subscriber got every event once, in order) and every promise seen
 * broken on the way (a recovery over 5 s, an interrupt lost in a hand-over). A script, not a test: it asserts
 * nothing and exits 1 when an invariant or a promise broke.
 */
import { Effect, Exit } from "effect"
import * as Os from "node:os"
import {
  bounded,
  call,
  faultOwner,
  makeHarness,
  newUser,
  recovery,
  runViolations,
  settled,
  startLoad,
  summary,
  violations
} from "../test/support/Faults.js"

const args = new Map<string, string>()
for (let i = 2; i < process.argv.length; i += 2) args.set(process.argv[i]!.replace(/^--/, ""), process.argv[i + 1]!)
const SETTLE_MS = Number(args.get("settle") ?? 20) * 1000
const PAUSE_MS = Number(args.get("pause") ?? 20) * 1000
const FAULTS = (args.get("faults") ?? "kill9,sigstop,sigstop-cut,pg-restart,pg-stop,redis-restart,redis-flush").split(",")

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

const program = Effect.gen(function*() {
  const h = yield* makeHarness(3)
  yield* settled(h, 3)
  const owner = yield* newUser(h)
  const payers = yield* Effect.all(Array.from({ length: 10 }, () => newUser(h)))
  const bystanders = yield* Effect.all(Array.from({ length: 8 }, () => newUser(h)))
  const probes = yield* Effect.all(Array.from({ length: 3 }, () => newUser(h)))
  const base = h.runners[0]!.url
  const agent = yield* Effect.promise(() =>
    call(h.answers, "setup", `${base}/v1/agents`, { token: owner.token, body: { name: "Faults", instructions: "Answer briefly." } })
  )
  const sessions: Array<string> = []
  for (let i = 0; i < 10; i++) {
    const created = yield* Effect.promise(() =>
      call(h.answers, "setup", `${base}/v1/sessions`, { token: owner.token, body: { agent: agent.body.identifier } })
    )
    sessions.push(created.body.id)
  }
  const spare: Array<string> = []
  for (let i = 0; i < 9; i++) {
    const created = yield* Effect.promise(() =>
      call(h.answers, "setup", `${base}/v1/sessions`, { token: owner.token, body: { agent: agent.body.identifier } })
    )
    spare.push(created.body.id)
  }
  const context = { owner, agent: agent.body.identifier as string, payer: payers[0]!, session: sessions[0]!, wallets: probes, sessions: spare, bystanders }
  const load = startLoad(h, payers, owner, sessions)
  const rows: Array<string> = []
  /** Per owner fault, what `faultOwner` measured. */
  const extra = new Map<string, Record<string, any>>()
  const seconds = (ms: unknown) => typeof ms === "number" ? `${(ms / 1000).toFixed(1)} s` : "no"
  const recovered = (fault: string, from: number, until: number) =>
    Effect.promise(async () => {
      const more = extra.get(fault)
      // An owner fault measured its own recovery (from SIGCONT, or from its replacement's start).
      const ms = more?.recoveryMs ?? await recovery(h, payers[0]!, owner, sessions[0]!).catch(() => null)
      if (more === undefined) bounded(h, `${fault}: every runner answers again`, ms)
      for (const v of await runViolations(h)) h.broken.push(`after ${fault}: ${v}`)
      const answers = h.answers.filter((a) => a.at >= from)
      const refused = answers.filter((a) => a.status === 503).length
      const slowest = Math.max(0, ...answers.map((a) => a.ms))
      const owned = more === undefined ? "" :
        `moved ${seconds(more.shardsMovedMs)}, wallet ${seconds(more.walletMs)}, in flight ${more.chargeInFlight.status} ${seconds(more.chargeInFlight.ms)}, session ${seconds(more.sessionMs)}`
      const others = more === undefined ? "" : `${more.otherWallets.charges} charges, p50 ${more.otherWallets.p50} ms, p99 ${more.otherWallets.p99} ms, ${more.otherWallets.notOk} not 200`
      const interrupts = more === undefined ? "" : (more.interrupts as Array<any>).map((i) => `${i.outcome}${i.end === undefined ? "" : ` (${i.end})`}: ${i.answers.map((a: Array<unknown>) => a[1] === undefined ? a[0] : a[1]).join(" then ")}`).join("; ")
      rows.push(
        `| ${fault} | ${seconds(until - from + (typeof ms === "number" ? ms : 0))} | ${seconds(ms)} | ${owned} | ${others} | ${interrupts} | ${answers.length} | ${refused} | ${(slowest / 1000).toFixed(1)} s | ${Os.loadavg()[0]!.toFixed(1)} |`
      )
    })
  for (const [position, fault] of FAULTS.entries()) {
    yield* Effect.promise(() => sleep(SETTLE_MS))
    const from = Date.now()
    // Each row names its fault's run (`sigstop 2`), so a fault named twice is measured twice.
    const name = `${fault} ${FAULTS.slice(0, position + 1).filter((f) => f === fault).length}`
    switch (fault) {
      case "kill9":
        extra.set(name, yield* faultOwner(h, { name, kind: "kill" }, context))
        yield* settled(h, 3)
        break
      case "sigstop":
        extra.set(name, yield* faultOwner(h, { name, kind: "pause", pauseMs: PAUSE_MS }, context))
        break
      case "sigstop-cut":
        extra.set(name, yield* faultOwner(h, { name, kind: "split", pauseMs: PAUSE_MS, cutAfterMs: 1_000 }, context))
        break
      case "pg-restart":
        yield* h.services.postgres.restart
        break
      case "pg-stop":
        yield* h.services.postgres.stop
        yield* Effect.promise(() => sleep(8_000))
        yield* h.services.postgres.start
        break
      case "redis-restart":
        yield* h.services.redis.restart
        break
      case "redis-flush":
        yield* h.services.redis.flushAll
        break
      default:
        throw new Error(`unknown fault ${fault}`)
    }
    yield* recovered(name, from, Date.now())
  }
  yield* Effect.promise(() => sleep(SETTLE_MS))
  yield* Effect.promise(() => Promise.all(h.pending))
  yield* Effect.promise(() => load.stop())
  const found = yield* Effect.promise(() => violations(h, load, sessions, { cutsAllowed: FAULTS.includes("kill9") }))
  console.log(
    "| fault | fault + recovery | recovery after it ended | the stopped owner's (from the stop) | other runners' wallets meanwhile | interrupts | requests since | 503 | slowest answer | load |"
  )
  console.log("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
  for (const row of rows) console.log(row)
  for (const c of h.interrupts) console.log(JSON.stringify(summary(c)))
  console.log(JSON.stringify({
    charges: load.charges.size,
    turns: load.turns,
    requests: h.answers.length,
    cuts: h.answers.filter((a) => a.status === 0).length,
    reconnects: load.received.reduce((n, r) => n + r.reconnects, 0)
  }))
  console.log(found.length === 0 ? "every invariant held" : `${found.length} violations:\n${found.slice(0, 50).join("\n")}`)
  console.log(h.broken.length === 0 ? "every promise kept" : `${h.broken.length} promises broken:\n${h.broken.join("\n")}`)
  return found.length + h.broken.length
})

Effect.runPromiseExit(Effect.scoped(program)).then((exit) => {
  if (Exit.isFailure(exit)) {
    console.error(exit.cause)
    process.exit(1)
  }
  process.exit(exit.value === 0 ? 0 : 1)
})
