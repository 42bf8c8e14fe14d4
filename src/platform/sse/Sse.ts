import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import * as HttpApp from "@effect/platform/HttpApp"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Chunk, Deferred, Duration, Effect, Exit, GlobalValue, Metric, Runtime, Scope, Stream } from "effect"
import type * as Http from "node:http"
import { Readable } from "node:stream"
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
/**
 * Sent once, first: how long a client waits before it reconnects (EventSource and eventsource-parser read it), one
 * second instead of their own 3 s default; a block without `data` is no event to any client.
 */
export const RETRY = "retry: 1000\n\n"

export interface EncodeOptions {
  /** Write `data: [DONE]` when the frames end (a chat completion's stream; the Responses stream has none). */
  readonly done: boolean
  readonly heartbeat?: Duration.DurationInput
}

/** Frames as bytes: `[DONE]` after the last one when asked, heartbeats while the stream is quiet. */
export const encode = <E, R>(frames: Stream.Stream<Frame, E, R>, options: EncodeOptions): Stream.Stream<Uint8Array, E, R> => {
  const text = frames.pipe(
    Stream.map(frame),
    Stream.prepend(Chunk.of(RETRY)),
    options.done ? Stream.concat(Stream.make(DONE)) : (s) => s
  )
  const encoded = Heartbeat.during(text, options.heartbeat ?? HEARTBEAT_INTERVAL, PING).pipe(
    Stream.map((piece) => encoder.encode(piece))
  )
  return Stream.unwrapScoped(Effect.as(countWhileScoped(openSubscriptions), encoded))
}

/** No caching, and no buffering by proxies such as nginx. */
const STREAM_HEADERS = {
  contentType: "text/event-stream",
  headers: {
    "cache-control": "no-cache, no-transform",
    "x-accel-buffering": "no",
    connection: "keep-alive"
  }
} as const

/** The response of a streaming endpoint. */
export const response = <E>(body: Stream.Stream<Uint8Array, E>) => HttpServerResponse.stream(body, STREAM_HEADERS)

/**
 * Text written within one tick, passed on as one piece when the tick's work is done (`process.nextTick` runs after
 * the microtasks the fibers run in): a run's model step emits about ten frames at once, which were ten response
 * writes, ten chunks and forty socket buffers. The order is kept; `take` hands what waits to the stream's end.
 */
const coalesced = (send: (text: string) => void) => {
  let pending = ""
  let scheduled = false
  const flush = () => {
    scheduled = false
    if (pending === "") return
    const text = pending
    pending = ""
    send(text)
  }
  return {
    write: (text: string) => {
      pending += text
      if (scheduled) return
      scheduled = true
      process.nextTick(flush)
    },
    /** What waits, no longer to be passed on: to be written by the caller with the stream's end. */
    take: () => {
      const text = pending
      pending = ""
      return text
    }
  }
}

/** Where a written stream's frames go: written to the response when the tick they are sent in ends, in order. */
export interface Outlet {
  readonly send: (frame: Frame) => void
  /** Ends the response (after `data: [DONE]` when the stream has one); nothing is written after. */
  readonly end: () => void
}

export interface WriteOptions {
  readonly heartbeat: Duration.DurationInput
  /**
   * Start with a comment, so the response's headers go out at once: a session's turn may wait behind another, and
   * a client must not wait for its response meanwhile.
   */
  readonly greet: boolean
}

/**
 * Starts what `open` sends, in `scope`, and counts the stream as open until the scope closes. The count's release is
 * added to the scope itself: `acquireRelease` would keep the calling request's fiber refs (its whole context) until
 * then, which a held stream outlives. If `open` fails or is cut, the scope closes at once.
 */
const openIn = <E, R>(scope: Scope.CloseableScope, open: (outlet: Outlet) => Effect.Effect<void, E, R>, outlet: Outlet) =>
  Effect.uninterruptibleMask((restore) =>
    restore(open(outlet).pipe(Scope.extend(scope))).pipe(
      Effect.zipRight(Metric.increment(openSubscriptions)),
      Effect.zipRight(Scope.addFinalizer(scope, Metric.incrementBy(openSubscriptions, -1))),
      Effect.onExit((exit) => Exit.isSuccess(exit) ? Effect.void : Scope.close(scope, exit))
    )
  )

/**
 * A run's or a turn's stream, written by pushes rather than pulled, ending with `data: [DONE]`: `open` starts, in a
 * scope the response owns, whatever sends frames to the outlet as they happen (a run's fiber, a session's hub
 * listener); pings come from the shared ticker and are written straight to the body. Nothing stands between an
 * event and the socket but `frame` and the tick's join (`coalesced`): no Effect stream, no queue, no merge with the
 * pings, which as a pulled stream cost ~28 channel executors and 6 fibers per response (BENCHMARKS.md). A stream held
 * for hours is `held`.
 *
 * The scope closes when the body does, whoever ends it: `end`, the client going away, the server stopping; so a
 * client that leaves interrupts what `open` forked. A frame is one push, so a ping never splits one.
 */
export const written = <E, R>(
  open: (outlet: Outlet) => Effect.Effect<void, E, R>,
  options: WriteOptions
): Effect.Effect<HttpServerResponse.HttpServerResponse, E, Exclude<R, Scope.Scope> | HttpServerRequest.HttpServerRequest> =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    // A HEAD answer never reads its body, so nothing would ever close what `open` holds.
    if (request.method === "HEAD") return HttpServerResponse.empty(STREAM_HEADERS)
    const scope = yield* Scope.make()
    // Not every request is Node's (a test's, made from a web `Request`): then there is no socket to cork.
    const socket = (NodeHttpServerRequest.toServerResponse(request) as Http.ServerResponse | undefined)?.socket
    const body = new Readable({ read() {} })
    const pending = coalesced((text) => body.push(text))
    let writable = true
    let corked = false
    const write = (text: string) => {
      if (writable) pending.write(text)
    }
    const outlet: Outlet = {
      send: (next) => write(frame(next)),
      end: () => {
        if (!writable) return
        writable = false
        // The platform ends the response on the body's end, a tick after `[DONE]` is written: corked, the socket sends
        // both in one write; `end` uncorks it fully (Node's OutgoingMessage.end).
        corked = socket !== null && socket !== undefined
        socket?.cork()
        body.push(pending.take() + DONE)
        body.push(null)
        // A last piece past the socket's high-water mark (a whole turn replayed and ended in one tick) or a slow
        // client's backlog pauses the pipe into the response, so the body never ends and `end` never uncorks: the
        // corked socket would then never drain. In the usual case the response has ended before this runs.
        if (corked) setImmediate(() => {
          if (socket !== null && socket !== undefined && socket.writableCorked > 0 && !socket.destroyed) socket.uncork()
        })
      }
    }
    write(RETRY)
    if (options.greet) write(GREETING)
    const runFork = Runtime.runFork(yield* Effect.runtime<never>())
    yield* openIn(scope, open, outlet)
    const stopPings = Heartbeat.every(options.heartbeat, () => write(PING))
    body.once("close", () => {
      writable = false
      pending.take()
      // Should the response never end (the client gone first), the socket is not left corked.
      if (corked && socket !== null && socket !== undefined && socket.writableCorked > 0) socket.uncork()
      stopPings()
      runFork(Scope.close(scope, Exit.void))
    })
    return HttpServerResponse.raw(body, STREAM_HEADERS)
  })

/** The held streams of this process, each by the function that ends it: the server ends them all when it stops. */
const heldStreams = GlobalValue.globalValue(Symbol.for("atrium/platform/sse/held"), () => new Set<() => void>())

/** The streams of this process that follow what lives elsewhere (`endingAtStop`), each by what ends it. */
const followers = GlobalValue.globalValue(Symbol.for("atrium/platform/sse/followers"), () => new Set<() => void>())

/**
 * Ends every held stream and every follower (a client resumes with `Last-Event-ID` wherever it reconnects). The
 * server calls it as it stops: its shutdown interrupts no request fiber (the platform's Node server runs each one on
 * its own, until its connection closes), and a held stream has none.
 */
export const endHeld = () => {
  for (const end of [...heldStreams]) end()
  for (const end of [...followers]) end()
}

/**
 * An encoded stream that only follows what lives elsewhere (a background run's log, which any runner can serve): it
 * ends when the server stops, without `[DONE]`, so its client resumes with `Last-Event-ID` on whichever runner it
 * reconnects to. Followed to the run's end, it held its server's stop for the whole `SHUTDOWN_GRACE` (10 s): a run
 * waiting on an approval has no end in sight. A run's own stream is not one: its run may finish within the grace.
 */
export const endingAtStop = <E, R>(stream: Stream.Stream<Uint8Array, E, R>): Stream.Stream<Uint8Array, E, R> =>
  Stream.unwrapScoped(Effect.gen(function*() {
    const stop = yield* Deferred.make<void>()
    const end = () => Deferred.unsafeDone(stop, Exit.void)
    yield* Effect.acquireRelease(Effect.sync(() => followers.add(end)), () => Effect.sync(() => followers.delete(end)))
    return Stream.interruptWhen(stream, Deferred.await(stop))
  }))

/** How many streams are held now: for tests and diagnostics. */
export const heldCount = () => heldStreams.size

/**
 * A stream held for hours (a session subscription), written like `written` but without the request's fiber once its
 * headers are out. Effect's HTTP server keeps a request's fiber, its stack and the contexts every layer provided,
 * until the body ends: ~30 KiB per held response before any of ours (bench/held-floor.ts), twice what a whole
 * subscription may cost. So the route answers through the middleware like every other (its status and headers, CORS and
 * the request id included), and the last step before the server writes that answer takes the Node response over:
 * it writes the headers and what is buffered, and from then on frames and pings go to the socket as they happen.
 * The request's fiber ends there, with its access line (its duration is the time to the headers).
 *
 * The platform skips a response that has ended, and reads that from `writableEnded`; the hand-over marks it so on
 * the instance. Node's own writes look at its internal state, not that property, so the stream stays writable.
 * Should another step replace the answer, the platform pipes the marker body instead, which ends at once and lets
 * go of what `open` holds.
 */
export const held = <E, R>(
  open: (outlet: Outlet) => Effect.Effect<void, E, R>,
  options: { readonly heartbeat: Duration.DurationInput }
): Effect.Effect<HttpServerResponse.HttpServerResponse, E, Exclude<R, Scope.Scope> | HttpServerRequest.HttpServerRequest> =>
  Effect.gen(function*() {
    if ((yield* HttpServerRequest.HttpServerRequest).method === "HEAD") return HttpServerResponse.empty(STREAM_HEADERS)
    const scope = yield* Scope.make()
    let socket: Http.ServerResponse | undefined
    let buffered = RETRY + GREETING
    const pending = coalesced((text) => {
      if (socket === undefined) buffered += text
      else socket.write(text)
    })
    let writable = true
    const write = (text: string) => {
      if (writable) pending.write(text)
    }
    const outlet: Outlet = {
      send: (next) => write(frame(next)),
      end: () => {
        if (!writable) return
        writable = false
        // What waits and the response's end go out as one write.
        const rest = pending.take()
        if (socket === undefined) buffered += rest
        else socket.end(rest)
      }
    }
    // The scope's release runs from Node's callbacks. Its finalizers need no service, and a runtime taken from this
    // request would keep its fiber refs (its whole context) reachable for as long as the stream is held.
    const runFork = Runtime.runFork(Runtime.defaultRuntime)
    yield* openIn(scope, open, outlet)
    let released = false
    const stopPings = Heartbeat.every(options.heartbeat, () => write(PING))
    const release = () => {
      if (released) return
      released = true
      writable = false
      pending.take()
      stopPings()
      heldStreams.delete(endNow)
      runFork(Scope.close(scope, Exit.void))
    }
    const endNow = () => {
      outlet.end()
      if (socket === undefined) release()
    }
    heldStreams.add(endNow)
    const marker = new Readable({
      read() {
        this.push(null)
      }
    })
    marker.once("close", () => {
      if (socket === undefined) release()
    })
    yield* HttpApp.appendPreResponseHandler((request, response) =>
      Effect.sync(() => {
        if (response.body._tag !== "Raw" || response.body.body !== marker) return response
        const node = NodeHttpServerRequest.toServerResponse(request)
        node.writeHead(response.status, response.headers)
        socket = node
        const first = buffered
        buffered = ""
        if (writable) node.write(first)
        else node.end(first)
        // The server's own close listener is there to interrupt the request's fiber, which ends now; it would keep that
        // fiber (and everything it held) reachable for as long as the stream is held.
        node.removeAllListeners("close")
        node.once("close", release)
        Object.defineProperty(node, "writableEnded", { value: true, configurable: true })
        return response
      })
    )
    return HttpServerResponse.raw(marker, STREAM_HEADERS)
  })
