import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { requestAt } from "../support/Client.js"
import { adminQuery } from "../support/Templates.js"
import {
  agentOf,
  chargedThrough,
  endsAndLogs,
  lastEvent,
  makeClusterShared,
  newUser,
  runner,
  runningTurns,
  send,
  untilEnd
} from "./runners.js"
import { settled } from "./support.js"

/**
 * Issue 13: a runner that joins takes its shards without cutting the turns running on the others, and every charge
 * sent meanwhile is answered once.
 * The runners are `dist/main.js` processes (`runners.ts`); services mode only.
 */

describe("cluster (issue 13): a runner joins", () => {
  it.scopedLive("a runner that joins takes its shards without cutting the turns running on the others, and reads during the hand-over answer within seconds", () =>
    Effect.gen(function*() {
      const shared = yield* makeClusterShared
      // A grace longer than the turns: what is measured is whether the hand-over waits, not how long it may.
      const grace = { SHUTDOWN_GRACE: "90 seconds" }
      const a = yield* runner(shared, grace)
      yield* settled(shared, 1)
      const user = yield* newUser(a)
      const agent = yield* agentOf(a, user)
      // All on A, the only runner; about half of them move to B when it joins, each once its turn (25 s) has ended.
      const { sessions, streams } = yield* runningTurns(a, user, agent, 8, "/slow 250")
      const b = yield* runner(shared, grace)
      yield* settled(shared, 2)
      // A read first wakes its session's owner; a moving session's new owner cannot start it until A lets it go, and
      // such a read waited for the 12 s entity deadline and answered 503 (issue 42: `READ_WAKE`, sessions/Follow.ts).
      const reads = yield* Effect.all(
        sessions.map((session) =>
          Effect.gen(function*() {
            const started = Date.now()
            const read = yield* requestAt(b.url, "GET", `/v1/sessions/${session}`, { token: user.token })
            return { session, status: read.status, ms: Date.now() - started }
          })),
        { concurrency: "unbounded" }
      )
      const running = yield* Effect.promise(() =>
        adminQuery(shared.databaseUrl, `SELECT count(*)::int AS n FROM runs WHERE status = 'running'`)
      )
      assert.isAbove(running[0]!.n, 0, "every turn ended before the reads were answered: nothing was being handed over")
      assert.deepStrictEqual(reads.filter((read) => read.status !== 200 || read.ms > 5_000), [], JSON.stringify(reads))
      const ends = yield* Effect.all(streams.map((s) => s.rest), { concurrency: "unbounded" })
      assert.deepStrictEqual(ends.map((s) => lastEvent(s).event), sessions.map(() => "run.completed"), endsAndLogs(ends, [a, b]))
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
      yield* chargedThrough(a, payers, () => a, 5, () =>
        Effect.gen(function*() {
          yield* runner(shared)
          yield* settled(shared, 2)
        }))
    }), { timeout: 240_000 })
})
