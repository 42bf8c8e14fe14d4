import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Chunk, Duration, Effect, Stream } from "effect"
import { countWhileScoped, openSubscriptions } from "../telemetry/Metrics.js"
import * as Heartbeat from "./Heartbeat.js"

/**
 * Server-sent events, knowing nothing of what they carry (spec 6.1's framing): a frame is an optional `event:` line,
 * an optional `id:` line and one `data:` line of single-line JSON, then a blank line. Every stream of the platform
 * goes through `encode`: a run's and a session's public events (named by `runtime/Events.ts`), the OpenAI
 * chat-completion chunks (data lines only, then `[DONE]`) and the Responses stream (named events, no `[DONE]`).
 * Comment heartbeats keep proxies and clients from timing out an idle stream; they come from the process's shared
 * ticker (`Heartbeat.ts`), not a timer per stream.
 */

export const HEARTBEAT_INTERVAL = Duration.seconds(15)

/** One frame of a stream: `data` is written as JSON. */
export interface Frame {
  readonly event?: string | undefined
  readonly id?: string | number | undefined
  readonly data: unknown
}

const encoder = new TextEncoder()

/** A frame as its lines and the blank line. JSON.stringify never emits a raw newline, so data stays one line. */
export const frame = ({ data, event, id }: Frame): string =>
  `${event === undefined ? "" : `event: ${event}\n`}${id === undefined ? "" : `id: ${id}\n`}data: ${JSON.stringify(data)}\n\n`

export const DONE = "data: [DONE]\n\n"
export const PING = ": ping\n\n"
export const GREETING = ": connected\n\n"

export interface EncodeOptions {
  /** Write `data: [DONE]` when the frames end (a run's stream); a session subscription never finishes by itself. */
  readonly done: boolean
  readonly heartbeat?: Duration.DurationInput
  /**
   * Start with a comment, so the response's headers go out at once: a session's stream may wait for a turn queued
   * behind another, and a client must not wait for its response meanwhile.
   */
  readonly greet?: boolean
}

/** Frames as bytes: `[DONE]` after the last one when asked, heartbeats while the stream is quiet. */
export const encode = <E, R>(frames: Stream.Stream<Frame, E, R>, options: EncodeOptions): Stream.Stream<Uint8Array, E, R> => {
  const text = frames.pipe(
    Stream.map(frame),
    options.done ? Stream.concat(Stream.make(DONE)) : (s) => s,
    options.greet === true ? Stream.prepend(Chunk.of(GREETING)) : (s) => s
  )
  const encoded = Heartbeat.during(text, options.heartbeat ?? HEARTBEAT_INTERVAL, PING).pipe(
    Stream.map((piece) => encoder.encode(piece))
  )
  return Stream.unwrapScoped(Effect.as(countWhileScoped(openSubscriptions), encoded))
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
