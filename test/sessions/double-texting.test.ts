import { Entity } from "@effect/cluster"
import { SqlClient } from "@effect/sql"
import { assert, describe, layer } from "@effect/vitest"
import { Effect, Option, Queue, Runtime } from "effect"
import fc from "fast-check"
import { SessionLive } from "../../src/sessions/Session.js"
import { KnowledgeGate, RunPayerTest } from "../support/Ports.js"
import { pollUntil } from "../support/Poll.js"
import { newEntitySession, SessionEntityEnv } from "./entity-support.js"
import { Session } from "../../src/sessions/SessionRpc.js"

/**
 * Issue 44 item 4: double-texting as a property. Random schedules of sends (each with a `multitask_strategy`),
 * interrupts and releases of the running turn drive ONE session entity in-process (builtin model, the session's real
 * log and history in the test's own database, the wallet as a test port). A gated turn holds inside its `file_search`
 * until the schedule releases it, so sends and interrupts land while a turn runs; plain turns race through. After all
 * schedules, from the database and the wallet: nothing lost (every accepted message ran and ended once, a rejected one
 * never ran), nothing misattributed (each turn's history holds its own message, its parent is the turn on the leaf
 * when it started, a rolled-back turn is on no path), nothing billed twice (each turn's run records exactly the
 * charges its own steps made, and the wallet took each step once).
 */

const RUNS = Number(process.env.DOUBLE_TEXTING_RUNS ?? 1000)


type Strategy = "enqueue" | "reject" | "interrupt" | "rollback"
type Op =
  | { readonly kind: "send"; readonly strategy: Strategy | undefined; readonly gated: boolean }
  | { readonly kind: "interrupt" }
  | { readonly kind: "release" }

const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 5, arbitrary: fc.record({
    kind: fc.constant("send" as const),
    strategy: fc.constantFrom<Strategy | undefined>(undefined, "enqueue", "reject", "interrupt", "rollback"),
    gated: fc.boolean()
  }) },
  { weight: 1, arbitrary: fc.constant({ kind: "interrupt" as const }) },
  { weight: 2, arbitrary: fc.constant({ kind: "release" as const }) }
)

const newSession = newEntitySession("dt", { searches: true })

describe("double-texting", () => {
  layer(SessionEntityEnv, { timeout: "600 seconds" })("multitask_strategy (property)", (it) => {
    it.scoped(`${RUNS} random schedules against one session: nothing lost, misattributed or billed twice`, () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const gate = yield* KnowledgeGate
        const payer = yield* RunPayerTest
        const sessionId = yield* newSession
        const session = yield* (yield* Entity.makeTestClient(Session, SessionLive))(sessionId)
        const runtime = yield* Effect.runtime<never>()

        /** What each accepted message was (by turn number), and how many messages were refused. */
        const sent = new Map<number, { message: string; strategy: Strategy | undefined }>()
        let rejected = 0
        let label = 0

        const releaseAll = Effect.gen(function*() {
          for (let next = yield* Queue.poll(gate.searches); Option.isSome(next); next = yield* Queue.poll(gate.searches)) {
            yield* next.value.answer([])
          }
        })
        /** Every accepted message has ended: released as they come. */
        const settle = Effect.suspend(() =>
          // Polled on the real clock (pollUntil pauses with a timer): the test's own clock (TestClock) does not move by itself.
          pollUntil(
            Effect.zipRight(releaseAll, sql`SELECT turn, payload->>'type' AS type, payload->>'code' AS code FROM session_events WHERE session_id = ${sessionId} AND payload->>'type' IN ('complete', 'error') ORDER BY seq`),
            (ended) => ended.length >= sent.size,
            `every accepted message ended: ${sent.size} sent (${JSON.stringify([...sent.keys()])}), the ends seen last`,
            { every: 5, within: 20_000 }
          )
        ).pipe(Effect.asVoid, Effect.orDie)

        const runSchedule = (ops: ReadonlyArray<Op>) =>
          Effect.gen(function*() {
            for (const step of ops) {
              if (process.env.DOUBLE_TEXTING_DEBUG) console.log("op", JSON.stringify(step))
              if (step.kind === "interrupt") {
                yield* session.Interrupt()
              } else if (step.kind === "release") {
                const next = yield* Queue.poll(gate.searches)
                if (Option.isSome(next)) yield* next.value.answer([])
                else yield* Effect.yieldNow()
              } else {
                const name = `m${++label}`
                const message = step.gated ? `/tool file_search ${JSON.stringify({ query: name })}` : name
                const result = yield* Effect.either(session.Send({ message, budget: null, ...(step.strategy === undefined ? {} : { strategy: step.strategy }) }))
                if (result._tag === "Left") {
                  assert.strictEqual(result.left._tag, "SessionBusy", String(result.left))
                  assert.strictEqual(step.strategy, "reject")
                  rejected += 1
                } else {
                  assert.isFalse(sent.has(result.right.turn), `turn ${result.right.turn} numbered twice`)
                  sent.set(result.right.turn, { message, strategy: step.strategy })
                }
              }
            }
            const t0 = Date.now()
            yield* settle
            if (process.env.DOUBLE_TEXTING_DEBUG) console.log(JSON.stringify(ops), Date.now() - t0, "ms")
          })

        if (process.env.DOUBLE_TEXTING_DEBUG) console.log("session ready")
        const started = Date.now()
        yield* Effect.promise(() =>
          fc.assert(
            fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 6 }), (ops) => Runtime.runPromise(runtime)(runSchedule(ops))),
            { numRuns: RUNS, seed: Number(process.env.DOUBLE_TEXTING_SEED ?? 44), endOnFailure: true }
          )
        )
        const elapsed = Date.now() - started

        // Nothing lost: every accepted message ran and ended once, in the history and the log; nothing is owed.
        const turns = yield* sql<{ turn: number; parentTurn: number | null; status: string; runId: string; messages: any }>`
          SELECT turn, parent_turn, status, run_id, messages FROM session_turns WHERE session_id = ${sessionId} ORDER BY turn`
        assert.deepStrictEqual(turns.map((t) => t.turn), [...sent.keys()].sort((a, b) => a - b), "one history row per accepted message")
        const ends = yield* sql<{ turn: number; n: number }>`
          SELECT turn, count(*)::int AS n FROM session_events
          WHERE session_id = ${sessionId} AND payload->>'type' IN ('complete', 'error') GROUP BY turn ORDER BY turn`
        assert.deepStrictEqual(ends.map((e) => [e.turn, e.n]), [...sent.keys()].sort((a, b) => a - b).map((t) => [t, 1]))
        assert.strictEqual((yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM session_queue WHERE session_id = ${sessionId}`)[0]!.n, 0)

        // Nothing misattributed: each turn holds its own message; its parent is the turn on the leaf when it started
        // (the last earlier-started turn that was not rolled back); rolled-back turns are on no path.
        const firstSeq = yield* sql<{ turn: number }>`
          SELECT turn FROM session_events WHERE session_id = ${sessionId} GROUP BY turn ORDER BY min(seq)`
        const byTurn = new Map(turns.map((t) => [t.turn, t] as const))
        let leaf: number | null = null
        for (const { turn } of firstSeq) {
          const row = byTurn.get(turn)!
          const user = (row.messages as Array<any>).find((m) => m.role === "user")
          const text = typeof user.content === "string" ? user.content : user.content.map((p: any) => p.text).join("")
          assert.strictEqual(text, sent.get(turn)!.message, `turn ${turn} holds its own message`)
          assert.strictEqual(row.parentTurn, leaf, `turn ${turn} continues the leaf it started on`)
          if (row.status !== "rolled_back") leaf = turn
        }
        const [session_] = yield* sql<{ leafTurn: number | null }>`SELECT leaf_turn FROM sessions WHERE id = ${sessionId}`
        assert.strictEqual(session_!.leafTurn, leaf, "the session's leaf is the last turn on the path")

        // Nothing billed twice: the wallet took each step once, and each turn's run recorded exactly its own steps.
        const keys = payer.charges.map((c) => c.key)
        assert.strictEqual(new Set(keys).size, keys.length)
        const runs = yield* sql<{ id: string; creditsCharged: string; status: string }>`
          SELECT id, credits_charged::text AS credits_charged, status FROM runs WHERE session_id = ${sessionId}`
        const runsById = new Map(runs.map((r) => [r.id, r] as const))
        assert.strictEqual(runs.length, turns.length, "one run per turn")
        let recorded = 0n
        for (const row of turns) {
          const run = runsById.get(row.runId)
          assert.isDefined(run, `turn ${row.turn}'s run`)
          const charged = payer.charges
            .filter((c) => c.key.startsWith(`session:${sessionId}:${row.turn}:`))
            .reduce((sum, c) => sum + c.amount, 0n)
          assert.strictEqual(BigInt(run!.creditsCharged), charged, `turn ${row.turn} (${row.status}) billed for what it used`)
          recorded += charged
        }
        assert.strictEqual(recorded, payer.charges.filter((c) => c.key.startsWith(`session:${sessionId}:`)).reduce((s, c) => s + c.amount, 0n))

        const statuses = new Map<string, number>()
        for (const row of turns) statuses.set(row.status, (statuses.get(row.status) ?? 0) + 1)
        console.log(`double-texting: ${RUNS} schedules, ${sent.size} turns (${JSON.stringify(Object.fromEntries(statuses))}), ${rejected} rejected, ${elapsed} ms`)
        if (RUNS >= 200) {
          // The schedules reached every strategy's busy case.
          assert.isAbove(rejected, 0)
          assert.isAbove(statuses.get("rolled_back") ?? 0, 0)
          assert.isAbove(statuses.get("interrupted") ?? 0, 0)
        }
      }), { timeout: 900_000 })
  })
})
