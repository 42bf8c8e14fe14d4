import { HttpServerResponse } from "@effect/platform"
import { Chunk, Duration, Stream } from "effect"
import { publicPayload } from "../runtime/Events.js"
import * as Heartbeat from "./Heartbeat.js"

/**
 * Server-sent events as spec 6.1 writes them: `event: <public name>`, `data: <single-line JSON>`, a blank line.
 * `event_id` counts from 1 in each stream; a finished stream ends with `data: [DONE]`, so a stream without it is
 * known to be cut. Comment heartbeats keep proxies and clients from timing out an idle stream; they come from the
 * process's shared ticker (`Heartbeat.ts`), not a timer per stream.
 */

export const HEARTBEAT_INTERVAL = Duration.seconds(15)

const encoder = new TextEncoder()

/** One event as its two lines and the blank line. JSON.stringify never emits a raw newline, so data stays one line. */
export const frame = (name: string, payload: unknown, id?: string | number): string =>
  `event: ${name}\n${id === undefined ? "" : `id: ${id}\n`}data: ${JSON.stringify(payload)}\n\n`

export const DONE = "data: [DONE]\n\n"
export const PING = ": ping\n\n"
export const GREETING = ": connected\n\n"

export interface EncodeOptions {
  /** Write `data: [DONE]` when the events end (a run's stream); a session subscription never finishes by itself. */
  readonly done: boolean
  readonly heartbeat?: Duration.DurationInput
  /**
   * Start with a comment, so the response's headers go out at once: a session's stream may wait for a turn queued
   * behind another, and a client must not wait for its response meanwhile.
   */
  readonly greet?: boolean
  /** The `id:` line of an event (a session's `seq`, so a client can resume with `Last-Event-ID`). */
  readonly idOf?: (event: Record<string, unknown>) => string | number | undefined
}

/** Numbers and frames internal events; `[DONE]` after the last one; heartbeats while the stream is quiet. */
export const encode = <E, R>(
  events: Stream.Stream<{ readonly type: string; readonly [key: string]: unknown }, E, R>,
  options: EncodeOptions
): Stream.Stream<Uint8Array, E, R> => {
  const frames = events.pipe(
    Stream.mapAccum(0, (eventId, event) => {
      const next = eventId + 1
      const payload = publicPayload(event, next)
      return [next, frame(payload.type as string, payload, options.idOf?.(event))] as const
    }),
    options.done ? Stream.concat(Stream.make(DONE)) : (s) => s,
    options.greet === true ? Stream.prepend(Chunk.of(GREETING)) : (s) => s
  )
  return Heartbeat.during(frames, options.heartbeat ?? HEARTBEAT_INTERVAL, PING).pipe(
    Stream.map((text) => encoder.encode(text))
  )
}

/** The response of a streaming endpoint: no caching, and no buffering by proxies such as nginx. */
export const response = <E>(body: Stream.Stream<Uint8Array, E>) =>
  HttpServerResponse.stream(body, {
    contentType: "text/event-stream",
    headers: {
      "cache-control": "no-cache, no-transform",
      "x-accel-buffering": "no",
      connection: "keep-alive"
    }
  })
