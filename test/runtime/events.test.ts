import { assert, describe, it } from "@effect/vitest"
import { Chunk, Effect, Stream } from "effect"
import * as Sse from "../../src/platform/sse/Sse.js"
import { isTerminal, PUBLIC_EVENTS, publicFrames, publicName, publicPayload } from "../../src/runtime/Events.js"
import { parseStream } from "../support/Sse.js"

/**
 * The event vocabulary (spec 6.2, 2.5, 3.1) and the SSE encoder (spec 6.1, 2.4): pure functions, tested without a
 * server. The end-to-end streams are in test/runs/*.
 */

/** Spec 6.2, row by row: the internal event (name and status) and the public name it must get. */
const TABLE: ReadonlyArray<readonly [{ type: string; status?: string }, string]> = [
  [{ type: "preparing" }, "run.created"],
  [{ type: "turn_start" }, "run.in_progress"],
  [{ type: "complete" }, "run.completed"],
  [{ type: "error" }, "run.failed"],
  [{ type: "text" }, "output.text.delta"],
  [{ type: "reasoning" }, "output.thinking.delta"],
  [{ type: "thinking_status" }, "output.thinking.status"],
  [{ type: "tool_call", status: "pending" }, "tool_call.created"],
  [{ type: "tool_call", status: "running" }, "tool_call.in_progress"],
  [{ type: "tool_call", status: "completed" }, "tool_call.completed"],
  [{ type: "tool_call", status: "failed" }, "tool_call.failed"],
  [{ type: "tool_call_chunk" }, "tool_call.arguments.delta"],
  [{ type: "tool_call_result" }, "tool_call.result"],
  [{ type: "tool_denied" }, "tool_call.denied"],
  [{ type: "Ask" }, "approval.required"],
  [{ type: "delegation_started" }, "delegation.started"],
  [{ type: "delegation_completed" }, "delegation.completed"],
  [{ type: "token_usage" }, "usage.token"],
  [{ type: "budget_exhausted" }, "usage.budget_exhausted"],
  [{ type: "trial_exhausted" }, "usage.trial_exhausted"]
]

const decode = (chunks: Chunk.Chunk<Uint8Array>) => {
  const decoder = new TextDecoder()
  return Chunk.toReadonlyArray(chunks).map((bytes) => decoder.decode(bytes, { stream: true })).join("")
}

type Event = { readonly type: string; readonly [key: string]: unknown }

const encodeAll = (events: ReadonlyArray<Event>, options: Sse.EncodeOptions & { idOf?: (event: Event) => number }) =>
  Effect.map(Stream.runCollect(Sse.encode(publicFrames(Stream.fromIterable(events), options.idOf), options)), decode)

describe("event vocabulary", () => {
  it("maps each of the 20 internal names of spec 6.2 to its public name", () => {
    for (const [internal, expected] of TABLE) {
      assert.strictEqual(publicName(internal), expected, JSON.stringify(internal))
    }
    // The table above is the spec's, and PUBLIC_EVENTS lists exactly its 20 names in its order.
    assert.strictEqual(TABLE.length, 20)
    assert.deepStrictEqual([...PUBLIC_EVENTS], TABLE.map(([, name]) => name))
    assert.strictEqual(new Set(PUBLIC_EVENTS).size, 20)
  })

  it("names a tool call by its status; any other status is tool_call.<status>", () => {
    assert.strictEqual(publicName({ type: "tool_call", status: "cancelled" }), "tool_call.cancelled")
    assert.strictEqual(publicName({ type: "tool_call", status: "waiting_approval" }), "tool_call.waiting_approval")
    assert.strictEqual(publicName({ type: "tool_call", status: "queued" }), "tool_call.queued")
    // The mapped statuses get the spec's names, not tool_call.pending or tool_call.running.
    assert.strictEqual(publicName({ type: "tool_call", status: "pending" }), "tool_call.created")
    assert.strictEqual(publicName({ type: "tool_call", status: "running" }), "tool_call.in_progress")
    // A tool call without a usable status still gets a tool_call.* name, which consumers render generically.
    assert.match(publicName({ type: "tool_call" }), /^tool_call\.\S+$/)
    assert.match(publicName({ type: "tool_call", status: 7 }), /^tool_call\.\S+$/)
  })

  it("passes internal names outside the table through unchanged", () => {
    for (const name of ["session.resumed", "debug", "tool_call_status", "ask", "Preparing", "constructor", "toString", "__proto__"]) {
      assert.strictEqual(publicName({ type: name }), name)
    }
    // The status of anything but a tool call does not change its name.
    assert.strictEqual(publicName({ type: "text", status: "failed" }), "output.text.delta")
    assert.strictEqual(publicName({ type: "custom", status: "failed" }), "custom")
  })

  it("a payload carries type = the public name, event_id, and its fields; increments carry delta and content", () => {
    assert.deepStrictEqual(publicPayload({ type: "text", delta: "Hel" }, 3), {
      type: "output.text.delta",
      event_id: 3,
      delta: "Hel",
      content: "Hel"
    })
    assert.deepStrictEqual(publicPayload({ type: "reasoning", delta: "hmm" }, 1), {
      type: "output.thinking.delta",
      event_id: 1,
      delta: "hmm",
      content: "hmm"
    })
    assert.deepStrictEqual(publicPayload({ type: "tool_call", tool_call_id: "call_1", name: "calculator", status: "pending" }, 9), {
      type: "tool_call.created",
      event_id: 9,
      tool_call_id: "call_1",
      name: "calculator",
      status: "pending"
    })
    assert.deepStrictEqual(publicPayload({ type: "error", code: "model_error", message: "boom" }, 2), {
      type: "run.failed",
      event_id: 2,
      code: "model_error",
      message: "boom"
    })
    // Only text and thinking increments get `content`; other events keep their own fields as they are.
    assert.notProperty(publicPayload({ type: "tool_call_chunk", tool_call_id: "c", delta: "{" }, 1), "content")
    assert.deepStrictEqual(publicPayload({ type: "internal.thing", x: 1 }, 4), { type: "internal.thing", event_id: 4, x: 1 })
    // An internal `type` or `event_id` in the fields never overrides the public ones.
    const payload = publicPayload({ type: "turn_start", turn: 2 }, 5)
    assert.strictEqual(payload.type, "run.in_progress")
    assert.strictEqual(payload.event_id, 5)
  })

  it("complete and error end a run; nothing else does", () => {
    assert.isTrue(isTerminal({ type: "complete" }))
    assert.isTrue(isTerminal({ type: "error" }))
    for (const [internal] of TABLE) {
      if (internal.type !== "complete" && internal.type !== "error") assert.isFalse(isTerminal(internal), internal.type)
    }
  })
})

describe("SSE encoder", () => {
  const run = [
    { type: "preparing", run_id: "run_1", agent: "a" },
    { type: "turn_start", turn: 1 },
    { type: "reasoning", delta: "thinking\nacross lines" },
    { type: "text", delta: "line one\nline two\r\n\n" },
    { type: "tool_call", tool_call_id: "c1", name: "calculator", status: "pending" },
    { type: "something_internal", note: "a\nb" },
    { type: "complete", usage: { input_tokens: 1, output_tokens: 2 }, credits_charged: 0.001 }
  ]

  it.effect("writes event/data/blank blocks, event_id from 1, and [DONE] after the last event when done: true", () =>
    Effect.gen(function*() {
      const raw = yield* encodeAll(run, { done: true })
      const parsed = parseStream(raw)
      assert.isTrue(parsed.done)
      assert.deepStrictEqual(parsed.events.map((e) => e.event), [
        "run.created",
        "run.in_progress",
        "output.thinking.delta",
        "output.text.delta",
        "tool_call.created",
        "something_internal",
        "run.completed"
      ])
      assert.deepStrictEqual(parsed.events.map((e) => e.data.event_id), [1, 2, 3, 4, 5, 6, 7])
      // Newlines inside text stay inside the JSON string: every data line is one line.
      assert.strictEqual(parsed.events[3]!.data.delta, "line one\nline two\r\n\n")
      assert.strictEqual(parsed.events[3]!.data.content, "line one\nline two\r\n\n")
      for (const line of raw.split("\n")) {
        assert.match(line, /^(event: \S+|data: .*|retry: 1000|)$/, JSON.stringify(line))
      }
      assert.isTrue(raw.endsWith("data: [DONE]\n\n"))
      assert.strictEqual(raw.split("data: [DONE]").length, 2, "exactly one [DONE]")
      assert.notInclude(raw, "\r")
    }))

  it.effect("writes no [DONE] when done: false (a subscription that does not finish by itself)", () =>
    Effect.gen(function*() {
      const raw = yield* encodeAll(run, { done: false })
      assert.notInclude(raw, "[DONE]")
      const parsed = parseStream(raw, { expectDone: false })
      assert.isFalse(parsed.done)
      assert.strictEqual(parsed.events.length, run.length)
    }))

  it.effect("numbers each stream from 1, and an empty run stream is just [DONE]", () =>
    Effect.gen(function*() {
      const first = parseStream(yield* encodeAll(run, { done: true }))
      const second = parseStream(yield* encodeAll(run.slice(1), { done: true }))
      assert.strictEqual(first.events[0]!.data.event_id, 1)
      assert.strictEqual(second.events[0]!.data.event_id, 1)
      // Every stream opens with the reconnection delay, once (issue 30).
      assert.strictEqual(yield* encodeAll([], { done: true }), "retry: 1000\n\ndata: [DONE]\n\n")
    }))

  it.effect("writes an id: line only when asked (a session's seq)", () =>
    Effect.gen(function*() {
      const raw = yield* encodeAll([{ type: "text", delta: "x", seq: 41 }], { done: false, idOf: (e) => e.seq as number })
      assert.strictEqual(raw, `retry: 1000\n\nevent: output.text.delta\nid: 41\ndata: {"type":"output.text.delta","event_id":1,"delta":"x","seq":41,"content":"x"}\n\n`)
      parseStream(raw, { expectDone: false })
    }))

  it.live("sends : ping comments while the source is quiet", () =>
    Effect.gen(function*() {
      const quiet = Stream.concat(
        Stream.make({ type: "preparing", run_id: "run_1", agent: "a" } as { type: string; [key: string]: unknown }),
        Stream.fromEffect(Effect.as(Effect.sleep("400 millis"), { type: "complete", usage: { input_tokens: 0, output_tokens: 0 }, credits_charged: 0 }))
      )
      const raw = decode(yield* Stream.runCollect(Sse.encode(publicFrames(quiet), { done: true, heartbeat: "20 millis" })))
      const parsed = parseStream(raw)
      assert.isAbove(parsed.pings, 0, raw)
      assert.include(raw, "\n\n: ping\n\n")
      assert.deepStrictEqual(parsed.events.map((e) => e.event), ["run.created", "run.completed"])
      // The pings stop with the stream: nothing follows [DONE].
      assert.isTrue(raw.endsWith("data: [DONE]\n\n"))
    }))

  it.live("sends no ping when the events keep coming (the default heartbeat is 15 s)", () =>
    Effect.gen(function*() {
      const raw = yield* encodeAll(run, { done: true })
      assert.strictEqual(parseStream(raw).pings, 0)
      assert.notInclude(raw, ": ping")
    }))
})
