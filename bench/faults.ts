/**
 * The long fault checker of issues 26 and 33 (the short one is test/cluster/faults.test.ts, in CI): three runners
 * from `dist/` (`npm run build:server` first) over a PostgreSQL and a Redis of their own (test/support/Services.ts:
 * never the machine's 5432/6379), under charges, turns and held subscriptions, and one fault after another:
 *
 *   kill9          kill -9 of the busiest owner (most shard locks), then a new runner in its place
 *   sigstop        SIGSTOP of the busiest owner for 20 s, no help from outside
 *   sigstop-cut    SIGSTOP, its database sessions ended from outside at +8 s, SIGCONT at +20 s (issue 33's split brain)
 *   pg-restart     pg_ctl restart -m fast
 *   pg-stop        PostgreSQL stopped for 8 s
 *   redis-restart  Redis killed and started empty
 *   redis-flush    FLUSHALL
 *
 *   npx tsx bench/faults.ts [--settle 20] [--faults kill9,sigstop,sigstop-cut,pg-restart,pg-stop,redis-restart,redis-flush]
 *
 * `--settle` is the seconds of load between faults. After each fault it prints how long until every serving runner
 * answered a charge and a session read again, and at the end the invariants of issue 33 item 5 (every request
 * answered 2xx or 503 with Retry-After within 15 s, cuts allowed only around a kill; every charge once in the ledger;
 * balances equal their ledgers; no seq gap; one end per turn; runs' credits equal the ledger's; every held subscriber
 * got every event once, in order). A script, not a test: it asserts nothing and exits 1 when an invariant broke.
 */
import { Effect, Exit, Scope } from "effect"
import * as Os from "node:os"
import {
  addressOf,
  busiestRunner,
  call,
  chargeLoop,
  ownersOf,
  percentile,
  shardsMoved,
  makeHarness,
  newUser,
  recovery,
  settled,
  startLoad,
  violations
} from "../test/support/Faults.js"

const args = new Map<string, string>()
for (let i = 2; i < process.argv.length; i += 2) args.set(process.argv[i]!.replace(/^--/, ""), process.argv[i + 1]!)
const SETTLE_MS = Number(args.get("settle") ?? 20) * 1000
const FAULTS = (args.get("faults") ?? "kill9,sigstop,sigstop-cut,pg-restart,pg-stop,redis-restart,redis-flush").split(",")

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

const program = Effect.gen(function*() {
  const h = yield* makeHarness(3)
  yield* settled(h, 3)
  const owner = yield* newUser(h)
  const payers = yield* Effect.all(Array.from({ length: 10 }, () => newUser(h)))
  const bystanders = yield* Effect.all(Array.from({ length: 8 }, () => newUser(h)))
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
  const load = startLoad(h, payers, owner, sessions)
  const rows: Array<string> = []
  const scope = yield* Effect.scope
  /** Per fault: when its shards moved (a killed or paused runner's) and how the other runners' wallets answered. */
  const extra = new Map<string, { moved?: number | null; others?: string }>()
  const recovered = (fault: string, from: number, until: number) =>
    Effect.promise(async () => {
      const ms = await recovery(h, payers[0]!, owner, sessions[0]!)
      const answers = h.answers.filter((a) => a.at >= from)
      const refused = answers.filter((a) => a.status === 503).length
      const slowest = Math.max(0, ...answers.map((a) => a.ms))
      const more = extra.get(fault)
      const moved = more?.moved === undefined ? "" : more.moved === null ? "no" : `${(more.moved / 1000).toFixed(1)} s`
      rows.push(
        `| ${fault} | ${((until - from + ms) / 1000).toFixed(1)} s | ${(ms / 1000).toFixed(1)} s | ${moved} | ${more?.others ?? ""} | ${answers.length} | ${refused} | ${(slowest / 1000).toFixed(1)} s | ${Os.loadavg()[0]!.toFixed(1)} |`
      )
    })
  const pausedFor = (fault: string, index: number, ms: number, cutAfterMs?: number) =>
    Effect.promise(async () => {
      const runner = h.runners[index]!
      const owners = await ownersOf(h, bystanders.map((u) => u.userId))
      const elsewhere = bystanders.filter((u) => owners.get(u.userId)?.runner !== addressOf(h, index))
      h.paused.add(index)
      const stoppedAt = Date.now()
      const pause = { url: runner.url, from: stoppedAt, to: Infinity }
      h.pauses.push(pause)
      runner.signal("SIGSTOP")
      const others = chargeLoop(h, elsewhere.length > 0 ? elsewhere : bystanders, "bystander")
      const moved = shardsMoved(h, index, stoppedAt, ms)
      if (cutAfterMs !== undefined) {
        await sleep(cutAfterMs)
        const port = h.runnerPorts.get(runner)
        await h.db(
          `SELECT pg_terminate_backend(a.pid) FROM pg_stat_activity a JOIN cluster_runner_backends b
           ON b.application_name = a.application_name WHERE b.address = $1`,
          [`127.0.0.1:${port}`]
        )
      }
      const movedMs = await moved
      await sleep(ms - (Date.now() - stoppedAt))
      await others.stop()
      runner.signal("SIGCONT")
      pause.to = Date.now()
      h.paused.delete(index)
      const notOk = others.statuses.filter((s) => s !== 200).length
      extra.set(fault, {
        moved: movedMs,
        others: `${others.latencies.length} charges, p50 ${percentile(others.latencies, 50)} ms, p99 ${percentile(others.latencies, 99)} ms, ${notOk} not 200`
      })
    })

  for (const fault of FAULTS) {
    yield* Effect.promise(() => sleep(SETTLE_MS))
    const from = Date.now()
    switch (fault) {
      case "kill9": {
        const index = yield* Effect.promise(() => busiestRunner(h))
        h.paused.add(index)
        const killedAt = Date.now()
        yield* Effect.promise(() => h.runners[index]!.kill())
        extra.set(fault, { moved: yield* Effect.promise(() => shardsMoved(h, index, killedAt, 30_000)) })
        h.runners[index] = yield* Scope.extend(h.startRunner(index), scope)
        h.paused.delete(index)
        break
      }
      case "sigstop":
        yield* pausedFor(fault, yield* Effect.promise(() => busiestRunner(h)), 20_000)
        break
      case "sigstop-cut":
        yield* pausedFor(fault, yield* Effect.promise(() => busiestRunner(h)), 20_000, 8_000)
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
    yield* recovered(fault, from, Date.now())
  }
  yield* Effect.promise(() => sleep(SETTLE_MS))
  yield* Effect.promise(() => load.stop())
  const found = yield* Effect.promise(() => violations(h, load, sessions, { cutsAllowed: FAULTS.includes("kill9") }))
  console.log("| fault | fault + recovery | recovery after it ended | shards moved (from its start) | other runners' wallets meanwhile | requests since | 503 | slowest answer | load |")
  console.log("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
  for (const row of rows) console.log(row)
  console.log(JSON.stringify({
    charges: load.charges.size,
    turns: load.turns,
    requests: h.answers.length,
    cuts: h.answers.filter((a) => a.status === 0).length,
    reconnects: load.received.reduce((n, r) => n + r.reconnects, 0)
  }))
  console.log(found.length === 0 ? "every invariant held" : `${found.length} violations:\n${found.slice(0, 50).join("\n")}`)
  return found.length
})

Effect.runPromiseExit(Effect.scoped(program)).then((exit) => {
  if (Exit.isFailure(exit)) {
    console.error(exit.cause)
    process.exit(1)
  }
  process.exit(exit.value === 0 ? 0 : 1)
})
