import { Entity } from "@effect/cluster"
import { SqlClient } from "@effect/sql"
import { SqlError } from "@effect/sql/SqlError"
import { assert, describe, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { SessionLive } from "../../src/sessions/Session.js"
import { newEntitySession, SessionEntityEnv } from "./entity-support.js"
import { Session } from "../../src/sessions/SessionRpc.js"
import { pollUntil } from "../support/Poll.js"

/**
 * A run's row is never in a session's log without its `run.created` (issue 42 item 7: "every run row has its
 * events"). The database refuses the writes that carry a turn's `preparing` event without its end, as a PostgreSQL
 * restart refuses whatever is written while it is down: the turn stops (`storage_unavailable`) and its end, written
 * again once the session read its position, is the first write of the turn that commits. It writes the run's row;
 * `run.created` must come with it.
 */


const newSession = newEntitySession("records", { searches: false })

/**
 * The test's database client, except that the session log's statement (`commitLog`) fails while it carries a
 * `preparing` event and no end (`complete`/`error`): what a database that went down as the turn began refuses.
 */
const refusingStarts = Effect.map(SqlClient.SqlClient, (sql) => {
  const refused = { count: 0, armed: true }
  const client = new Proxy(sql, {
    apply(target, self, args: Array<unknown>) {
      const strings = args[0] as ReadonlyArray<string> | undefined
      const values = args.slice(1).filter((v): v is string => typeof v === "string")
      const isLog = Array.isArray(strings) && strings[0]?.includes("jsonb_to_recordset") === true
      const starts = values.some((v) => v.includes(`"type":"preparing"`))
      const ends = values.some((v) => v.includes(`"type":"complete"`) || v.includes(`"type":"error"`))
      if (refused.armed && isLog && starts && !ends) {
        refused.count += 1
        return Effect.fail(new SqlError({ message: "the database refused the write (test)" }))
      }
      return Reflect.apply(target, self, args)
    }
  })
  return { client, refused }
})

const eventsOf = (sessionId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ seq: string; turn: number; type: string; runId: string | null; code: string | null }>`
      SELECT seq::text AS seq, turn, payload->>'type' AS type, payload->>'run_id' AS run_id, payload->>'code' AS code
      FROM session_events WHERE session_id = ${sessionId} ORDER BY session_events.seq`).pipe(Effect.orDie)

describe("session run records", () => {
  layer(SessionEntityEnv, { timeout: "60 seconds", excludeTestServices: true })("a run's row and its events", (it) => {
    it.scoped("a run whose run.created was lost with a failed write gets it again with its turn's end", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const sessionId = yield* newSession
        const { client, refused } = yield* refusingStarts
        const live = SessionLive.pipe(Layer.provide(Layer.succeed(SqlClient.SqlClient, client)))
        const session = yield* (yield* Entity.makeTestClient(Session, live))(sessionId)
        assert.deepStrictEqual(yield* session.Send({ message: "hello", budget: null }), { turn: 1 })
        // The turn's end is tried again 0.2 s after the refusal (END_RETRY): waited for in the log.
        const events = yield* pollUntil(eventsOf(sessionId), (log) => log.some((e) => e.type === "complete" || e.type === "error"), "the turn's end in its log", { every: 50, within: 15_000 })
        assert.isAtLeast(refused.count, 1, "the turn's start was refused")
        const runs = yield* sql<{ id: string; status: string }>`SELECT id, status FROM runs WHERE session_id = ${sessionId}`
        assert.strictEqual(runs.length, 1, "the run is recorded")
        const run = runs[0]!
        // Its turn's log: run.created naming the run, then the end, with no hole in `seq`.
        const end = events.at(-1)!
        assert.deepStrictEqual(events.map((e) => [e.turn, e.type, e.runId]), [
          [1, "preparing", run.id],
          [1, end.type, null]
        ])
        assert.deepStrictEqual(events.map((e) => Number(e.seq)), [1, 2])
        assert.strictEqual(run.status === "completed", end.type === "complete", `run ${run.status}, log ${end.type}`)
        // The session goes on: with the database answering again, the next turn writes as usual.
        refused.armed = false
        assert.deepStrictEqual(yield* session.Send({ message: "again", budget: null }), { turn: 2 })
        yield* pollUntil(eventsOf(sessionId), (log) => log.some((e) => e.turn === 2 && e.type === "complete"), "the second turn's end", { every: 50, within: 15_000 })
        const second = (yield* eventsOf(sessionId)).filter((e) => e.turn === 2)
        assert.strictEqual(second[0]!.type, "preparing")
        assert.strictEqual(second.at(-1)!.type, "complete")
        assert.strictEqual(Number(second[0]!.seq), 3, "seq goes on after the end written again")
      }).pipe(Effect.orDie))
  })
})
