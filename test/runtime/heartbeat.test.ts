import { assert, describe, it } from "@effect/vitest"
import { Chunk, Effect, Fiber, Ref, Stream } from "effect"
import * as Heartbeat from "../../src/platform/sse/Heartbeat.js"
import * as Sse from "../../src/platform/sse/Sse.js"
import { publicFrames } from "../../src/runtime/Events.js"

/**
 * The shared heartbeat ticker behind every SSE stream (src/platform/sse/Heartbeat.ts): pings at the configured interval
 * and never sooner, one timer however many streams, and no subscriber
 * left behind by a stream that ends, fails or loses its client. Live clocks, since the ticker is a real timer; each
 * test uses its own interval so the counts are its own.
 */

type Wire = { readonly type: string; readonly [key: string]: unknown }
const created: Wire = { type: "preparing", run_id: "run_1", agent: "a" }
const completed: Wire = { type: "complete", usage: { input_tokens: 0, output_tokens: 0 }, credits_charged: 0 }

/** The encoded stream's pieces with the time each arrived. */
const timed = (stream: Stream.Stream<Uint8Array>) => {
  const decoder = new TextDecoder()
  return stream.pipe(
    Stream.map((bytes) => ({ text: decoder.decode(bytes), at: performance.now() })),
    Stream.runCollect,
    Effect.map(Chunk.toReadonlyArray)
  )
}

const until = (condition: () => boolean) =>
  Effect.sleep("5 millis").pipe(Effect.repeat({ until: condition }), Effect.timeout("5 seconds"), Effect.orDie)

describe("Heartbeat", () => {
  it.live("a quiet stream pings every interval, never before a whole interval of quiet", () =>
    Effect.gen(function*() {
      const quiet = Stream.concat(Stream.make(created), Stream.fromEffect(Effect.as(Effect.sleep("750 millis"), completed)))
      const pieces = yield* timed(Sse.encode(publicFrames(quiet), { done: true, heartbeat: "100 millis" }))
      const pings = pieces.filter((p) => p.text === Sse.PING).map((p) => p.at)
      const first = pieces[0]!
      assert.notStrictEqual(first.text, Sse.PING)
      // Nominally 7 (the first between 100 and 120 ms, then every 100 ms); fewer only if the machine stalls.
      assert.isAtLeast(pings.length, 3, JSON.stringify(pieces))
      assert.isAtMost(pings.length, 8, JSON.stringify(pieces))
      // Slack for the fiber that delivers a ping, not for the ticker: it never fires early.
      assert.isAtLeast(pings[0]! - first.at, 90)
      for (let i = 1; i < pings.length; i++) assert.isAtLeast(pings[i]! - pings[i - 1]!, 85)
      assert.strictEqual(pieces[pieces.length - 1]!.text, Sse.DONE, "nothing follows [DONE]")
      assert.strictEqual(Heartbeat.subscribers("100 millis"), 0)
    }))

  it.live("a stream that keeps writing keeps its cadence: events do not restart the interval", () =>
    Effect.gen(function*() {
      const busy = Stream.repeatEffect(Effect.as(Effect.sleep("10 millis"), created)).pipe(Stream.take(60))
      const pieces = yield* timed(Sse.encode(publicFrames(busy), { done: true, heartbeat: "150 millis" }))
      assert.isAbove(pieces.filter((p) => p.text === Sse.PING).length, 0)
      // The retry line, 60 events and [DONE].
      assert.strictEqual(pieces.filter((p) => p.text !== Sse.PING).length, 62)
    }))

  it.live("idle streams share one timer and leave it when they end", () =>
    Effect.gen(function*() {
      const quiet = Stream.concat(Stream.make(created), Stream.fromEffect(Effect.as(Effect.sleep("600 millis"), completed)))
      const all = yield* Effect.forEach(
        Array.from({ length: 200 }),
        () => timed(Sse.encode(publicFrames(quiet), { done: true, heartbeat: "70 millis" })),
        { concurrency: "unbounded" }
      ).pipe(Effect.fork)
      yield* until(() => Heartbeat.subscribers("70 millis") === 200)
      assert.strictEqual(Heartbeat.timers(), 1, "one timer for 200 streams")
      const streams = yield* Fiber.join(all)
      // Every stream should have pinged; a starved event loop (the ticker skips ticks it missed) may leave a few out.
      const pinged = streams.filter((pieces) => pieces.some((p) => p.text === Sse.PING)).length
      assert.isAbove(pinged, 0)
      assert.strictEqual(Heartbeat.subscribers("70 millis"), 0)
      assert.strictEqual(Heartbeat.timers(), 0, "the timer stops with the last stream")
    }))

  it.live("a client that disconnects leaves no subscriber behind", () =>
    Effect.gen(function*() {
      const pings = yield* Ref.make(0)
      const fiber = yield* Sse.encode(Stream.never, { done: false, heartbeat: "30 millis" }).pipe(
        Stream.runForEach((bytes) => new TextDecoder().decode(bytes) === Sse.PING ? Ref.update(pings, (n) => n + 1) : Effect.void),
        Effect.fork
      )
      yield* until(() => Effect.runSync(Ref.get(pings)) >= 2)
      assert.strictEqual(Heartbeat.subscribers("30 millis"), 1)
      // What the HTTP server does to a response body whose client went away.
      yield* Fiber.interrupt(fiber)
      assert.strictEqual(Heartbeat.subscribers(), 0)
      assert.strictEqual(Heartbeat.timers(), 0)
    }))

  it.live("a stream that fails leaves no subscriber behind", () =>
    Effect.gen(function*() {
      const failing = Stream.concat(Stream.make(created), Stream.fromEffect(Effect.zipRight(Effect.sleep("100 millis"), Effect.fail("boom"))))
      const exit = yield* Sse.encode(publicFrames(failing), { done: true, heartbeat: "40 millis" }).pipe(Stream.runDrain, Effect.exit)
      assert.isTrue(exit._tag === "Failure")
      assert.strictEqual(Heartbeat.subscribers(), 0)
      assert.strictEqual(Heartbeat.timers(), 0)
    }))
})
