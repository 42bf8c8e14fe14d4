import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { textOf } from "../support/Sse.js"
import { TestServer } from "../support/TestServer.js"
import {
  agentWith,
  apiKeyOf,
  assertCompleted,
  assertInOrder,
  ENV,
  LIVE,
  names,
  newUser,
  only,
  payloads,
  resultOf,
  runAgent,
  toolDirective
} from "./runs-support.js"

/**
 * The built-in tools over `POST /v1/agents/run` with the builtin model's `/tool NAME {json}` directive (issue 5 item
 * 6): the lifecycle of a tool call on the stream, a tool error that the model recovers from, and the workspace and
 * memory, partitioned per end user.
 */

const ALL_TOOLS = {
  get_time: "allow",
  calculator: "allow",
  write_file: "allow",
  read_file: "allow",
  list_files: "allow",
  memory_save: "allow",
  memory_search: "allow"
} as const

/** The lifecycle of one successful tool call, then the model's second turn, then run.completed. */
const TOOL_LIFECYCLE = [
  "run.created",
  "run.in_progress",
  "tool_call.created",
  "tool_call.arguments.delta",
  "usage.token",
  "tool_call.in_progress",
  "tool_call.completed",
  "tool_call.result",
  "run.in_progress",
  "output.text.delta",
  "usage.token",
  "run.completed"
]

describe("tools", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("calculator: created -> arguments.delta -> in_progress -> completed -> result, then the model goes on", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token, { calculator: "allow" })
        const args = { expression: "(2 + 3) * 4 - 2 ^ 3" }
        const stream = yield* runAgent(user, agent, toolDirective("calculator", args))
        assertInOrder(stream, TOOL_LIFECYCLE)
        // Exactly one of each per call, all about the same call.
        const created = only(stream, "tool_call.created")
        assert.match(created.tool_call_id, /^call_/)
        assert.strictEqual(created.name, "calculator")
        assert.strictEqual(created.status, "pending")
        const id = created.tool_call_id
        const deltas = payloads(stream, "tool_call.arguments.delta")
        assert.isAbove(deltas.length, 0)
        for (const delta of deltas) assert.strictEqual(delta.tool_call_id, id)
        assert.deepStrictEqual(JSON.parse(deltas.map((d) => d.delta).join("")), args, "the streamed arguments join to the call's")
        assert.deepStrictEqual(only(stream, "tool_call.in_progress"), { ...only(stream, "tool_call.in_progress"), tool_call_id: id, name: "calculator", status: "running" })
        assert.strictEqual(only(stream, "tool_call.completed").status, "completed")
        assert.strictEqual(only(stream, "tool_call.completed").tool_call_id, id)
        const result = only(stream, "tool_call.result")
        assert.strictEqual(result.tool_call_id, id)
        assert.deepStrictEqual(result.output, { expression: args.expression, result: 12 })
        assert.notInclude(names(stream), "tool_call.failed")
        // Two model calls: two turns, two usage reports; the second turn reads the result.
        assert.deepStrictEqual(payloads(stream, "run.in_progress").map((p) => p.turn), [1, 2])
        assert.strictEqual(payloads(stream, "usage.token").length, 2)
        assert.include(textOf(stream), "Calling calculator.")
        assert.include(textOf(stream), `calculator returned: {"expression":"(2 + 3) * 4 - 2 ^ 3","result":12}`)
        assertCompleted(stream)
      }))

    it.effect("get_time answers the current UTC time", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token, { get_time: "allow" })
        const before = Date.now()
        const stream = yield* runAgent(user, agent, "/tool get_time {}")
        assertInOrder(stream, TOOL_LIFECYCLE)
        const output = resultOf(stream)
        assert.strictEqual(output.timezone, "UTC")
        const at = Date.parse(output.iso)
        assert.isAtLeast(at, before - 1000)
        assert.isAtMost(at, Date.now() + 1000)
        assert.strictEqual(output.unix, Math.floor(at / 1000))
        assert.match(output.iso, /Z$/)
      }))

    it.effect("calculator with a malformed expression: tool_call.failed, and the run goes on to run.completed", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token, { calculator: "allow" })
        for (const expression of ["2 +* 3", "1 / 0", "rm -rf /"]) {
          const stream = yield* runAgent(user, agent, toolDirective("calculator", { expression }))
          assertInOrder(stream, ["tool_call.created", "tool_call.arguments.delta", "tool_call.in_progress", "tool_call.failed", "run.in_progress", "output.text.delta", "run.completed"])
          const failed = only(stream, "tool_call.failed")
          assert.strictEqual(failed.status, "failed")
          assert.strictEqual(failed.name, "calculator")
          assert.strictEqual(failed.tool_call_id, only(stream, "tool_call.created").tool_call_id)
          assert.match(failed.error, /^Invalid expression/)
          // A tool that ran and failed has no result and was not denied.
          assert.notInclude(names(stream), "tool_call.completed")
          assert.notInclude(names(stream), "tool_call.result")
          assert.notInclude(names(stream), "tool_call.denied")
          assert.include(textOf(stream), "calculator did not run: Invalid expression")
          assertCompleted(stream)
        }
        // Arguments that do not fit the tool are a tool error too, not a failed run.
        const wrong = yield* runAgent(user, agent, toolDirective("calculator", { expr: "1 + 1" }))
        assert.include(only(wrong, "tool_call.failed").error, "Invalid arguments for calculator: expression")
        assertCompleted(wrong)
        const notJson = yield* runAgent(user, agent, "/tool calculator {not json")
        assert.strictEqual(payloads(notJson, "tool_call.failed").length, 1)
        assertCompleted(notJson)
      }))

    it.effect("a tool the agent does not list is never called", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token, { calculator: "allow" })
        const stream = yield* runAgent(user, agent, toolDirective("write_file", { path: "a.txt", content: "x" }))
        assert.isFalse(names(stream).some((name) => name.startsWith("tool_call.")), names(stream).join(", "))
        assert.strictEqual(textOf(stream), "The tool write_file is not available to this agent.")
        assertCompleted(stream)
      }))

    it.effect("write_file, then read_file and list_files in later runs see the file", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const writer = yield* agentWith(user.token, ALL_TOOLS)
        const content = "line one\nline two ✓"
        const written = yield* runAgent(user, writer, toolDirective("write_file", { path: "notes/todo.md", content }))
        assertInOrder(written, TOOL_LIFECYCLE)
        assert.deepStrictEqual(resultOf(written), { path: "notes/todo.md", bytes: Buffer.byteLength(content) })
        yield* runAgent(user, writer, toolDirective("write_file", { path: "b.txt", content: "bee" }))

        const read = yield* runAgent(user, writer, toolDirective("read_file", { path: "notes/todo.md" }))
        assert.deepStrictEqual(resultOf(read), { path: "notes/todo.md", content })
        // The workspace is the caller's, not the agent's: another agent of the same caller sees the same files.
        const other = yield* agentWith(user.token, { list_files: "allow", read_file: "allow" })
        const listed = yield* runAgent(user, other, "/tool list_files {}")
        assert.deepStrictEqual(resultOf(listed).files.map((f: any) => f.path), ["b.txt", "notes/todo.md"])
        assert.deepStrictEqual(resultOf(listed).files[0], { path: "b.txt", bytes: 3 })

        // Overwrite replaces; a missing file and a path that climbs out are tool errors.
        yield* runAgent(user, writer, toolDirective("write_file", { path: "b.txt", content: "bumble" }))
        assert.strictEqual(resultOf(yield* runAgent(user, other, toolDirective("read_file", { path: "b.txt" }))).content, "bumble")
        const missing = yield* runAgent(user, other, toolDirective("read_file", { path: "nope.txt" }))
        assert.include(only(missing, "tool_call.failed").error, "No file nope.txt")
        assertCompleted(missing)
        const climbing = yield* runAgent(user, writer, toolDirective("write_file", { path: "../etc/passwd", content: "x" }))
        assert.include(only(climbing, "tool_call.failed").error, "Invalid arguments for write_file: path")
        assertCompleted(climbing)

        // Someone else's workspace is their own.
        const stranger = yield* newUser
        const theirs = yield* agentWith(stranger.token, { list_files: "allow" })
        assert.deepStrictEqual(resultOf(yield* runAgent(stranger, theirs, "/tool list_files {}")), { files: [] })
      }))

    it.effect("memory_save, then memory_search finds it (every word of the query, any case)", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token, ALL_TOOLS)
        const saved = yield* runAgent(user, agent, toolDirective("memory_save", { text: "The user's favourite colour is Teal." }))
        assertInOrder(saved, TOOL_LIFECYCLE)
        assert.strictEqual(resultOf(saved).saved, true)
        yield* runAgent(user, agent, toolDirective("memory_save", { text: "The user lives in Lisbon." }))

        const found = yield* runAgent(user, agent, toolDirective("memory_search", { query: "FAVOURITE colour" }))
        assertInOrder(found, TOOL_LIFECYCLE)
        const memories = resultOf(found).memories
        assert.deepStrictEqual(memories.map((m: any) => m.text), ["The user's favourite colour is Teal."])
        assert.isFalse(Number.isNaN(Date.parse(memories[0].saved_at)))
        assert.deepStrictEqual(resultOf(yield* runAgent(user, agent, toolDirective("memory_search", { query: "colour Paris" }))).memories, [])
        assert.strictEqual(resultOf(yield* runAgent(user, agent, toolDirective("memory_search", { query: "user" }))).memories.length, 2)
        // Memory is the agent's: another agent of the same user remembers nothing.
        const other = yield* agentWith(user.token, { memory_search: "allow" })
        assert.deepStrictEqual(resultOf(yield* runAgent(user, other, toolDirective("memory_search", { query: "colour" }))).memories, [])
      }))

    it.effect("files and memory are partitioned per end user of an API key", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const key = yield* apiKeyOf(user)
        const agent = yield* agentWith(user.token, ALL_TOOLS)
        const alice = { token: key, endUser: "alice" }
        const bob = { token: key, endUser: "bob" }

        yield* runAgent(alice, agent, toolDirective("write_file", { path: "secret.txt", content: "alice only" }))
        yield* runAgent(alice, agent, toolDirective("memory_save", { text: "alice likes tea" }))
        assert.strictEqual(resultOf(yield* runAgent(alice, agent, toolDirective("read_file", { path: "secret.txt" }))).content, "alice only")
        assert.strictEqual(resultOf(yield* runAgent(alice, agent, toolDirective("memory_search", { query: "tea" }))).memories.length, 1)

        // Bob, through the same key, sees none of it.
        const read = yield* runAgent(bob, agent, toolDirective("read_file", { path: "secret.txt" }))
        assert.include(only(read, "tool_call.failed").error, "No file secret.txt")
        assertCompleted(read)
        assert.deepStrictEqual(resultOf(yield* runAgent(bob, agent, "/tool list_files {}")), { files: [] })
        assert.deepStrictEqual(resultOf(yield* runAgent(bob, agent, toolDirective("memory_search", { query: "tea" }))).memories, [])
        // Bob's own file of the same name is his, and alice's stays hers.
        yield* runAgent(bob, agent, toolDirective("write_file", { path: "secret.txt", content: "bob's" }))
        assert.strictEqual(resultOf(yield* runAgent(bob, agent, toolDirective("read_file", { path: "secret.txt" }))).content, "bob's")
        assert.strictEqual(resultOf(yield* runAgent(alice, agent, toolDirective("read_file", { path: "secret.txt" }))).content, "alice only")

        // The account's own login acts for no end user: it sees neither.
        assert.deepStrictEqual(resultOf(yield* runAgent(user, agent, "/tool list_files {}")), { files: [] })
        assert.deepStrictEqual(resultOf(yield* runAgent(user, agent, toolDirective("memory_search", { query: "tea" }))).memories, [])
      }))
  })
})
