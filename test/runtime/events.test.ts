import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import { assert, describe, it } from "@effect/vitest"
import { Chunk, Effect, Stream } from "effect"
import type { Readable } from "node:stream"
import * as Sse from "../../src/platform/sse/Sse.js"
import { isTerminal, PUBLIC_EVENTS, publicFrame, publicName, publicPayload } from "../../src/runtime/Events.js"
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

/**
 * A run's stream as `POST /v1/agents/run` writes it (src/runs/Http.ts): each event pushed to `Sse.written`'s outlet as
 * `publicFrame(event, ++eventId)`, the outlet ended after the last. `seq` as the `id:` line, as a session's stream
 * (src/sessions/Http.ts) does, when `withSeq`.
 */
const writeAll = (events: ReadonlyArray<Event>, options: { readonly withSeq?: boolean; readonly greet?: boolean } = {}) =>
  Effect.gen(function*() {
    let eventId = 0
    const response = yield* Sse.written((outlet) =>
      Effect.sync(() => {
        for (const event of events) outlet.send(publicFrame(event, ++eventId, options.withSeq ? event.seq as number : undefined))
        outlet.end()
      }), { heartbeat: "15 seconds", greet: options.greet ?? false })
    assert.strictEqual(response.body._tag, "Raw")
    const body = (response.body as { readonly body: Readable }).body
    return yield* Effect.promise(async () => {
      let text = ""
      for await (const chunk of body) text += String(chunk)
      return text
    })
  }).pipe(Effect.provideService(HttpServerRequest.HttpServerRequest, HttpServerRequest.fromWeb(new Request("http://localhost/v1/agents/run", { method: "POST" }))))

/**
 * A run's stream as a repeated idempotent request gets it (src/runs/Http.ts): the shared events as frames, counted
 * from 1 (`Stream.map(publicFrame)`), through `Sse.encode`.
 */
const encodeAll = (events: ReadonlyArray<Event>, options: Sse.EncodeOptions) => {
  let eventId = 0
  const frames = Stream.fromIterable(events).pipe(Stream.map((event) => publicFrame(event, ++eventId)))
  return Effect.map(Stream.runCollect(Sse.encode(frames, options)), decode)
}

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

describe("SSE streams of runs and sessions", () => {
  const run = [
    { type: "preparing", run_id: "run_1", agent: "a" },
    { type: "turn_start", turn: 1 },
    { type: "reasoning", delta: "thinking\nacross lines" },
    { type: "text", delta: "line one\nline two\r\n\n" },
    { type: "tool_call", tool_call_id: "c1", name: "calculator", status: "pending" },
    { type: "something_internal", note: "a\nb" },
    { type: "complete", usage: { input_tokens: 1, output_tokens: 2 }, credits_charged: 0.001 }
  ]

  const assertRunStream = (raw: string) => {
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
    assert.isTrue(raw.startsWith("retry: 1000\n\n"), "the reconnection delay comes first (issue 30)")
    assert.isTrue(raw.endsWith("data: [DONE]\n\n"))
    assert.strictEqual(raw.split("data: [DONE]").length, 2, "exactly one [DONE]")
    assert.notInclude(raw, "\r")
  }

  it.effect("a written run stream: event/data/blank blocks, event_id from 1, [DONE] when the outlet ends", () =>
    Effect.map(writeAll(run), assertRunStream))

  it.effect("a shared (idempotent) run stream through Sse.encode reads the same, byte for byte", () =>
    Effect.gen(function*() {
      const encoded = yield* encodeAll(run, { done: true })
      assertRunStream(encoded)
      assert.strictEqual(encoded, yield* writeAll(run))
    }))

  it.effect("the Responses stream (Sse.encode, done: false) has no [DONE]", () =>
    Effect.gen(function*() {
      const raw = yield* encodeAll(run, { done: false })
      assert.notInclude(raw, "[DONE]")
      const parsed = parseStream(raw, { expectDone: false })
      assert.isFalse(parsed.done)
      assert.strictEqual(parsed.events.length, run.length)
    }))

  it.effect("numbers each stream from 1, and an empty run stream is the retry line and [DONE]", () =>
    Effect.gen(function*() {
      const first = parseStream(yield* writeAll(run))
      const second = parseStream(yield* writeAll(run.slice(1)))
      assert.strictEqual(first.events[0]!.data.event_id, 1)
      assert.strictEqual(second.events[0]!.data.event_id, 1)
      assert.strictEqual(yield* writeAll([]), "retry: 1000\n\ndata: [DONE]\n\n")
      assert.strictEqual(yield* encodeAll([], { done: true }), "retry: 1000\n\ndata: [DONE]\n\n")
    }))

  it.effect("a session's turn stream greets first and carries seq as the id: line", () =>
    Effect.gen(function*() {
      const raw = yield* writeAll([{ type: "text", delta: "x", seq: 41 }], { withSeq: true, greet: true })
      assert.strictEqual(
        raw,
        `retry: 1000\n\n: connected\n\nevent: output.text.delta\nid: 41\ndata: {"type":"output.text.delta","event_id":1,"delta":"x","seq":41,"content":"x"}\n\ndata: [DONE]\n\n`
      )
    }))

  it.effect("a HEAD request gets the stream's headers and no body (nothing is started)", () =>
    Effect.gen(function*() {
      let started = false
      const response = yield* Sse.written(() => Effect.sync(() => void (started = true)), { heartbeat: "15 seconds", greet: false }).pipe(
        Effect.provideService(HttpServerRequest.HttpServerRequest, HttpServerRequest.fromWeb(new Request("http://localhost/v1/agents/run", { method: "HEAD" })))
      )
      assert.isFalse(started)
      assert.strictEqual(response.body._tag, "Empty")
      assert.strictEqual(response.headers["cache-control"], "no-cache, no-transform")
      assert.strictEqual(response.headers["x-accel-buffering"], "no")
    }))
})
