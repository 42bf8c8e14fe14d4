import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { TestServer } from "./TestServer.js"

/**
 * A real SSE reader for the platform's streams, and a strict check of their grammar (spec 6.1, 2.4): every block
 * is `event: <name>` + `data: <one-line JSON>` (or a `: ping` comment), `type` equals the event line, `event_id`
 * counts 1, 2, 3..., increments carry `delta` and `content`, `run.failed` carries `code` and `message`, and a
 * finished stream ends with `data: [DONE]`.
 */

export interface StreamEvent {
  readonly event: string
  readonly data: Record<string, any>
}

export interface ParsedStream {
  readonly events: ReadonlyArray<StreamEvent>
  readonly done: boolean
  readonly pings: number
  readonly raw: string
}

/** Parses a whole stream and asserts its grammar; `done` says whether it ended with `[DONE]`. */
export const parseStream = (raw: string, options: { expectDone?: boolean } = {}): ParsedStream => {
  const blocks = raw.split("\n\n")
  assert.strictEqual(blocks.pop(), "", `a stream ends with a blank line: ${JSON.stringify(raw.slice(-80))}`)
  const events: Array<StreamEvent> = []
  let done = false
  let pings = 0
  for (const [index, block] of blocks.entries()) {
    assert.isFalse(done, "nothing follows data: [DONE]")
    if (block === "retry: 1000") {
      assert.strictEqual(index, 0, "retry: comes once, first")
      continue
    }
    if (block === ": ping") {
      pings++
      continue
    }
    if (/^:[^\n]*$/.test(block)) continue
    if (block === "data: [DONE]") {
      done = true
      continue
    }
    const lines = block.split("\n")
    const eventLine = lines[0]!
    const dataLine = lines[lines.length - 1]!
    assert.match(eventLine, /^event: \S+$/, `block starts with event: ${JSON.stringify(block)}`)
    assert.match(dataLine, /^data: \{.*\}$/, `block ends with one data line: ${JSON.stringify(block)}`)
    assert.isAtMost(lines.length, 3, `only event, id and data lines: ${JSON.stringify(block)}`)
    if (lines.length === 3) assert.match(lines[1]!, /^id: \S+$/)
    const name = eventLine.slice("event: ".length)
    const data = JSON.parse(dataLine.slice("data: ".length))
    assert.strictEqual(data.type, name, "type equals the event line")
    assert.strictEqual(data.event_id, events.length + 1, "event_id counts from 1")
    if (name === "output.text.delta" || name === "output.thinking.delta") {
      assert.isString(data.delta)
      assert.strictEqual(data.content, data.delta, "an increment carries delta and content")
    }
    if (name === "run.failed") {
      assert.isString(data.code)
      assert.isString(data.message)
    }
    events.push({ event: name, data })
  }
  if (options.expectDone ?? true) {
    assert.isTrue(done, "a finished stream ends with data: [DONE]")
    const last = events[events.length - 1]?.event
    assert.oneOf(last, ["run.completed", "run.failed"], "[DONE] follows run.completed or run.failed")
  }
  return { events, done, pings, raw }
}

/** An open stream read as it arrives, for tests that act in the middle of a run (approvals, disconnects). */
export interface LiveStream {
  readonly status: number
  readonly headers: Headers
  /** Reads until an event with this name arrives (or the stream ends); returns everything read so far. */
  readonly until: (name: string) => Effect.Effect<ParsedStream>
  /** Reads until `count` `: ping` comments have arrived in all (or the stream ends); returns everything read so far. */
  readonly untilPings: (count: number) => Effect.Effect<ParsedStream>
  /** Reads to the end. */
  readonly rest: Effect.Effect<ParsedStream>
  /** Cuts the connection, as a client that leaves. */
  readonly cancel: Effect.Effect<void>
}

export const openStream = (
  path: string,
  options: { token?: string; body?: unknown; headers?: Record<string, string>; method?: string } = {}
) =>
  Effect.gen(function*() {
    const server = yield* TestServer
    const controller = new AbortController()
    const headers: Record<string, string> = { "content-type": "application/json", ...options.headers }
    if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`
    const response = yield* Effect.promise(() =>
      fetch(server.url + path, {
        method: options.method ?? "POST",
        headers,
        signal: controller.signal,
        ...(options.body !== undefined ? { body: JSON.stringify(options.body) } : {})
      })
    )
    const reader = response.body!.getReader()
    const decoder = new TextDecoder()
    let raw = ""
    let ended = false
    const complete = (text: string) => text.slice(0, text.lastIndexOf("\n\n") + 2)
    const readMore = Effect.promise(async () => {
      const chunk = await reader.read().catch(() => ({ done: true, value: undefined }))
      if (chunk.done) ended = true
      else raw += decoder.decode(chunk.value, { stream: true })
    })
    const until = (name: string) =>
      Effect.gen(function*() {
        while (!ended && !complete(raw).includes(`event: ${name}\n`)) yield* readMore
        return parseStream(complete(raw), { expectDone: false })
      })
    const untilPings = (count: number) =>
      Effect.gen(function*() {
        while (!ended && complete(raw).split(": ping\n\n").length - 1 < count) yield* readMore
        return parseStream(complete(raw), { expectDone: false })
      })
    const rest = Effect.gen(function*() {
      while (!ended) yield* readMore
      return parseStream(raw)
    })
    const cancel = Effect.sync(() => controller.abort())
    return { status: response.status, headers: response.headers, until, untilPings, rest, cancel } satisfies LiveStream
  })

/** POSTs and reads the whole stream. */
export const streamOf = (
  path: string,
  options: { token?: string; body?: unknown; headers?: Record<string, string> } = {}
) => Effect.flatMap(openStream(path, options), (stream) => stream.rest)

export const names = (parsed: ParsedStream) => parsed.events.map((event) => event.event)

export const textOf = (parsed: ParsedStream) =>
  parsed.events.filter((e) => e.event === "output.text.delta").map((e) => e.data.delta).join("")
