import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import { assert, describe, it } from "@effect/vitest"
import { Chunk, Effect, Layer, Stream } from "effect"
import { makeAtriumClient } from "../../src/client.js"

/**
 * How `atrium/client` reads an SSE body (`@effect/experimental`'s parser), on bytes a fake transport hands it in
 * the pieces a test chooses: what the server sends first (`retry:`, a comment), an event split anywhere, LF or CRLF
 * lines, an event without a name, one the client does not know, and `[DONE]` with bytes after it.
 */

const frame = (lines: ReadonlyArray<string>, eol: string) => lines.map((line) => `${line}${eol}`).join("") + eol

const FRAMES: ReadonlyArray<ReadonlyArray<string>> = [
  ["retry: 1000"],
  [": connected"],
  ["event: run.created", "id: 7", `data: ${JSON.stringify({ type: "run.created", event_id: 1, run_id: "run_1", agent: "a" })}`],
  ["event: something.new", `data: ${JSON.stringify({ type: "something.new", event_id: 2 })}`],
  // No `event:` line: the parser calls it "message"; the client takes it by its payload, as before.
  [`data: ${JSON.stringify({ type: "output.text.delta", event_id: 3, delta: "hé ✓" })}`],
  [": ping"],
  ["event: run.completed", `data: ${JSON.stringify({ type: "run.completed", event_id: 4, usage: { input_tokens: 1, output_tokens: 1 }, credits_charged: 0 })}`],
  ["data: [DONE]"],
  ["event: run.created", `data: ${JSON.stringify({ type: "run.created", event_id: 5, run_id: "run_2", agent: "a" })}`]
]

/** The body with each frame's line ends taken in turn from `eols` (the grammar allows CR LF, LF and CR, mixed). */
const body = (eols: ReadonlyArray<string>) => FRAMES.map((lines, i) => frame(lines, eols[i % eols.length]!)).join("")

/** A transport that answers every request with `text`, cut into pieces of `size` bytes (mid-character too). */
const answering = (text: string, size: number) =>
  Layer.succeed(
    HttpClient.HttpClient,
    HttpClient.make((request) =>
      Effect.sync(() => {
        const bytes = new TextEncoder().encode(text)
        const stream = new ReadableStream<Uint8Array>({
          start(controller) {
            for (let at = 0; at < bytes.length; at += size) controller.enqueue(bytes.slice(at, at + size))
            controller.close()
          }
        })
        return HttpClientResponse.fromWeb(
          request,
          new Response(stream, { status: 200, headers: { "content-type": "text/event-stream" } })
        )
      })
    )
  )

describe("atrium/client SSE reading", () => {
  const endings = [["\n"], ["\r\n"], ["\r"], ["\r\n", "\n", "\r"]]
  for (const eols of endings) {
    for (const size of [1, 7, 4096]) {
      it.effect(`${JSON.stringify(eols)} in pieces of ${size}: the known events in order, up to [DONE]; id fills a missing seq`, () =>
        Effect.gen(function*() {
          const client = yield* makeAtriumClient({ baseUrl: "http://atrium.test" })
          const run = client.runs.run({ payload: { agent: "a", message: "hi" } })
          const events = Chunk.toReadonlyArray(yield* Stream.runCollect(run))
          assert.deepStrictEqual(events.map((event) => event.type), ["run.created", "output.text.delta", "run.completed"])
          assert.strictEqual(events[0]!.seq, 7)
          assert.isUndefined(events[1]!.seq)
          assert.deepInclude(events[1], { delta: "hé ✓" })
        }).pipe(Effect.provide(answering(body(eols), size))))
    }
  }
})
