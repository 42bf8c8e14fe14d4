import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Crypto from "node:crypto"
import {
  addressOf,
  busiestRunner,
  call,
  chargeLoop,
  keepLogs,
  makeHarness,
  newUser,
  ownersOf,
  percentile,
  recovery,
  settled,
  shardsMoved,
  startLoad,
  violations
} from "../support/Faults.js"
import { servicesAvailable } from "../support/Services.js"

/**
 * Issues 26 and 33, the short fault checker (CI: `FAULTS=1`, see .ci/run; `bench/faults.ts` is the long one). Three
 * runners from `dist/` over a PostgreSQL and a Redis of the test's own (test/support/Services.ts: the machine's
 * shared ones are never restarted), under charges on four wallets, turns on three sessions and two held
 * subscriptions per session on runners other than the sender. Faults, one after the other: a PostgreSQL restart
 * (`pg_ctl restart -m fast`), PostgreSQL stopped for 8 s, a Redis FLUSHALL, a Redis restart. Then the invariants:
 * every request answered 2xx or 503 with Retry-After within 15 s, every charge in the ledger once (those not
 * answered 200 are retried with their key), balances equal to their ledgers, no `seq` gap, one end per turn, runs'
 * credits equal to the ledger's for their turn, every held subscriber got every event once and in order.
 */
// FAULTS=1 asks for this check: a missing prerequisite then fails it, so CI is never green with nothing run.
const enabled = process.env.FAULTS === "1"

describe.skipIf(!enabled)("faults (issues 26, 33)", () => {
  it("has its prerequisites: PostgreSQL's binaries and redis-server, to start services of its own", () => {
    assert.isTrue(servicesAvailable, "FAULTS=1, but this machine cannot start a PostgreSQL (initdb) and a Redis of its own")
  })
  it.scopedLive("three runners under load survive PostgreSQL restarts and stops and Redis restarts and flushes", () =>
    Effect.gen(function*() {
      const h = yield* makeHarness(3)
      // The runners' output, whatever the outcome (FAULTS_LOG_DIR), before the harness stops them.
      yield* Effect.addFinalizer(() => Effect.sync(() => keepLogs(h, "final")))
      yield* settled(h, 3)
      const owner = yield* newUser(h)
      const payers = yield* Effect.all(Array.from({ length: 4 }, () => newUser(h)))
      // Wallets charged only while a runner is paused: those the paused runner does not own must keep answering.
      const bystanders = yield* Effect.all(Array.from({ length: 8 }, () => newUser(h)))
      const setup = h.runners[0]!.url
      const agent = yield* Effect.promise(() =>
        call(h.answers, "setup", `${setup}/v1/agents`, { token: owner.token, body: { name: "Faults", instructions: "Answer briefly." } })
      )
      assert.strictEqual(agent.status, 201, agent.text)
      const sessions: Array<string> = []
      for (let i = 0; i < 3; i++) {
        const created = yield* Effect.promise(() =>
          call(h.answers, "setup", `${setup}/v1/sessions`, { token: owner.token, body: { agent: agent.body.identifier } })
        )
        assert.strictEqual(created.status, 201, created.text)
        sessions.push(created.body.id)
      }
      // A create with an Idempotency-Key, to be retried after Redis is flushed.
      const idempotencyKey = Crypto.randomUUID()
      const createOnce = Effect.promise(() =>
        call(h.answers, "setup", `${setup}/v1/sessions`, {
          token: owner.token,
          headers: { "idempotency-key": idempotencyKey },
          body: { agent: agent.body.identifier, title: "once" }
        })
      )
      const firstCreate = yield* createOnce
      assert.strictEqual(firstCreate.status, 201, firstCreate.text)

      const load = startLoad(h, payers, owner, sessions)
      const recoveries: Record<string, number> = {}
      // Real time under load between faults: the runners must serve the load for a while before the next one.
      const pause = (ms: number) => Effect.sleep(`${ms} millis`)
      const recover = (fault: string) =>
        Effect.promise(async () => {
          recoveries[fault] = await recovery(h, payers[0]!, owner, sessions[0]!)
        })

      yield* pause(4_000)
      yield* h.services.postgres.restart
      yield* recover("postgres restart")
      // Interrupts work across runners again: a long turn sent on one runner, interrupted through another.
      const long = Effect.promise(async () => {
        const extra = await call(h.answers, "setup", `${setup}/v1/sessions`, { token: owner.token, body: { agent: agent.body.identifier } })
        const stream = fetch(`${h.runners[1]!.url}/v1/sessions/${extra.body.id}/events`, {
          method: "POST",
          headers: { "content-type": "application/json", authorization: `Bearer ${owner.token}` },
          body: JSON.stringify({ type: "message", message: "/slow 200" }),
          signal: AbortSignal.timeout(60_000)
        }).then((r) => r.text())
        let interrupted = false
        for (let i = 0; i < 50 && !interrupted; i++) {
          // Polled: the turn starts on another runner, and only the interrupt's answer tells it is running there.
          await new Promise((r) => setTimeout(r, 200))
          const reply = await call(h.answers, "interrupt", `${h.runners[2]!.url}/v1/sessions/${extra.body.id}/interrupt`, { token: owner.token })
          interrupted = reply.body?.interrupted === true
        }
        return { interrupted, text: await stream }
      })
      const cut = yield* long
      if (!cut.interrupted) keepLogs(h, "interrupt")
      assert.isTrue(cut.interrupted, "no interrupt reached the running turn after the restart")
      assert.match(cut.text, /"code":"interrupted"/)

      yield* pause(2_000)
      yield* h.services.postgres.stop
      yield* pause(8_000)
      yield* h.services.postgres.start
      yield* recover("postgres stopped 8 s")

      yield* pause(2_000)
      yield* h.services.redis.flushAll
      yield* recover("redis flushall")
      const again = yield* createOnce
      assert.strictEqual(again.status, 201, again.text)
      assert.strictEqual(again.body.id, firstCreate.body.id, "a create retried with its Idempotency-Key after FLUSHALL made a second session")

      yield* pause(2_000)
      yield* h.services.redis.restart
      yield* recover("redis restart")

      // A paused runner (SIGSTOP for 12 s, no help): the others see its heartbeat stand still for 2.5 s, end its
      // database sessions and take it out of the assignment, so its shards move within 5 s (issues 26 and 33);
      // wallets of the other runners keep answering meanwhile; when it wakes, the generations it held have moved on,
      // so whatever it still tries to write is refused. The load avoids it while it is stopped, as a load
      // balancer whose health check fails would.
      yield* pause(2_000)
      const busiest = yield* Effect.promise(() => busiestRunner(h))
      const pausedAddress = addressOf(h, busiest)
      const owners = yield* Effect.promise(() => ownersOf(h, bystanders.map((u) => u.userId)))
      const elsewhere = bystanders.filter((u) => owners.get(u.userId)?.runner !== pausedAddress)
      const theirs = bystanders.filter((u) => owners.get(u.userId)?.runner === pausedAddress)
      const held = yield* Effect.promise(() =>
        h.db(`SELECT shard, generation FROM shard_generations WHERE runner = $1`, [pausedAddress])
      )
      // Warm: every bystander's wallet is active on its owner before the pause.
      for (const u of bystanders) {
        yield* Effect.promise(() => call(h.answers, "bystander", `${setup}/openapi/credit/consume`, { token: u.apiKey, body: { amount: "0.01", idempotency_key: Crypto.randomUUID() } }))
      }
      h.paused.add(busiest)
      const stoppedAt = Date.now()
      h.runners[busiest]!.signal("SIGSTOP")
      const others = chargeLoop(h, elsewhere.length > 0 ? elsewhere : bystanders, "bystander")
      const moved = yield* Effect.promise(() => shardsMoved(h, busiest, stoppedAt))
      // One of its wallets answers through another runner again (its shard acquired there).
      const ownWallet = theirs.length === 0 ? null : yield* Effect.promise(async () => {
        for (;;) {
          const reply = await call(h.answers, "probe", `${h.runners[(busiest + 1) % 3]!.url}/openapi/credit/consume`, {
            token: theirs[0]!.apiKey,
            body: { amount: "0.01", idempotency_key: Crypto.randomUUID() }
          })
          if (reply.status === 200 || Date.now() - stoppedAt > 60_000) return Date.now() - stoppedAt
          // Polled: a recovery is seen only as the first charge that goes through again.
          await new Promise((r) => setTimeout(r, 50))
        }
      })
      recoveries["paused runner: shards moved"] = moved ?? -1
      if (ownWallet !== null) recoveries["paused runner: its wallet answers elsewhere"] = ownWallet
      yield* pause(12_000 - (Date.now() - stoppedAt))
      yield* Effect.promise(() => others.stop())
      h.runners[busiest]!.signal("SIGCONT")
      h.paused.delete(busiest)
      yield* recover("paused runner woken")
      // Every shard it held before the pause was acquired since by another runner, under a newer generation.
      const after = yield* Effect.promise(() =>
        h.db(`SELECT shard, generation FROM shard_generations WHERE shard = ANY($1)`, [held.map((r) => r.shard)])
      )
      const newer = new Map(after.map((r) => [r.shard as string, BigInt(r.generation)]))
      const unmoved = held.filter((r) => !((newer.get(r.shard) ?? 0n) > BigInt(r.generation)))
      const bystanderP99 = percentile(others.latencies, 99)
      const bystanderFailures = others.statuses.filter((s) => s !== 200).length
      console.log(JSON.stringify({
        pausedHeld: held.length,
        bystanders: { wallets: elsewhere.length, charges: others.latencies.length, p50: percentile(others.latencies, 50), p99: bystanderP99, notOk: bystanderFailures },
        refusedAfterWake: (h.runners[busiest]!.output().match(/was refused|no longer owns/g) ?? []).length
      }))

      yield* pause(3_000)
      yield* Effect.promise(() => load.stop())
      keepLogs(h, "faults")
      const found = yield* Effect.promise(() => violations(h, load, sessions))
      const outages = h.answers.filter((a) => a.status === 503).length
      console.log(JSON.stringify({
        charges: load.charges.size,
        turns: load.turns,
        answers: h.answers.length,
        outages503: outages,
        slowestMs: Math.max(...h.answers.map((a) => a.ms)),
        recoveryMs: recoveries,
        reconnects: load.received.reduce((n, r) => n + r.reconnects, 0)
      }))
      assert.deepStrictEqual(found.slice(0, 30), [])
      assert.isAbove(load.turns.ended, 0)
      // The paused runner: its shards moved within 5 s of SIGSTOP (issues 26 item 2, 33 item 2), and every one it held
      // has a newer generation, which refuses its stale writes; the other runners' wallets answered all along.
      assert.isAbove(held.length, 0)
      assert.deepStrictEqual(unmoved, [], "shards of the paused runner not acquired by another runner")
      assert.isNotNull(moved, "the paused runner's shards did not move")
      assert.isAtMost(moved!, 5_000, `the paused runner's shards moved after ${moved} ms`)
      assert.isAbove(others.latencies.length, 20)
      assert.strictEqual(bystanderFailures, 0, "a wallet of another runner did not answer 200 during the pause")
      assert.isBelow(bystanderP99, 1_000, `wallets of other runners answered with p99 ${bystanderP99} ms during the pause`)
      // The outages were met (else the 503 rule above proved nothing): requests answered 503 with Retry-After.
      assert.isAbove(outages, 0)
    }), { timeout: 480_000 })
})
