import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Exit, Scope } from "effect"
import pg from "pg"
import { failoverBudget } from "../../src/platform/cluster/Budget.js"
import { requestAt } from "../support/Client.js"
import { pollUntil, realWait } from "../support/Poll.js"
import { openStream } from "../support/Sse.js"
import {
  agentOf,
  at,
  balanceOn,
  chargedThrough,
  consume,
  grant,
  lastEvent,
  makeClusterShared,
  newUser,
  runner,
  send,
  seqs,
  sessionOf,
  subscribe,
  untilEnd
} from "./runners.js"
import { settled } from "./support.js"

/**
 * Issue 13: two runner processes over one PostgreSQL behave like one process (a wallet, a session, interrupts and
 * approvals from either runner), as does one process with `WORKERS=2`, and runners whose shard-lock refresh stalls
 * under charge load still answer every charge once.
 * The runners are `dist/main.js` processes (`runners.ts`); services mode only.
 */

/** The session events' notifications that name `session`, counted by a connection of the test's own, for the scope. */
const notesOf = (databaseUrl: string, session: string) =>
  Effect.gen(function*() {
    let count = 0
    yield* Effect.acquireRelease(
      Effect.promise(async () => {
        const client = new pg.Client({ connectionString: databaseUrl })
        await client.connect()
        client.on("notification", (note) => {
          if (JSON.parse(note.payload ?? "{}").s === session) count += 1
        })
        await client.query("LISTEN atrium_session_events")
        return client
      }),
      (client) => Effect.promise(() => client.end())
    )
    return { count: () => count }
  })

describe("cluster (issue 13): two runners as one", () => {
  it.scopedLive("two runners: one wallet, one session, interrupt and approvals from either runner", () =>
    Effect.gen(function*() {
      const shared = yield* makeClusterShared
      // A short follow lease (renewed every 500 ms): every stream below that follows the session from the runner that
      // does not own it depends on its follows being heard and renewed (docs/sessions.md, "Who is told").
      const env = { SESSION_FOLLOW_LEASE: "1500 millis" }
      const [a, b] = yield* Effect.all([runner(shared, env), runner(shared, env)], { concurrency: 2 })

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

      // Issue 45 item 4, who is told: the owner sends a turn's events to other runners (`NOTIFY`, which wakes every
      // runner's listening connection) only while one follows the session. The test listens on the channel too.
      const told = yield* notesOf(shared.databaseUrl, session)
      const inBackground = (message: string) =>
        Effect.gen(function*() {
          const sent = yield* requestAt(a.url, "POST", `/v1/sessions/${session}/events`, {
            token: user.token,
            body: { type: "message", message, background: true }
          })
          assert.strictEqual(sent.status, 202, sent.text)
          return yield* pollUntil(
            requestAt(a.url, "GET", `/v1/runs/${sent.body.id}`, { token: user.token }),
            (run) => run.body.status === "completed",
            "the background turn completed"
          )
        })
      // Every stream above has ended: once a lease has passed since the last follow (and since the session started on
      // its runner), a turn nobody streams is told to no runner. Polled: each try is a turn.
      yield* pollUntil(
        Effect.gen(function*() {
          const before = told.count()
          yield* inBackground("nobody watches")
          return told.count() - before
        }),
        (notes) => notes === 0,
        "a turn told to no other runner",
        { every: 200, within: 20_000 }
      )
      // A follower on each runner, one of which does not own the session: both see every event of a turn that lasts
      // twice the lease, so the follow from the other runner was heard and renewed, and that runner was told.
      const [followA, followB] = [yield* subscribe(a, user, session), yield* subscribe(b, user, session)]
      const toldBefore = told.count()
      yield* inBackground("/slow 30")
      const [seenA, seenB] = [yield* followA.until("run.completed"), yield* followB.until("run.completed")]
      assert.strictEqual(seenA.events[0]!.event, "run.created")
      assert.strictEqual(seenA.events.filter((e) => e.event === "output.text.delta").length, 30, seenA.raw)
      assert.deepStrictEqual(seqs(seenB), seqs(seenA))
      assert.deepStrictEqual(seqs(seenA), seqs(seenA).map((_, i) => seqs(seenA)[0]! + i), "every seq once, in order")
      assert.isAtLeast(told.count() - toldBefore, seqs(seenA).length, "each event told to the other runner")
      yield* followA.cancel
      yield* followB.cancel
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

  const lockHeld = Duration.toMillis(failoverBudget.lockRefresh) * 2 + 1_000
  it.scopedLive("runners that miss their shard-lock refresh under charge load answer every charge, once each", () =>
    Effect.gen(function*() {
      const shared = yield* makeClusterShared
      const a = yield* runner(shared)
      const b = yield* runner(shared)
      yield* settled(shared, 2)
      // Wallets on both runners, charged through both: half the messages cross from one runner to the other.
      const payers = yield* Effect.all(Array.from({ length: 6 }, () => newUser(a)), { concurrency: 2 })
      yield* chargedThrough(a, payers, (i) => i % 2 === 0 ? a : b, 10, (moreRounds) => Effect.gen(function*() {
        // The charges are flowing through both runners when their refreshes start to fail.
        yield* moreRounds(2)
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
            // Real wait: the lock is the fault, and it must outlast a refresh and its timeout (see above), as a stalled
            // PostgreSQL would; nothing else ends it.
            await Effect.runPromise(realWait(lockHeld))
            await client.query("ROLLBACK")
          } finally {
            await client.end()
          }
        })
        // Charges go on after the lock is let go, while the runners take their shards back.
        yield* moreRounds(2)
        yield* settled(shared, 2)
      }))
      // The cut really happened (else this test would prove nothing).
      assert.isTrue([a, b].some((r) => r.output().includes("Shard lock storage is unhealthy")))
    }), { timeout: 240_000 })
})
