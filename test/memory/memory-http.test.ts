import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { fullLedger } from "../billing/billing-support.js"
import { call, callOk, connect, failed } from "../mcp/mcp-support.js"
import { request } from "../support/Client.js"
import { pollUntil } from "../support/Poll.js"
import { textOf } from "../support/Sse.js"
import { TestServer } from "../support/TestServer.js"
import {
  agentWith,
  apiKeyOf,
  assertCompleted,
  ENV,
  LIVE,
  newUser,
  only,
  resultOf,
  runAgent,
  toolDirective
} from "../runs/runs-support.js"

/**
 * Memory through the platform (issue 47): the creator's setting on `PATCH /v1/agents/:id`, the expert's tools in a
 * run, what a turn's context shows (the builtin model's `/system`), and the end user's routes.
 */

const MEMORY = {
  enabled: true,
  blocks: [
    { label: "human", description: "Who the user is", limit: 60 },
    { label: "persona", description: "How to speak to them", limit: 40, read_only: true }
  ]
}

const patchAgent = (token: string, agent: string, body: unknown) => request("PATCH", `/v1/agents/${agent}`, { token, body })

const memoryOf = (as: { token: string; endUser?: string }, agent: string) =>
  request("GET", `/v1/memory?agent=${agent}`, { token: as.token, headers: as.endUser === undefined ? {} : { "x-end-user-id": as.endUser } })

describe("memory over HTTP", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("the creator turns memory on with PATCH /v1/agents/:id; a bad setting is a 400 naming the field", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const patched = yield* patchAgent(user.token, agent, { memory: MEMORY })
        assert.strictEqual(patched.status, 200, patched.text)
        assert.deepStrictEqual(patched.body.memory, MEMORY)
        const twice = yield* patchAgent(user.token, agent, { memory: { enabled: true, blocks: [MEMORY.blocks[0], MEMORY.blocks[0]] } })
        assert.strictEqual(twice.status, 400, twice.text)
        assert.include(twice.body.error.message, "memory.blocks")
        const tooBig = yield* patchAgent(user.token, agent, { memory: { enabled: true, blocks: [{ label: "x", description: "", limit: 20_001 }] } })
        assert.strictEqual(tooBig.status, 400, tooBig.text)
        assert.include(tooBig.body.error.message, "limit")
      }))

    it.effect("the expert's tools write its memory; the next run's context has it; the user sees, edits and deletes it", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token, {}, { memory: MEMORY })
        const me = { token: user.token }

        const appended = yield* runAgent(me, agent, toolDirective("memory_append", { label: "human", text: "Name: Ada" }))
        assertCompleted(appended)
        assert.strictEqual(resultOf(appended).value, "Name: Ada")
        const fact = resultOf(yield* runAgent(me, agent, toolDirective("fact_add", { text: "Prefers Rust over Go" })))
        assert.match(fact.id, /^fact_/)
        // The model cannot write past a limit, nor a read-only block: the call fails and the run goes on.
        const over = yield* runAgent(me, agent, toolDirective("memory_append", { label: "human", text: "x".repeat(60) }))
        assert.include(only(over, "tool_call.failed").error, "limit is 60")
        assertCompleted(over)
        assert.include(only(yield* runAgent(me, agent, toolDirective("memory_append", { label: "persona", text: "Be terse" })), "tool_call.failed").error, "read-only")

        const context = textOf(yield* runAgent(me, agent, "/system"))
        assert.include(context, "Answer briefly.")
        assert.include(context, `<block label="human" chars="9" limit="60">`)
        assert.include(context, "Name: Ada")
        assert.include(context, `[${fact.id}] Prefers Rust over Go`)

        const superseded = resultOf(yield* runAgent(me, agent, toolDirective("fact_supersede", { id: fact.id, text: "Prefers Zig now" })))
        const found = resultOf(yield* runAgent(me, agent, toolDirective("memory_search", { query: "prefers" })))
        assert.deepStrictEqual(found.facts.map((f: any) => f.text), ["Prefers Zig now"])
        const nowContext = textOf(yield* runAgent(me, agent, "/system"))
        assert.include(nowContext, "Prefers Zig now")
        assert.notInclude(nowContext, "Prefers Rust over Go")

        const seen = yield* memoryOf(me, agent)
        assert.strictEqual(seen.status, 200, seen.text)
        assert.deepStrictEqual(seen.body.blocks.map((b: any) => [b.label, b.value, b.limit, b.version]), [["human", "Name: Ada", 60, 1], ["persona", "", 40, 0]])
        assert.deepStrictEqual(
          seen.body.facts.map((f: any) => [f.id, f.text, f.superseded_at === null]),
          [[superseded.id, "Prefers Zig now", true], [fact.id, "Prefers Rust over Go", false]]
        )

        // The user edits a block (read-only ones too), within its limit; the previous value is kept.
        const edited = yield* request("PATCH", `/v1/memory/blocks/human?agent=${agent}`, { token: user.token, body: { value: "Name: Ada L." } })
        assert.strictEqual(edited.status, 200, edited.text)
        assert.strictEqual(edited.body.version, 2)
        const persona = yield* request("PATCH", `/v1/memory/blocks/persona?agent=${agent}`, { token: user.token, body: { value: "Be terse" } })
        assert.strictEqual(persona.status, 200, persona.text)
        const tooLong = yield* request("PATCH", `/v1/memory/blocks/human?agent=${agent}`, { token: user.token, body: { value: "y".repeat(61) } })
        assert.strictEqual(tooLong.status, 400, tooLong.text)
        assert.strictEqual(tooLong.body.error.type, "invalid_request")
        const noBlock = yield* request("PATCH", `/v1/memory/blocks/nope?agent=${agent}`, { token: user.token, body: { value: "x" } })
        assert.strictEqual(noBlock.status, 404, noBlock.text)

        const exported = yield* request("GET", `/v1/memory/export?agent=${agent}`, { token: user.token })
        assert.strictEqual(exported.status, 200, exported.text)
        const human = exported.body.blocks.find((b: any) => b.label === "human")
        assert.deepStrictEqual(human.versions.map((v: any) => [v.version, v.value, v.written_by]), [[1, "Name: Ada", "model"], [2, "Name: Ada L.", "user"]])
        assert.strictEqual(exported.body.facts.length, 2)

        // A deleted fact is in no search and not in the next turn's context.
        const deleted = yield* request("DELETE", `/v1/memory/facts/${superseded.id}?agent=${agent}`, { token: user.token })
        assert.deepStrictEqual([deleted.status, deleted.body], [200, { id: superseded.id, deleted: true }])
        assert.strictEqual((yield* request("DELETE", `/v1/memory/facts/${superseded.id}?agent=${agent}`, { token: user.token })).status, 404)
        assert.deepStrictEqual(resultOf(yield* runAgent(me, agent, toolDirective("memory_search", { query: "Zig" }))).facts, [])
        assert.notInclude(textOf(yield* runAgent(me, agent, "/system")), "Zig")

        // Everything deleted: nothing left anywhere.
        const all = yield* request("DELETE", `/v1/memory?agent=${agent}`, { token: user.token })
        assert.deepStrictEqual(all.body, { agent, deleted: true, blocks: 2, facts: 1 })
        const after = textOf(yield* runAgent(me, agent, "/system"))
        assert.notInclude(after, "Ada")
        assert.notInclude(after, "Be terse")
        assert.notInclude(after, "Rust")
        const empty = yield* memoryOf(me, agent)
        assert.deepStrictEqual(empty.body.facts, [])
        assert.isTrue(empty.body.blocks.every((b: any) => b.value === "" && b.version === 0))
      }))

    it.effect("an expert without memory shows none in its context; memory_save still adds a fact the user can see", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token, { memory_save: "allow", memory_search: "allow" })
        const saved = resultOf(yield* runAgent({ token: user.token }, agent, toolDirective("memory_save", { text: "Likes tea" })))
        assert.isTrue(saved.saved)
        assert.notInclude(textOf(yield* runAgent({ token: user.token }, agent, "/system")), "<memory>")
        const seen = yield* memoryOf({ token: user.token }, agent)
        assert.deepStrictEqual([seen.body.enabled, seen.body.blocks, seen.body.facts.map((f: any) => f.text)], [false, [], ["Likes tea"]])
        // Without memory enabled the block tools are not the expert's.
        const denied = yield* runAgent({ token: user.token }, agent, toolDirective("fact_add", { text: "x" }))
        assert.include(textOf(denied), "not available")
      }))

    it.effect("extraction: after a turn one model call proposes facts, written as the model's, billed as a memory ledger line", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token, {}, { memory: { ...MEMORY, extraction: true } })
        const before = (yield* fullLedger(user.token)).length
        // The builtin model is directive-driven: the turn's `/say` is what both the turn and its extraction answer.
        const proposal = { facts: ["Lives in Oslo"], blocks: [{ label: "human", append: "Name: Bo" }, { label: "human", append: "x".repeat(80) }] }
        const turn = yield* runAgent({ token: user.token }, agent, `/say ${JSON.stringify(proposal)}`)
        assertCompleted(turn)
        // Off the turn's path: the turn is over before extraction ran (it waits out its debounce first).
        assert.deepStrictEqual((yield* memoryOf({ token: user.token }, agent)).body.facts, [])
        // Written in order: facts, supersessions, then block edits (the last one refused).
        const seen: any = yield* pollUntil(
          Effect.map(memoryOf({ token: user.token }, agent), (reply) => reply.body),
          (seen: any) => seen.facts.length > 0 && seen.blocks.find((b: any) => b.label === "human").version > 0,
          "the extraction written",
          { within: 10_000 }
        )
        assert.deepStrictEqual(seen.facts.map((f: any) => f.text), ["Lives in Oslo"])
        // Its block append within the limit was kept, the one past it refused.
        assert.strictEqual(seen.blocks.find((b: any) => b.label === "human").value, "Name: Bo")
        const ledger = yield* fullLedger(user.token)
        const lines = ledger.slice(0, ledger.length - before)
        assert.deepStrictEqual(lines.filter((line) => line.kind === "memory").length, 1, JSON.stringify(lines))
        assert.isBelow(lines.find((line) => line.kind === "memory")!.amount, 0)
      }))

    it.scoped("configure_memory (MCP): the creator sets and reads the configuration and aggregate use, never content", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const client = yield* connect({ bearer: user.token })
        const set = yield* callOk(client, "configure_memory", { identifier: agent, enabled: true, blocks: MEMORY.blocks })
        assert.deepStrictEqual(set, { identifier: agent, memory: MEMORY, usage: { end_users: 0, facts: 0, blocks: 0 } })
        const key = yield* apiKeyOf(user)
        yield* runAgent({ token: key, endUser: "erin" }, agent, toolDirective("fact_add", { text: "Erin's secret is zebra-moon" }))
        yield* runAgent({ token: key, endUser: "finn" }, agent, toolDirective("memory_append", { label: "human", text: "Finn" }))
        const read = yield* callOk(client, "configure_memory", { identifier: agent })
        assert.deepStrictEqual(read.usage, { end_users: 2, facts: 1, blocks: 1 })
        // A word no identifier or count can contain by chance (a random identifier once held "42").
        assert.notInclude(JSON.stringify(read), "zebra-moon")
        assert.notInclude(JSON.stringify(read), "Finn")
        // Someone else's expert is not theirs to configure.
        const stranger = yield* newUser
        const theirs = yield* connect({ bearer: stranger.token })
        failed(yield* call(theirs, "configure_memory", { identifier: agent, enabled: false }))
        const bad = yield* call(client, "configure_memory", { identifier: agent, blocks: [{ label: "Bad Label", description: "", limit: 10 }] })
        failed(bad, "label")
      }))

    it.effect("an API key must name its end user on memory routes; an unknown expert is 404", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const key = yield* apiKeyOf(user)
        const agent = yield* agentWith(user.token, {}, { memory: MEMORY })
        const missing = yield* request("GET", `/v1/memory?agent=${agent}`, { token: key })
        assert.strictEqual(missing.status, 400, missing.text)
        assert.include(missing.body.error.message, "X-End-User-Id")
        assert.strictEqual((yield* memoryOf({ token: key, endUser: "alice" }, agent)).status, 200)
        assert.strictEqual((yield* memoryOf({ token: user.token }, "no-such-expert")).status, 404)
      }))
  })
})
