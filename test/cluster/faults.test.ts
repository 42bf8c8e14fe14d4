import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Crypto from "node:crypto"
import {
  bounded,
  call,
  faultOwner,
  keepLogs,
  makeHarness,
  newUser,
  recovery,
  runViolations,
  settled,
  startLoad,
  summary,
  violations
} from "../support/Faults.js"
import { servicesAvailable } from "../support/Services.js"

/**
 * Issues 26, 33 and 42, the short fault checker (CI: `FAULTS=1`, see .ci/run; `bench/faults.ts` is the long one).
 * Three runners from `dist/` over a PostgreSQL and a Redis of the test's own (test/support/Services.ts: the machine's
 * shared ones are never restarted), under charges on four wallets, turns on three sessions and two held
 * subscriptions per session on runners other than the sender. Faults, one after the other, in one harness: a
 * PostgreSQL restart (`pg_ctl restart -m fast`), PostgreSQL stopped for 8 s, a Redis FLUSHALL, a Redis restart; then
 * of the busiest owner (most shard locks): kill -9 (and a replacement runner), SIGSTOP, the split brain (SIGSTOP, its
 * database sessions ended from outside with `pg_terminate_backend`, SIGCONT), SIGSTOP again. Each owner fault has a
 * charge in flight to the stopped owner and a turn running on it that is interrupted through another runner; each
 * pause also an interrupt during the hand-over back (`faultOwner` in test/support/Faults.ts).
 *
 * What fails it (issue 42 item 7): any recovery over 5 s (every runner answering after a fault; the stopped owner's
 * shards moved, its wallet answering elsewhere, the charge in flight answered, its session answering elsewhere); an
 * interrupt answered `{"interrupted": false}` while its turn went on; after every fault, a run whose status or credits
 * differ from its log and the ledger, or a run without its events. At the end, the invariants: every request
 * answered 2xx or 503 with Retry-After within 15 s (a connection cut only by the kill), every charge in the ledger
 * once (those not answered 200 are retried with their key), balances equal to their ledgers, no `seq` gap, one end
 * per turn, every held subscriber got every event once and in order.
 */
// FAULTS=1 asks for this check: a missing prerequisite then fails it, so CI is never green with nothing run.
const enabled = process.env.FAULTS === "1"

describe.skipIf(!enabled)("faults (issues 26, 33, 42)", () => {
  it("has its prerequisites: PostgreSQL's binaries and redis-server, to start services of its own", () => {
    assert.isTrue(servicesAvailable, "FAULTS=1, but this machine cannot start a PostgreSQL (initdb) and a Redis of its own")
  })
  it.scopedLive("three runners under load keep every promise through database, Redis and owner faults", () =>
    Effect.gen(function*() {
      const began = Date.now()
      const h = yield* makeHarness(3)
      // The runners' output, whatever the outcome (FAULTS_LOG_DIR), before the harness stops them.
      yield* Effect.addFinalizer(() => Effect.sync(() => keepLogs(h, "final")))
      yield* settled(h, 3)
      const owner = yield* newUser(h)
      const payers = yield* Effect.all(Array.from({ length: 4 }, () => newUser(h)))
      // Wallets charged only while an owner is stopped: those it does not own must keep answering.
      const bystanders = yield* Effect.all(Array.from({ length: 8 }, () => newUser(h)))
      // The owner faults' probe wallets (grown until the stopped owner owns one).
      const probes = yield* Effect.all(Array.from({ length: 3 }, () => newUser(h)))
      const setup = h.runners[0]!.url
      const agent = yield* Effect.promise(() =>
        call(h.answers, "setup", `${setup}/v1/agents`, { token: owner.token, body: { name: "Faults", instructions: "Answer briefly." } })
      )
      assert.strictEqual(agent.status, 201, agent.text)
      const newSession = Effect.promise(async () => {
        const created = await call(h.answers, "setup", `${setup}/v1/sessions`, { token: owner.token, body: { agent: agent.body.identifier } })
        assert.strictEqual(created.status, 201, created.text)
        return created.body.id as string
      })
      const sessions = yield* Effect.all(Array.from({ length: 3 }, () => newSession))
      // Sessions outside the load, for the owner faults' long turns and probes (grown as needed).
      const spare = yield* Effect.all(Array.from({ length: 9 }, () => newSession))
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
      const recoveries: Record<string, number | null> = {}
      // Real time under load between faults: the runners must serve the load for a while before the next one.
      const pause = (ms: number) => Effect.sleep(`${ms} millis`)
      // Every runner answers a charge and a session read within 5 s of the fault's end; then every run agrees with
      // its log and the ledger.
      const recover = (fault: string) =>
        Effect.promise(async () => {
          const ms = await recovery(h, payers[0]!, owner, sessions[0]!).catch(() => null)
          recoveries[fault] = ms
          bounded(h, `${fault}: every runner answers again`, ms)
          for (const v of await runViolations(h)) h.broken.push(`after ${fault}: ${v}`)
        })

      yield* pause(3_000)
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

      // The busiest owner: killed, then paused three times (the second a split brain). See `faultOwner`.
      const context = {
        owner,
        agent: agent.body.identifier as string,
        payer: payers[0]!,
        session: sessions[0]!,
        wallets: probes,
        sessions: spare,
        bystanders
      }
      const owners: Array<Record<string, unknown>> = []
      yield* pause(2_000)
      owners.push(yield* faultOwner(h, { name: "kill -9", kind: "kill" }, context))
      yield* settled(h, 3)
      yield* pause(2_000)
      owners.push(yield* faultOwner(h, { name: "pause 1", kind: "pause", pauseMs: 9_000 }, context))
      // Each fault from a settled cluster, as after the kill: a woken runner serves its stale wallets (503, refused by
      // their fence) until its lock refresh gives them up and its shards come back (issue 42, docs/testing.md "The
      // fault checker"); a fault begun before that counted those 503s against its own bystanders (CI, session 24).
      yield* settled(h, 3)
      yield* pause(2_000)
      owners.push(yield* faultOwner(h, { name: "split brain", kind: "split", pauseMs: 9_000, cutAfterMs: 1_000 }, context))
      yield* settled(h, 3)
      yield* pause(2_000)
      owners.push(yield* faultOwner(h, { name: "pause 3", kind: "pause", pauseMs: 9_000 }, context))

      yield* pause(3_000)
      yield* Effect.promise(() => Promise.all(h.pending))
      yield* Effect.promise(() => load.stop())
      keepLogs(h, "faults")
      const found = yield* Effect.promise(() => violations(h, load, sessions, { cutsAllowed: true }))
      const outages = h.answers.filter((a) => a.status === 503).length
      console.log(JSON.stringify({
        seconds: Math.round((Date.now() - began) / 1000),
        charges: load.charges.size,
        turns: load.turns,
        answers: h.answers.length,
        outages503: outages,
        slowestMs: Math.max(...h.answers.map((a) => a.ms)),
        recoveryMs: recoveries,
        owners,
        handOverInterrupts: h.interrupts.filter((c) => c.what.includes("hand-over")).map(summary),
        reconnects: load.received.reduce((n, r) => n + r.reconnects, 0)
      }))
      if (h.broken.length > 0) console.log(`broken promises:\n${h.broken.join("\n")}`)
      if (h.late.length > 0) console.log(`timing promises missed (FAULTS_TIMING=report: reported, not failed):\n${h.late.join("\n")}`)
      // The pauses had a charge in flight to the stopped owner (answered only once its shards moved).
      const held = owners.filter((o) => o.fault !== "kill -9" && (o.chargeInFlight as { held: boolean }).held).length
      assert.isAtLeast(held, 2, "fewer than two pauses had a charge in flight to the stopped owner")
      assert.deepStrictEqual(found.slice(0, 30), [])
      assert.deepStrictEqual(h.broken, [])
      assert.isAbove(load.turns.ended, 0)
      // The outages were met (else the 503 rule above proved nothing): requests answered 503 with Retry-After.
      assert.isAbove(outages, 0)
    }), { timeout: 480_000 })
})
