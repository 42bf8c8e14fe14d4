import { assert, describe, it, layer } from "@effect/vitest"
import { Effect } from "effect"
import { request } from "../support/Client.js"
import { pollUntil, realWait } from "../support/Poll.js"
import { makeMigratedStorage, makeSmsInbox, startServer, TestServer } from "../support/TestServer.js"
import { agentWith, apiKeyOf, assertCompleted, ENV, LIVE, newUser, runAgent } from "../runs/runs-support.js"

/**
 * Extraction is a durable workflow (issue 47 item 2, docs/memory.md "Extraction"): turns handed to it on a server
 * that stops before it ran are read by another server on the same database, folded into one model call, and billed
 * once as a `memory` ledger line.
 */

const MEMORY = { enabled: true, extraction: true, blocks: [{ label: "human", description: "Who the user is", limit: 200 }] }
const U1 = { "x-end-user-id": "u1" }

const say = (facts: ReadonlyArray<string>) => `/say ${JSON.stringify({ facts })}`

describe("memory extraction across a restart", () => {
  it.scopedLive("turns whose extraction had not run when their server stopped are extracted by the next server, billed once", () =>
    Effect.gen(function*() {
      const storage = yield* makeMigratedStorage
      const inbox = yield* makeSmsInbox

      // The first server's debounce outlasts it: its extraction never runs there.
      const first = yield* Effect.scoped(Effect.gen(function*() {
        // Its stop waits for nothing this test needs (its workflow sleeps out the debounce): the shortest grace.
        const server = yield* startServer(storage, inbox, { ...ENV, MEMORY_EXTRACTION_DEBOUNCE: "10 minutes", SHUTDOWN_GRACE: "1 second" })
        return yield* Effect.gen(function*() {
          const user = yield* newUser
          const key = yield* apiKeyOf(user)
          const agent = yield* agentWith(user.token, {}, { memory: MEMORY })
          assertCompleted(yield* runAgent({ token: key, endUser: "u1" }, agent, say(["Lives in Oslo"])))
          // The builtin model answers the newest turn's directive, which extraction reads first.
          assertCompleted(yield* runAgent({ token: key, endUser: "u1" }, agent, say(["Lives in Oslo", "Has a dog named Rex"])))
          const waiting = yield* server.query("SELECT run_id, extraction_id FROM memory_extraction_turns")
          assert.strictEqual(waiting.length, 2, JSON.stringify(waiting))
          assert.isTrue(waiting.every((row) => row.extraction_id === null), JSON.stringify(waiting))
          const seen = yield* request("GET", `/v1/memory?agent=${agent}`, { token: key, headers: U1 })
          assert.deepStrictEqual(seen.body.facts, [])
          return { key, agent, accountId: user.userId }
        }).pipe(Effect.provideService(TestServer, server))
      }))

      const server = yield* startServer(storage, inbox, { ...ENV, MEMORY_EXTRACTION_DEBOUNCE: "100 millis" })
      yield* Effect.gen(function*() {
        const facts = yield* pollUntil(
          Effect.map(request("GET", `/v1/memory?agent=${first.agent}`, { token: first.key, headers: U1 }), (seen) => {
            assert.strictEqual(seen.status, 200, seen.text)
            return seen.body.facts.map((fact: { text: string }) => fact.text) as Array<string>
          }),
          (facts) => facts.length >= 2,
          "both turns' facts extracted",
          { within: 30_000 }
        )
        assert.sameMembers(facts, ["Lives in Oslo", "Has a dog named Rex"])
        // Real wait: the other turn's workflow runs out on its own and tells no one; it finds its turn read by the
        // first one's extraction, and must bill nothing (one ledger line below).
        yield* realWait(1_000)
        const lines = yield* server.query(
          `SELECT idempotency_key, amount::text AS amount, description FROM ledger_entries WHERE kind = 'memory' AND user_id = '${first.accountId}'`
        )
        assert.strictEqual(lines.length, 1, JSON.stringify(lines))
        assert.match(String(lines[0]!.idempotency_key), /^memory:run_/)
        assert.include(String(lines[0]!.description), "2 turns")
        assert.isBelow(Number(lines[0]!.amount), 0)
        assert.strictEqual((yield* server.query("SELECT run_id FROM memory_extraction_turns")).length, 0)
      }).pipe(Effect.provideService(TestServer, server))
    }), { timeout: 120_000 })
})

describe("memory extraction and DELETE /v1/memory", () => {
  layer(TestServer.layer({ ...ENV, MEMORY_EXTRACTION_DEBOUNCE: "1500 millis" }), LIVE)((it) => {
    it.effect("everything deleted while a turn waits for extraction: the extraction writes nothing back", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const key = yield* apiKeyOf(user)
        const agent = yield* agentWith(user.token, {}, { memory: MEMORY })
        assertCompleted(yield* runAgent({ token: key, endUser: "u1" }, agent, say(["Lives in Oslo"])))
        const deleted = yield* request("DELETE", `/v1/memory?agent=${agent}`, { token: key, headers: U1 })
        assert.strictEqual(deleted.status, 200, deleted.text)
        // Real wait: past the 1.5 s debounce, and past the extraction's model call had it found the turn; an
        // extraction that finds nothing tells no one.
        yield* realWait(4_000)
        const seen = yield* request("GET", `/v1/memory?agent=${agent}`, { token: key, headers: U1 })
        assert.deepStrictEqual(seen.body.facts, [])
        const server = yield* TestServer
        assert.strictEqual((yield* server.query(`SELECT 1 FROM ledger_entries WHERE kind = 'memory' AND user_id = '${user.userId}'`)).length, 0)
      }), { timeout: 60_000 })

    it.effect("one extraction at a time per expert and end user: a later one waits for the earlier one to end", () =>
      Effect.gen(function*() {
        const server = yield* TestServer
        const user = yield* newUser
        const key = yield* apiKeyOf(user)
        const agent = yield* agentWith(user.token, {}, { memory: MEMORY })
        const waiting = (where: string) =>
          server.query(`SELECT message, extraction_id FROM memory_extraction_turns WHERE account_id = '${user.userId}' AND ${where}`)
        // The builtin model's `/slow 40` answers over 4 s, and so does the extraction that reads it.
        assertCompleted(yield* runAgent({ token: key, endUser: "u1" }, agent, "/slow 40"))
        yield* pollUntil(waiting("extraction_id IS NOT NULL"), (rows) => rows.length > 0, "the slow turn's extraction took it", { every: 50, within: 10_000 })
        assert.strictEqual((yield* waiting("extraction_id IS NOT NULL")).length, 1, "the slow turn's extraction took it")
        // A turn while it runs: its own extraction must wait until the slow one has ended.
        assertCompleted(yield* runAgent({ token: key, endUser: "u1" }, agent, say(["Has a dog named Rex"])))
        const facts: Array<unknown> = yield* pollUntil(
          Effect.map(request("GET", `/v1/memory?agent=${agent}`, { token: key, headers: U1 }), (reply) => reply.body.facts as Array<unknown>),
          (facts) => facts.length > 0,
          "the later turn's facts",
          { every: 50, within: 15_000 }
        )
        assert.strictEqual(facts.length, 1)
        assert.deepStrictEqual(yield* waiting("message LIKE '/slow%'"), [], "the later extraction wrote while the earlier one still ran")
      }), { timeout: 90_000 })
  })
})
