import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Scope } from "effect"
import * as Crypto from "node:crypto"
import { pollUntil } from "../support/Poll.js"
import { adminQuery } from "../support/Templates.js"
import {
  agentOf,
  balanceOn,
  consume,
  endsAndLogs,
  grant,
  lastEvent,
  makeClusterShared,
  newUser,
  runner,
  runningTurns,
  send,
  seqs,
  subscribe,
  untilEnd
} from "./runners.js"
import { settled } from "./support.js"

/**
 * Issue 13: a runner that leaves. On SIGTERM it lets its turns end, then hands its sessions over; after kill -9 its cut
 * turns are closed, queued ones run, a subscriber resumes on another runner, and charges are neither lost nor doubled.
 * The runners are `dist/main.js` processes (`runners.ts`); services mode only.
 */

describe("cluster (issue 13): a runner leaves", () => {
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
      const { sessions, streams } = yield* runningTurns(a, user, agent, 10, "/slow 100")
      // B may take its grace to stop (its turns end first): more than `terminate`'s 30 s on a loaded machine.
      assert.strictEqual(yield* b.terminateWithin("75 seconds"), 0, b.output())
      const ends = yield* Effect.all(streams.map((s) => s.rest), { concurrency: "unbounded" })
      assert.deepStrictEqual(ends.map((s) => lastEvent(s).event), sessions.map(() => "run.completed"), endsAndLogs(ends, [a, b]))
      yield* settled(shared, 1)
      for (const session of sessions) {
        const next = yield* untilEnd(yield* send(a, user, session, "hello again"))
        assert.strictEqual(lastEvent(next).event, "run.completed", next.raw)
      }
      yield* Scope.close(stoppingScope, Exit.void)
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
      const { sessions, streams } = yield* runningTurns(a, user, agent, 12, "/slow 100")
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
      // Polled: the runner is killed while charges to it are in flight, once the first few have been answered.
      yield* pollUntil(Effect.sync(() => outcomes.size), (answered) => answered >= 16, "the first charges answered", { every: 20, within: 60_000 })
      yield* Effect.promise(() => c.kill())
      yield* loading.await

      // Every cut turn ends (run.failed interrupted, from the next owner), the others complete.
      const ends = yield* Effect.all(streams.map((s) => s.rest), { concurrency: "unbounded" })
      const outcomesOfTurns = ends.map((s) => `${lastEvent(s).event}:${lastEvent(s).data.code ?? ""}`)
      for (const outcome of outcomesOfTurns) assert.oneOf(outcome, ["run.completed:", "run.failed:interrupted"])
      assert.include(outcomesOfTurns, "run.failed:interrupted", "C owned none of the sessions")
      const owed = yield* Effect.all(queued.map((s) => s.rest), { concurrency: "unbounded" })
      assert.deepStrictEqual(owed.map((s) => lastEvent(s).event), sessions.map(() => "run.completed"), endsAndLogs(owed, [a, c]))
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
