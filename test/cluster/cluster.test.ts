import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Exit, Fiber, Scope } from "effect"
import * as Crypto from "node:crypto"
import pg from "pg"
import { failoverBudget } from "../../src/platform/cluster/Budget.js"
import { userIdOf } from "../support/Billing.js"
import { requestAt } from "../support/Client.js"
import { freePort, launchPlatform, type PlatformProcess } from "../support/Process.js"
import { type LiveStream, openStream, type ParsedStream } from "../support/Sse.js"
import { adminQuery } from "../support/Templates.js"
import { internalAuth, type SmsInbox, TestServer } from "../support/TestServer.js"
import { CODE, databaseUrl, makeShared, settled, type Shared } from "./support.js"

/**
 * Issue 13: N runner processes over one PostgreSQL behave like one process. Real processes (`node --import tsx
 * src/main.ts`), each a runner of one cluster (every entity message is encoded and decoded, also locally:
 * `simulateRemoteSerialization`), sharing a database, a Redis prefix and a JWT secret, as an operator scales out.
 * Runs only in services mode (DATABASE_URL): embedded mode is one process by design.
 */

const PHONES = Array.from({ length: 32 }, (_, i) => `+1555${Crypto.randomInt(1e6).toString().padStart(6, "0")}${i}`)

/** A fresh database (empty: the runners migrate it together), Redis prefix and secret every runner of this file shares. */
const makeClusterShared = makeShared("cluster", { fromTemplate: false, phones: PHONES, env: { APPROVAL_TIMEOUT: "60 seconds" } })

const runner = (shared: Shared, env: Record<string, string> = {}) =>
  Effect.flatMap(freePort, (port) => launchPlatform({ ...shared.env, ...env, RUNNER_PORT: String(port) }))

/** The test helpers that take a `TestServer` talk to `platform`. */
const at = (platform: PlatformProcess) =>
  Effect.provideService(TestServer, {
    url: platform.url,
    inbox: undefined as unknown as SmsInbox,
    query: () => Effect.dieMessage("not used")
  })

interface User {
  readonly token: string
  readonly userId: string
  readonly apiKey: string
}

let nextPhone = 0
const newUser = (platform: PlatformProcess) =>
  Effect.gen(function*() {
    const phone = PHONES[nextPhone++]!
    const login = yield* requestAt(platform.url, "POST", "/api/auth/login", { body: { phone, code: CODE } })
    assert.strictEqual(login.status, 200, login.text)
    const token = login.body.token as string
    const key = yield* requestAt(platform.url, "POST", "/api/user/apiKey/create", { token, body: { name: "cluster" } })
    assert.strictEqual(key.status, 200, key.text)
    return { token, userId: userIdOf(token), apiKey: key.body.key as string } satisfies User
  })

const grant = (platform: PlatformProcess, user: User, amount: string) =>
  Effect.map(
    requestAt(platform.url, "POST", `/internal/wallets/${user.userId}/grants`, {
      body: { amount, idempotency_key: Crypto.randomUUID(), reason: "cluster test" },
      headers: internalAuth
    }),
    (reply) => {
      assert.strictEqual(reply.status, 200, reply.text)
      return reply.body
    }
  )

const balanceOn = (platform: PlatformProcess, user: User) =>
  Effect.map(requestAt(platform.url, "GET", "/openapi/credit/balance", { token: user.apiKey }), (reply) => {
    assert.strictEqual(reply.status, 200, reply.text)
    return reply.body.balance as number
  })

const consume = (platform: PlatformProcess, user: User, amount: string, key: string = Crypto.randomUUID()) =>
  requestAt(platform.url, "POST", "/openapi/credit/consume", { token: user.apiKey, body: { amount, idempotency_key: key } })

const agentOf = (platform: PlatformProcess, user: User, tools: Record<string, "allow" | "ask"> = {}) =>
  Effect.map(
    requestAt(platform.url, "POST", "/v1/agents", {
      token: user.token,
      body: {
        name: `Cluster ${Crypto.randomBytes(3).toString("hex")}`,
        instructions: "Answer briefly.",
        tools: Object.entries(tools).map(([name, permission]) => ({ name, permission }))
      }
    }),
    (reply) => {
      assert.strictEqual(reply.status, 201, reply.text)
      return reply.body.identifier as string
    }
  )

const sessionOf = (platform: PlatformProcess, user: User, agent: string) =>
  Effect.map(requestAt(platform.url, "POST", "/v1/sessions", { token: user.token, body: { agent } }), (reply) => {
    assert.strictEqual(reply.status, 201, reply.text)
    return reply.body.id as string
  })

/** Sends a message on `platform` and keeps the turn's stream open. */
const send = (platform: PlatformProcess, user: User, session: string, message: string) =>
  at(platform)(openStream(`/v1/sessions/${session}/events`, { token: user.token, body: { type: "message", message } }))

/** `GET …/events` on `platform`, from `after` when given. */
const subscribe = (platform: PlatformProcess, user: User, session: string, lastEventId?: number) =>
  at(platform)(openStream(`/v1/sessions/${session}/events`, {
    token: user.token,
    method: "GET",
    ...(lastEventId !== undefined ? { headers: { "last-event-id": String(lastEventId) } } : {})
  }))

const seqs = (stream: ParsedStream) => stream.events.map((event) => event.data.seq as number)
const lastEvent = (stream: ParsedStream) => stream.events[stream.events.length - 1]!

/** Reads `live` until `count` events of turn `turn` ended with run.completed / run.failed. */
const untilEnd = (live: LiveStream) =>
  Effect.gen(function*() {
    const completed = yield* live.until("run.completed")
    if (completed.events.some((e) => e.event === "run.completed")) return completed
    return yield* live.until("run.failed")
  })

/**
 * Charges every payer 0.5 in rounds through `via(i)` (payer i's runner) while `disruption` runs and `roundsAfter`
 * rounds after it, then checks that every charge was answered 200 and that each balance fell by exactly what was
 * charged: nothing refused, lost or doubled around the disruption.
 */
const chargedThrough = <R>(
  reader: PlatformProcess,
  payers: ReadonlyArray<User>,
  via: (i: number) => PlatformProcess,
  roundsAfter: number,
  disruption: Effect.Effect<void, never, R>
) =>
  Effect.gen(function*() {
    for (const payer of payers) yield* grant(reader, payer, "1000")
    const before = yield* Effect.all(payers.map((payer) => balanceOn(reader, payer)))
    let disrupted = false
    const statuses: Array<number> = []
    const load = Effect.gen(function*() {
      let rounds = 0
      while (!disrupted || rounds < roundsAfter) {
        const replies = yield* Effect.all(payers.map((payer, i) => consume(via(i), payer, "0.5")), { concurrency: "unbounded" })
        for (const reply of replies) statuses.push(reply.status)
        if (disrupted) rounds++
      }
    })
    const loading = yield* Effect.fork(load)
    yield* disruption
    disrupted = true
    yield* Fiber.join(loading)
    assert.deepStrictEqual(statuses.filter((status) => status !== 200), [])
    const rounds = statuses.length / payers.length
    const after = yield* Effect.all(payers.map((payer) => balanceOn(reader, payer)))
    assert.deepStrictEqual(after, before.map((balance) => balance - rounds * 0.5))
  })

describe.skipIf(databaseUrl === undefined)("cluster (issue 13)", () => {
  it.scopedLive("two runners: one wallet, one session, interrupt and approvals from either runner", () =>
    Effect.gen(function*() {
      const shared = yield* makeClusterShared
      const [a, b] = yield* Effect.all([runner(shared), runner(shared)], { concurrency: 2 })

      // Two processes charging one wallet: every charge answered 200, nothing lost or doubled.
      const payer = yield* newUser(a)
      yield* grant(a, payer, "1000")
      const before = yield* balanceOn(b, payer)
      const charges = yield* Effect.all(
        Array.from({ length: 120 }, (_, i) => consume(i % 2 === 0 ? a : b, payer, "0.5")),
        { concurrency: 24 }
      )
      assert.deepStrictEqual(charges.filter((r) => r.status !== 200).map((r) => r.text), [])
      assert.strictEqual(yield* balanceOn(a, payer), before - 60)
      assert.strictEqual(yield* balanceOn(b, payer), before - 60)

      // A wallet drained on A, granted on B: A sees the grant at once, and charges it.
      const drained = yield* newUser(a)
      const left = yield* balanceOn(a, drained)
      if (left > 0) assert.strictEqual((yield* consume(a, drained, String(left))).status, 200)
      assert.strictEqual((yield* consume(a, drained, "1")).status, 402)
      yield* grant(b, drained, "5")
      assert.strictEqual(yield* balanceOn(a, drained), 5)
      assert.strictEqual((yield* consume(a, drained, "1")).status, 200)

      // A subscriber on B sees the turn sent on A, every event once and in order.
      const user = yield* newUser(a)
      const agent = yield* agentOf(a, user, { get_time: "ask" })
      const session = yield* sessionOf(a, user, agent)
      const watcher = yield* subscribe(b, user, session)
      const sent = yield* untilEnd(yield* send(a, user, session, "/slow 6"))
      assert.strictEqual(lastEvent(sent).event, "run.completed")
      const seen = yield* watcher.until("run.completed")
      assert.deepStrictEqual(seqs(seen), seqs(sent))
      assert.deepStrictEqual(seen.events.map((e) => e.event), sent.events.map((e) => e.event))

      // Two turns at once, one sent to A and one to B: one after the other, numbered 2 and 3, both in the history.
      const [first, second] = yield* Effect.all([
        Effect.flatMap(send(a, user, session, "/slow 5"), untilEnd),
        Effect.flatMap(send(b, user, session, "/slow 5"), untilEnd)
      ], { concurrency: 2 })
      assert.strictEqual(lastEvent(first).event, "run.completed")
      assert.strictEqual(lastEvent(second).event, "run.completed")
      const [early, late] = seqs(first)[0]! < seqs(second)[0]! ? [first, second] : [second, first]
      assert.isBelow(seqs(early)[seqs(early).length - 1]!, seqs(late)[0]!, "the two turns did not overlap")
      const detail = yield* requestAt(b.url, "GET", `/v1/sessions/${session}`, { token: user.token })
      assert.strictEqual(detail.status, 200, detail.text)
      assert.strictEqual(detail.body.messages.length, 6)
      const more = yield* watcher.until("run.completed")
      assert.strictEqual(new Set(seqs(more)).size, seqs(more).length, "no event twice")
      yield* watcher.cancel

      // Interrupt sent to B while A runs the turn.
      const long = yield* send(a, user, session, "/slow 200")
      yield* long.until("output.text.delta")
      const interrupted = yield* requestAt(b.url, "POST", `/v1/sessions/${session}/interrupt`, { token: user.token })
      assert.strictEqual(interrupted.status, 200, interrupted.text)
      assert.isTrue(interrupted.body.interrupted)
      const cut = yield* long.rest
      assert.strictEqual(lastEvent(cut).event, "run.failed")
      assert.strictEqual(lastEvent(cut).data.code, "interrupted")

      // A session approval raised on A, answered on B.
      const asking = yield* send(a, user, session, "/tool get_time {}")
      const asked = yield* asking.until("approval.required")
      const approvalId = asked.events.find((e) => e.event === "approval.required")!.data.approval_id as string
      const rest = yield* at(b)(openStream(`/v1/sessions/${session}/events`, {
        token: user.token,
        body: { type: "approval", approval_id: approvalId, decision: "approve" }
      }))
      const answered = yield* rest.rest
      assert.strictEqual(lastEvent(answered).event, "run.completed", answered.raw)
      assert.strictEqual(lastEvent(yield* asking.rest).event, "run.completed")

      // A stateless run's approval raised on B, answered on A.
      const run = yield* at(b)(openStream("/v1/agents/run", { token: user.token, body: { agent, message: "/tool get_time {}" } }))
      const runAsked = yield* run.until("approval.required")
      const runApproval = runAsked.events.find((e) => e.event === "approval.required")!.data.approval_id as string
      const stranger = yield* newUser(a)
      const refused = yield* requestAt(a.url, "POST", `/v1/approvals/${runApproval}`, { token: stranger.token, body: { decision: "approve" } })
      assert.strictEqual(refused.status, 404, refused.text)
      const accepted = yield* requestAt(a.url, "POST", `/v1/approvals/${runApproval}`, { token: user.token, body: { decision: "approve" } })
      assert.strictEqual(accepted.status, 200, accepted.text)
      assert.strictEqual(lastEvent(yield* run.rest).event, "run.completed")
      const again = yield* requestAt(b.url, "POST", `/v1/approvals/${runApproval}`, { token: user.token, body: { decision: "approve" } })
      assert.strictEqual(again.status, 404, again.text)

      // Issue 30: a message with an Idempotency-Key sent to A and cut off; its retry lands on B and streams the same
      // turn from its first event (the key is in PostgreSQL, the turn in the session's log), sending nothing more.
      const keyed = { token: user.token, body: { type: "message", message: "/slow 10" }, headers: { "idempotency-key": "cluster-retry" } }
      const cutOff = yield* at(a)(openStream(`/v1/sessions/${session}/events`, keyed))
      yield* cutOff.until("output.text.delta")
      yield* cutOff.cancel
      const retried = yield* at(b)(openStream(`/v1/sessions/${session}/events`, keyed))
      assert.strictEqual(retried.headers.get("idempotent-replayed"), "true")
      const whole = yield* retried.rest
      assert.strictEqual(whole.events[0]!.event, "run.created")
      assert.strictEqual(lastEvent(whole).event, "run.completed")
      const asked10 = yield* requestAt(b.url, "GET", `/v1/sessions/${session}`, { token: user.token })
      assert.strictEqual(asked10.body.messages.filter((m: any) => m.role === "user" && m.content === "/slow 10").length, 1)
    }), { timeout: 240_000 })

  it.scopedLive("a runner that joins takes its shards without cutting the turns running on the others", () =>
    Effect.gen(function*() {
      const shared = yield* makeClusterShared
      // A grace longer than the turns: what is measured is whether the hand-over waits, not how long it may.
      const grace = { SHUTDOWN_GRACE: "90 seconds" }
      const a = yield* runner(shared, grace)
      yield* settled(shared, 1)
      const user = yield* newUser(a)
      const agent = yield* agentOf(a, user)
      // All on A, the only runner; about half of them move to B when it joins, while their turns run (25 s each).
      const sessions = yield* Effect.all(Array.from({ length: 8 }, () => sessionOf(a, user, agent)), { concurrency: 4 })
      const streams = yield* Effect.all(sessions.map((s) => send(a, user, s, "/slow 250")), { concurrency: 4 })
      for (const stream of streams) yield* stream.until("output.text.delta")
      const b = yield* runner(shared, grace)
      const running = yield* Effect.promise(() =>
        adminQuery(shared.databaseUrl, `SELECT count(*)::int AS n FROM runs WHERE status = 'running'`)
      )
      assert.isAbove(running[0]!.n, 0, "every turn ended before B joined: nothing was handed over")
      yield* settled(shared, 2)
      const ends = yield* Effect.all(streams.map((s) => s.rest), { concurrency: "unbounded" })
      assert.deepStrictEqual(ends.map((s) => lastEvent(s).event), sessions.map(() => "run.completed"))
      // The moved sessions go on on B.
      for (const session of sessions) {
        const next = yield* untilEnd(yield* send(b, user, session, "hello again"))
        assert.strictEqual(lastEvent(next).event, "run.completed", next.raw)
      }
    }), { timeout: 240_000 })

  it.scopedLive("charges sent while a runner joins are all answered, once each", () =>
    Effect.gen(function*() {
      const shared = yield* makeClusterShared
      const a = yield* runner(shared)
      yield* settled(shared, 1)
      // Several wallets, so that some of them move to B when it takes its shards.
      const payers = yield* Effect.all(Array.from({ length: 6 }, () => newUser(a)), { concurrency: 2 })
      yield* chargedThrough(a, payers, () => a, 5, Effect.gen(function*() {
        yield* runner(shared)
        yield* settled(shared, 2)
      }))
    }), { timeout: 240_000 })

  const lockHeld = Duration.toMillis(failoverBudget.lockRefresh) * 2 + 1_000
  it.scopedLive("runners that miss their shard-lock refresh under charge load answer every charge, once each", () =>
    Effect.gen(function*() {
      const shared = yield* makeClusterShared
      const a = yield* runner(shared)
      const b = yield* runner(shared)
      yield* settled(shared, 2)
      // Wallets on both runners, charged through both: half the messages cross from one runner to the other.
      const payers = yield* Effect.all(Array.from({ length: 6 }, () => newUser(a)), { concurrency: 2 })
      yield* chargedThrough(a, payers, (i) => i % 2 === 0 ? a : b, 10, Effect.gen(function*() {
        // Real time under load: the charges are flowing through both runners when their refreshes start to fail.
        yield* Effect.sleep("1 second")
        // The runners' heartbeat rows are locked for longer than a refresh may take, as a stalled PostgreSQL or a
        // starved process would make it: each refresh times out, each runner gives every shard up at once (cutting
        // the wallet messages in flight) and takes them back once its refresh goes through again. A refresh starts
        // every `lockRefresh` and may wait that long, so a lock of twice that and a second surely times one out.
        yield* Effect.promise(async () => {
          const client = new pg.Client({ connectionString: shared.databaseUrl })
          await client.connect()
          try {
            await client.query("BEGIN")
            await client.query(`SELECT 1 FROM cluster_runners FOR UPDATE`)
            // Real time: the lock outlasts a refresh and its timeout (see above), as a stalled PostgreSQL would.
            await new Promise((resolve) => setTimeout(resolve, lockHeld))
            await client.query("ROLLBACK")
          } finally {
            await client.end()
          }
        })
        // Real time under load: charges go on after the lock is let go, while the runners take their shards back.
        yield* Effect.sleep("1 second")
        yield* settled(shared, 2)
      }))
      // The cut really happened (else this test would prove nothing).
      assert.isTrue([a, b].some((r) => r.output().includes("Shard lock storage is unhealthy")))
    }), { timeout: 240_000 })

  it.scopedLive("SIGTERM: a stopping runner lets its running turns end, then hands its sessions over", () =>
    Effect.gen(function*() {
      const shared = yield* makeClusterShared
      const grace = { SHUTDOWN_GRACE: "60 seconds" }
      const a = yield* runner(shared, grace)
      const stoppingScope = yield* Scope.make()
      const b = yield* Scope.extend(runner(shared, grace), stoppingScope)
      yield* settled(shared, 2)
      const user = yield* newUser(a)
      const agent = yield* agentOf(a, user)
      // About half of these sessions live on B (all on A: 1 in 1024); their streams are held by A, which stays.
      const sessions = yield* Effect.all(Array.from({ length: 10 }, () => sessionOf(a, user, agent)), { concurrency: 4 })
      const streams = yield* Effect.all(sessions.map((s) => send(a, user, s, "/slow 100")), { concurrency: 4 })
      for (const stream of streams) yield* stream.until("output.text.delta")
      assert.strictEqual(yield* b.terminate, 0, b.output())
      const ends = yield* Effect.all(streams.map((s) => s.rest), { concurrency: "unbounded" })
      assert.deepStrictEqual(ends.map((s) => lastEvent(s).event), sessions.map(() => "run.completed"))
      yield* settled(shared, 1)
      for (const session of sessions) {
        const next = yield* untilEnd(yield* send(a, user, session, "hello again"))
        assert.strictEqual(lastEvent(next).event, "run.completed", next.raw)
      }
      yield* Scope.close(stoppingScope, Exit.void)
    }), { timeout: 240_000 })

  it.scopedLive("WORKERS=2: one process starts two runners that share its port, and stops cleanly on SIGTERM", () =>
    Effect.gen(function*() {
      const shared = yield* makeClusterShared
      const scope = yield* Scope.make()
      const platform = yield* Scope.extend(runner(shared, { WORKERS: "2" }), scope)
      // Two runners, each with its share of the shards: the workers are separate processes of one cluster.
      yield* settled(shared, 2)
      const user = yield* newUser(platform)
      yield* grant(platform, user, "10")
      const before = yield* balanceOn(platform, user)
      const charges = yield* Effect.all(Array.from({ length: 40 }, () => consume(platform, user, "0.25")), { concurrency: 8 })
      assert.deepStrictEqual(charges.filter((r) => r.status !== 200).map((r) => r.text), [])
      assert.strictEqual(yield* balanceOn(platform, user), before - 10)
      const agent = yield* agentOf(platform, user)
      const session = yield* sessionOf(platform, user, agent)
      const turn = yield* untilEnd(yield* send(platform, user, session, "hello"))
      assert.strictEqual(lastEvent(turn).event, "run.completed")
      assert.strictEqual(yield* platform.terminate, 0, platform.output())
      yield* Scope.close(scope, Exit.void)
    }), { timeout: 240_000 })

  it.scopedLive("kill -9 of a runner: cut turns are closed, queued ones run, and their sessions go on; a subscriber resumes on another runner; charges are neither lost nor doubled", () =>
    Effect.gen(function*() {
      const shared = yield* makeClusterShared
      const a = yield* runner(shared)
      const victimScope = yield* Scope.make()
      const c = yield* Scope.extend(runner(shared), victimScope)
      // C owns its shards before the turns start: the turns cut below are cut by the kill, not by the hand-over.
      yield* settled(shared, 2)
      const user = yield* newUser(a)
      const agent = yield* agentOf(a, user)
      // About half of these sessions live on C: enough that C owns some of them (all on A: 1 in 4096).
      const sessions = yield* Effect.all(Array.from({ length: 12 }, () => sessionOf(a, user, agent)), { concurrency: 4 })
      const streams = yield* Effect.all(sessions.map((s) => send(a, user, s, "/slow 100")), { concurrency: 4 })
      for (const stream of streams) yield* stream.until("output.text.delta")
      // A turn queued behind each: acknowledged, so owed even by a runner that dies before starting it.
      const queued = yield* Effect.all(sessions.map((s) => send(a, user, s, "owed")), { concurrency: 4 })
      // A subscriber on C, which will lose its runner.
      const watched = sessions[0]!
      const watcher = yield* subscribe(c, user, watched)
      const early = yield* watcher.until("output.text.delta")

      // Charges under load on both runners while C dies.
      const payer = yield* newUser(a)
      yield* grant(a, payer, "1000")
      const start = yield* balanceOn(a, payer)
      const keys: Array<string> = Array.from({ length: 160 }, () => Crypto.randomUUID())
      const outcomes = new Map<string, number | null>()
      const load = Effect.forEach(keys, (key, i) =>
        Effect.promise(() =>
          fetch(`${i % 2 === 0 ? a.url : c.url}/openapi/credit/consume`, {
            method: "POST",
            headers: { "content-type": "application/json", authorization: `Bearer ${payer.apiKey}` },
            body: JSON.stringify({ amount: "0.25", idempotency_key: key }),
            signal: AbortSignal.timeout(30_000)
          }).then((r) => r.status, () => null)
        ).pipe(Effect.tap((status) => Effect.sync(() => outcomes.set(key, status)))), { concurrency: 16, discard: true })
      const loading = yield* Effect.fork(load)
      // Real time under load: the runner is killed while charges to it are in flight.
      yield* Effect.sleep("300 millis")
      yield* Effect.promise(() => c.kill())
      yield* loading.await

      // Every cut turn ends (run.failed interrupted, from the next owner), the others complete.
      const ends = yield* Effect.all(streams.map((s) => s.rest), { concurrency: "unbounded" })
      const outcomesOfTurns = ends.map((s) => `${lastEvent(s).event}:${lastEvent(s).data.code ?? ""}`)
      for (const outcome of outcomesOfTurns) assert.oneOf(outcome, ["run.completed:", "run.failed:interrupted"])
      assert.include(outcomesOfTurns, "run.failed:interrupted", "C owned none of the sessions")
      const owed = yield* Effect.all(queued.map((s) => s.rest), { concurrency: "unbounded" })
      assert.deepStrictEqual(owed.map((s) => lastEvent(s).event), sessions.map(() => "run.completed"))
      // Each session goes on: the next turn has the next number and completes.
      for (const [i, session] of sessions.entries()) {
        const next = yield* untilEnd(yield* send(a, user, session, "hello again"))
        assert.strictEqual(lastEvent(next).event, "run.completed", `session ${i}: ${next.raw}`)
      }
      const numbered = yield* Effect.promise(() =>
        adminQuery(shared.databaseUrl, `SELECT session_id, max(turn)::int AS turn FROM session_events GROUP BY session_id`)
      )
      assert.deepStrictEqual(numbered.map((row) => row.turn), sessions.map(() => 3))
      const running = yield* Effect.promise(() =>
        adminQuery(shared.databaseUrl, `SELECT count(*)::int AS n FROM runs WHERE status = 'running'`)
      )
      assert.strictEqual(running[0]!.n, 0)

      // The subscriber comes back on A with Last-Event-ID: no gap, no duplicate.
      const lastSeen = seqs(early)[seqs(early).length - 1]!
      const resumed = yield* subscribe(a, user, watched, lastSeen)
      const afterwards = yield* resumed.until("run.completed")
      const all = [...seqs(early), ...seqs(afterwards)]
      assert.deepStrictEqual(all, Array.from({ length: all.length }, (_, i) => all[0]! + i))
      yield* resumed.cancel

      // Charges: each answered 200 is in the ledger exactly once; the unknown ones replay or charge on retry.
      for (const [key, status] of outcomes) {
        if (status === 200) continue
        const retry = yield* consume(a, payer, "0.25", key)
        assert.strictEqual(retry.status, 200, retry.text)
        outcomes.set(key, 200)
      }
      const ledger = yield* Effect.promise(() =>
        adminQuery(
          shared.databaseUrl,
          `SELECT idempotency_key AS key, count(*)::int AS n FROM ledger_entries WHERE user_id = '${payer.userId}' AND amount < 0 GROUP BY idempotency_key`
        )
      )
      const counted = new Map(ledger.map((row) => [row.key as string, row.n as number]))
      for (const key of keys) assert.strictEqual(counted.get(key), 1, `charge ${key}`)
      assert.strictEqual(yield* balanceOn(a, payer), start - 40)
      yield* Scope.close(victimScope, Exit.void)
    }), { timeout: 240_000 })
})
