import { afterEach, assert, beforeEach, describe, it } from "@effect/vitest"
import { Deferred, type Duration, Effect, Fiber, Queue, Stream } from "effect"
import { vi } from "vitest"
import * as Heartbeat from "../../src/platform/sse/Heartbeat.js"
import * as Sse from "../../src/platform/sse/Sse.js"
import { publicFrame } from "../../src/runtime/Events.js"

/**
 * The shared heartbeat ticker behind every SSE stream (src/platform/sse/Heartbeat.ts): pings at the configured
 * interval and never sooner, one timer however many streams, and no subscriber left behind by a stream that ends,
 * fails or loses its client. The ticker is a Node `setInterval`, so these tests fake that timer (and only that one:
 * Effect's own scheduling stays real) and move time by hand: every count below is exact.
 *
 * `Heartbeat.every` is what the written and held streams of runs and sessions use (`Sse.written`, `Sse.held`);
 * `Heartbeat.during`, through `Sse.encode`, is what the Chat Completions and Responses streams use.
 */

beforeEach(() => {
  vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] })
})
afterEach(() => {
  vi.useRealTimers()
})

type Wire = { readonly type: string; readonly [key: string]: unknown }
const created: Wire = { type: "preparing", run_id: "run_1", agent: "a" }
const completed: Wire = { type: "complete", usage: { input_tokens: 0, output_tokens: 0 }, credits_charged: 0 }

/**
 * `Sse.encode` over events the test offers one by one (a queue), as a Chat Completions stream encodes its chunks:
 * each piece written is put in `pieces`, so the test waits for the next piece instead of for time.
 */
const encodedStream = (interval: Duration.DurationInput) =>
  Effect.gen(function*() {
    const events = yield* Queue.unbounded<Wire>()
    const end = yield* Deferred.make<void, string>()
    const pieces = yield* Queue.unbounded<string>()
    let eventId = 0
    const source = Stream.fromQueue(events).pipe(
      Stream.map((event) => publicFrame(event, ++eventId)),
      Stream.interruptWhen(end)
    )
    const decoder = new TextDecoder()
    const fiber = yield* Sse.encode(source, { done: true, heartbeat: interval }).pipe(
      Stream.runForEach((bytes) => Queue.offer(pieces, decoder.decode(bytes))),
      Effect.exit,
      Effect.fork
    )
    return { events, end, pieces, fiber }
  })

const next = (q: Queue.Queue<string>, what: string) => Queue.take(q).pipe(Effect.timeoutFail({ duration: "3 seconds", onTimeout: () => new Error(`no ${what}`) }))

describe("Heartbeat.every (written and held streams)", () => {
  it("pings once a whole interval has passed, at most a fifth of one late, then exactly every interval", () => {
    let pings = 0
    const stop = Heartbeat.every("100 millis", () => void pings++)
    vi.advanceTimersByTime(99)
    assert.strictEqual(pings, 0, "never before a whole interval")
    vi.advanceTimersByTime(21)
    assert.strictEqual(pings, 1, "the first ping by 1 + 1/5 intervals")
    vi.advanceTimersByTime(99)
    assert.strictEqual(pings, 1)
    vi.advanceTimersByTime(1)
    assert.strictEqual(pings, 2, "then every interval")
    vi.advanceTimersByTime(1_000)
    assert.strictEqual(pings, 12)
    stop()
    vi.advanceTimersByTime(1_000)
    assert.strictEqual(pings, 12, "nothing after stop")
  })

  it("streams share one timer per interval, and the timer stops with the last stream", () => {
    const counts = Array.from({ length: 200 }, () => 0)
    const stops = counts.map((_, i) => Heartbeat.every("70 millis", () => void counts[i]!++))
    const other = Heartbeat.every("30 millis", () => {})
    assert.strictEqual(Heartbeat.subscribers("70 millis"), 200)
    assert.strictEqual(Heartbeat.timers(), 2, "one timer for 200 streams, one for the other interval")
    assert.strictEqual(vi.getTimerCount(), 2)
    vi.advanceTimersByTime(84)
    // Every stream pinged, each once: a shared tick sends no stream a ping sooner than its own timer would.
    assert.deepStrictEqual(new Set(counts), new Set([1]))
    stops.forEach((stop) => stop())
    assert.strictEqual(Heartbeat.subscribers("70 millis"), 0)
    assert.strictEqual(Heartbeat.timers(), 1)
    other()
    assert.strictEqual(Heartbeat.timers(), 0)
    assert.strictEqual(vi.getTimerCount(), 0)
  })

  it("a stream that joins a running ticker counts its interval from when it joined", () => {
    let early = 0
    let late = 0
    const stopEarly = Heartbeat.every("100 millis", () => void early++)
    vi.advanceTimersByTime(60)
    const stopLate = Heartbeat.every("100 millis", () => void late++)
    vi.advanceTimersByTime(60)
    assert.deepStrictEqual([early, late], [1, 0])
    vi.advanceTimersByTime(59)
    assert.deepStrictEqual([early, late], [1, 0], "not a whole interval since the late one joined (at 60 ms)")
    vi.advanceTimersByTime(1)
    assert.deepStrictEqual([early, late], [1, 1], "the late one's first: 120 ms after it joined")
    vi.advanceTimersByTime(40)
    assert.deepStrictEqual([early, late], [2, 1], "the early one's second, on its own cadence")
    stopEarly()
    stopLate()
  })
})

describe("Heartbeat.during (Sse.encode: Chat Completions and Responses streams)", () => {
  it.live("a quiet stream pings every interval, events do not restart it, and nothing follows [DONE]", () =>
    Effect.gen(function*() {
      const stream = yield* encodedStream("100 millis")
      assert.strictEqual(yield* next(stream.pieces, "retry"), Sse.RETRY)
      yield* Queue.offer(stream.events, created)
      assert.match(yield* next(stream.pieces, "created"), /^event: run.created\n/)
      // Events every 50 ms (of the ticker's time) do not hold the ping back: it comes at 120 ms as if all were quiet.
      vi.advanceTimersByTime(50)
      yield* Queue.offer(stream.events, { type: "text", delta: "a" })
      assert.match(yield* Queue.take(stream.pieces), /^event: output.text.delta\n/)
      vi.advanceTimersByTime(50)
      yield* Queue.offer(stream.events, { type: "text", delta: "b" })
      assert.match(yield* Queue.take(stream.pieces), /^event: output.text.delta\n/)
      vi.advanceTimersByTime(20)
      assert.strictEqual(yield* next(stream.pieces, "ping"), Sse.PING)
      vi.advanceTimersByTime(100)
      assert.strictEqual(yield* Queue.take(stream.pieces), Sse.PING)
      yield* Queue.offer(stream.events, completed)
      assert.match(yield* Queue.take(stream.pieces), /^event: run.completed\n/)
      yield* Deferred.succeed(stream.end, undefined)
      assert.strictEqual(yield* Queue.take(stream.pieces), Sse.DONE)
      const exit = yield* Fiber.join(stream.fiber)
      assert.strictEqual(exit._tag, "Success")
      vi.advanceTimersByTime(1_000)
      assert.strictEqual(yield* Queue.size(stream.pieces), 0, "no ping after [DONE]")
      assert.strictEqual(Heartbeat.subscribers(), 0)
      assert.strictEqual(Heartbeat.timers(), 0)
    }))

  it.live("a client that disconnects leaves no subscriber behind", () =>
    Effect.gen(function*() {
      const stream = yield* encodedStream("30 millis")
      assert.strictEqual(yield* Queue.take(stream.pieces), Sse.RETRY)
      vi.advanceTimersByTime(36)
      assert.strictEqual(yield* Queue.take(stream.pieces), Sse.PING)
      assert.strictEqual(Heartbeat.subscribers("30 millis"), 1)
      // What the HTTP server does to a response body whose client went away.
      yield* Fiber.interrupt(stream.fiber)
      assert.strictEqual(Heartbeat.subscribers(), 0)
      assert.strictEqual(Heartbeat.timers(), 0)
    }))

  it.live("a stream that fails leaves no subscriber behind", () =>
    Effect.gen(function*() {
      const stream = yield* encodedStream("40 millis")
      assert.strictEqual(yield* Queue.take(stream.pieces), Sse.RETRY)
      yield* Queue.offer(stream.events, created)
      yield* Queue.take(stream.pieces)
      yield* Deferred.fail(stream.end, "boom")
      const exit = yield* Fiber.join(stream.fiber)
      assert.strictEqual(exit._tag, "Failure")
      assert.strictEqual(Heartbeat.subscribers(), 0)
      assert.strictEqual(Heartbeat.timers(), 0)
    }))
})
