import { Entity } from "@effect/cluster"
import { SqlClient } from "@effect/sql"
import { assert, describe, layer } from "@effect/vitest"
import { Deferred, Effect, Queue } from "effect"
import { SessionLive } from "../../src/sessions/Session.js"
import { KnowledgeGate } from "../support/Ports.js"
import { newEntitySession, SessionEntityEnv } from "./entity-support.js"
import { Session } from "../../src/sessions/SessionRpc.js"

/**
 * The session entity on its own (issue 29 item 5): `Entity.makeTestClient` runs its behaviour in the test, with no
 * runner and no shard, against a database of the test's own, with the ports (`RunPayer`, `KnowledgeSearch`, ...) as
 * test layers. Each turn calls `file_search`, and the gated knowledge base holds it until the test answers: a turn
 * that started is an event the test waits for (`KnowledgeGate.searches`), never a sleep. The HTTP suites
 * (test/sessions/*.test.ts) show the same through the whole platform.
 */


const newSession = newEntitySession("session", { searches: true })

/** A turn that searches its knowledge for `label`. */
const searchTurn = (label: string) => ({ message: `/tool file_search ${JSON.stringify({ query: label })}`, budget: null })

/** The next `file_search` call to start, in any session: the event a test waits for. */
const nextSearch = Effect.flatMap(KnowledgeGate, (gate) => Queue.take(gate.searches))
const pending = Effect.flatMap(KnowledgeGate, (gate) => Queue.size(gate.searches))

const turns = (sessionId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ turn: number; status: string }>`SELECT turn, status FROM session_turns WHERE session_id = ${sessionId} ORDER BY turn`).pipe(
      Effect.orDie,
      Effect.map((rows) => rows.map((r) => [r.turn, r.status] as const))
    )

const errorCodes = (sessionId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ turn: number; code: string }>`
      SELECT turn, payload->>'code' AS code FROM session_events
      WHERE session_id = ${sessionId} AND payload->>'type' = 'error' ORDER BY seq`).pipe(
      Effect.orDie,
      Effect.map((rows) => rows.map((r) => [r.turn, r.code] as const))
    )

const queued = (sessionId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ turn: number }>`SELECT turn FROM session_queue WHERE session_id = ${sessionId} ORDER BY turn`).pipe(
      Effect.orDie,
      Effect.map((rows) => rows.map((r) => r.turn))
    )

// Both modes. This file runs in vitest's `entity` project (vitest.config.ts): after a services-mode platform file in
// the same worker, Cluster.ts's module-level fence state took this stand-alone entity for a runner's that lost its
// shard, and every turn waited on `takeFence` forever.
describe("Session entity on its own", () => {
  layer(SessionEntityEnv, { timeout: "60 seconds" })("Session entity (makeTestClient)", (it) => {
    it.scoped("turns queue: one runs at a time, in the order sent, each after the previous one ended", () =>
      Effect.gen(function*() {
        const sessionId = yield* newSession
        const session = yield* (yield* Entity.makeTestClient(Session, SessionLive))(sessionId)
        assert.deepStrictEqual(yield* session.Send(searchTurn("one")), { turn: 1 })
        assert.deepStrictEqual(yield* session.Send(searchTurn("two")), { turn: 2 })
        assert.deepStrictEqual(yield* session.Send(searchTurn("three")), { turn: 3 })
        // Sent turns are durable before they run.
        const first = yield* nextSearch
        assert.strictEqual(first.query, "one")
        assert.isTrue(yield* session.Wake({}), "a turn is running")
        assert.deepStrictEqual(yield* queued(sessionId), [1, 2, 3])
        assert.strictEqual(yield* pending, 0, "the second turn waits for the first")
        yield* first.answer([])
        const second = yield* nextSearch
        assert.strictEqual(second.query, "two")
        // The first turn's end was written before the second began.
        assert.deepStrictEqual(yield* turns(sessionId), [[1, "completed"]])
        assert.deepStrictEqual(yield* queued(sessionId), [2, 3])
        yield* second.answer([])
        const third = yield* nextSearch
        assert.strictEqual(third.query, "three")
        assert.deepStrictEqual(yield* turns(sessionId), [[1, "completed"], [2, "completed"]])
        yield* third.answer([])
      }))
  
    it.scoped("Interrupt stops the running turn (run.failed: interrupted) and the next turn runs", () =>
      Effect.gen(function*() {
        const sessionId = yield* newSession
        const session = yield* (yield* Entity.makeTestClient(Session, SessionLive))(sessionId)
        assert.isFalse(yield* session.Interrupt(), "nothing to interrupt")
        yield* session.Send(searchTurn("long"))
        yield* session.Send(searchTurn("next"))
        const long = yield* nextSearch
        assert.isTrue(yield* session.Interrupt())
        // The search itself was cut, not left to finish.
        yield* Deferred.await(long.interrupted)
        const next = yield* nextSearch
        assert.strictEqual(next.query, "next")
        assert.deepStrictEqual(yield* turns(sessionId), [[1, "interrupted"]])
        assert.deepStrictEqual(yield* errorCodes(sessionId), [[1, "interrupted"]])
        yield* next.answer([])
      }))
  
    it.scoped("passivated mid-turn and activated again: the cut turn ends as interrupted, the queued one runs", () =>
      Effect.gen(function*() {
        const sessionId = yield* newSession
        // The first activation: its scope closes at the end of this block, as a passivated entity's does.
        yield* Effect.scoped(Effect.gen(function*() {
          const session = yield* (yield* Entity.makeTestClient(Session, SessionLive))(sessionId)
          yield* session.Send(searchTurn("cut"))
          yield* session.Send(searchTurn("owed"))
          const cut = yield* nextSearch
          assert.strictEqual(cut.query, "cut")
        }))
        // Nothing ended the turns: they are still owed.
        assert.deepStrictEqual(yield* turns(sessionId), [])
        assert.deepStrictEqual(yield* queued(sessionId), [1, 2])
  
        const session = yield* (yield* Entity.makeTestClient(Session, SessionLive))(sessionId)
        // Activation closes the turn that was in flight and runs the one that waited, under its own number.
        const owed = yield* nextSearch
        assert.strictEqual(owed.query, "owed")
        assert.deepStrictEqual(yield* errorCodes(sessionId), [[1, "interrupted"]])
        assert.deepStrictEqual(yield* queued(sessionId), [2])
        yield* owed.answer([])
        assert.deepStrictEqual(yield* session.Send(searchTurn("after")), { turn: 3 })
        const after = yield* nextSearch
        assert.deepStrictEqual(yield* turns(sessionId), [[2, "completed"]])
        yield* after.answer([])
      }))
  
    it.scoped("Stop ends the session: the running and queued turns are dropped, and later sends are SessionGone", () =>
      Effect.gen(function*() {
        const sessionId = yield* newSession
        const session = yield* (yield* Entity.makeTestClient(Session, SessionLive))(sessionId)
        yield* session.Send(searchTurn("running"))
        yield* session.Send(searchTurn("waiting"))
        const running = yield* nextSearch
        assert.isTrue(yield* session.Stop())
        yield* Deferred.await(running.interrupted)
        const gone = yield* Effect.flip(session.Send(searchTurn("late")))
        assert.strictEqual(gone._tag, "SessionGone")
        assert.strictEqual(yield* pending, 0, "the waiting turn never ran")
      }))
  
    it.scoped("Reload tells whether the session still exists", () =>
      Effect.gen(function*() {
        const sessionId = yield* newSession
        const session = yield* (yield* Entity.makeTestClient(Session, SessionLive))(sessionId)
        assert.isTrue(yield* session.Reload())
        const missing = yield* (yield* Entity.makeTestClient(Session, SessionLive))("ses_missing")
        assert.isFalse(yield* missing.Reload())
        const gone = yield* Effect.flip(missing.Send(searchTurn("x")))
        assert.strictEqual(gone._tag, "SessionGone")
      }))
  })
})
