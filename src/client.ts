import * as Sse from "@effect/experimental/Sse"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as HttpApiClient from "@effect/platform/HttpApiClient"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientError from "@effect/platform/HttpClientError"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import { Effect, FiberRef, Option, ParseResult, Ref, Schedule, Schema, type Scope, Stream } from "effect"
import { globalValue } from "effect/GlobalValue"
import { AnyError, AtriumApi, type EdgeError } from "./Api.js"
export type { EdgeError } from "./Api.js"
import { RunPayload } from "./runs/Api.js"
import { PublicEvent, RunFailed } from "./runtime/Domain.js"
import type { ApprovalEvent, MessageEvent } from "./sessions/Api.js"

export { PublicEvent, RunFailed } from "./runtime/Domain.js"
/** The branded ids the endpoints take (`FileId.make("file_…")`): a brand names the kind of id, the wire is the string. */
export { FileId } from "./files/Domain.js"
export { VectorStoreId } from "./knowledge/Domain.js"
export { ResponseId } from "./responses/Api.js"
export { ScheduleId } from "./schedules/Domain.js"
export { AgentId, ApiKeyId, AppId, EnvironmentId, SessionId, UserId } from "./platform/Ids.js"
export { ApprovalId, FactId, RunId } from "./runtime/Domain.js"

/**
 * A typed client of the platform's API for TypeScript callers, derived from the same `HttpApi` the server serves
 * (`import { makeAtriumClient } from "atrium/client"`): every group and endpoint with its request and answer types.
 * It imports the API's contract only (docs/architecture.md, "Contracts"), so it runs wherever `fetch` does.
 *
 * Failures arrive as their tagged errors (`NotFound`, `InsufficientCredits`, ...): the wire carries the platform's
 * envelope (`{"error": {"type": "not_found", "message"}}`), which is each error's own encoding, so HttpApi decodes
 * it by the endpoint's declared errors. What the platform's edge answers beside them (a 415, a 404 for an unknown
 * route, a 503 in an outage) is decoded through every wire error's schema (`EdgeError`); `Retry-After` fills
 * `retry_after` where the error has one.
 *
 * The streamed answers (docs/events.md) are `Stream`s of the typed public events: `runs.run` (unless
 * `stream: false`), `runs.events` (a background run's log), `sessions.send` and `sessions.subscribe` (the last two
 * of those resume from the last `seq` they saw, with `Last-Event-ID`, when the connection drops). Webhooks and
 * schedules are the derived groups as they are (`webhooks.*`, `schedules.*`), as are evaluations (`evals.*`: datasets,
 * rows, eval runs and their results, compare; a publish refused by an eval gate fails with `EvalGateFailed`). A run that ends in `run.failed` fails its stream with `RunFailed`;
 * so does a failed run on `runs.chatCompletions` and `responses.create`.
 */
export interface AtriumClientOptions {
  /** Where the platform is, e.g. `http://127.0.0.1:8080`. */
  readonly baseUrl: string
  /** A login token, an API key (`sk_...`) or an OAuth access token. */
  readonly token?: string
  /** With an API key, the end user the calls are for (`X-End-User-Id`). */
  readonly endUserId?: string
}

const decodeAnyError = Schema.decodeUnknownOption(Schema.parseJson(AnyError))

/**
 * The `Retry-After` of the answer, on the errors that carry it (`retry_after`): the envelope's body leaves it to the
 * header.
 */
const withRetryAfter = <E>(error: E, response: HttpClientResponse.HttpClientResponse): E => {
  const seconds = Number(response.headers["retry-after"])
  const constructor = (error as { constructor?: { fields?: Record<string, unknown> } } | null)?.constructor
  if (!Number.isInteger(seconds) || constructor?.fields?.["retry_after"] === undefined) return error
  if ((error as { retry_after?: unknown }).retry_after !== undefined) return error
  return new (constructor as unknown as new(props: object) => E)({ ...(error as object), retry_after: seconds })
}

/** The routes whose failed runs answer an error status with the run's `code` (docs/runs.md). */
const RUN_ROUTES = /^\/v1\/(chat\/completions|responses)\/?$/
/** A failed run's answer there: OpenAI's error object with the run's `code` (src/runs/OpenAi.ts `runError`). */
const RunFailure = Schema.parseJson(Schema.Struct({ error: Schema.Struct({ code: Schema.String, message: Schema.String }) }))
const decodeRunFailure = Schema.decodeUnknownOption(RunFailure)

/**
 * A failed answer as its tagged error, decoded through the wire errors' own schemas (a failed run's as `RunFailed`);
 * an answer that is neither stays the transport's `ResponseError`.
 */
const failureOf = (
  response: HttpClientResponse.HttpClientResponse
): Effect.Effect<never, EdgeError | RunFailed | HttpClientError.ResponseError> =>
  Effect.flatMap(
    Effect.orElseSucceed(response.arrayBuffer, () => new ArrayBuffer(0)),
    (bytes): Effect.Effect<never, EdgeError | RunFailed | HttpClientError.ResponseError> => {
      const text = new TextDecoder().decode(bytes)
      const tagged = decodeAnyError(text)
      if (Option.isSome(tagged)) return Effect.fail(withRetryAfter(tagged.value, response))
      const run = RUN_ROUTES.test(new URL(response.request.url).pathname) ? decodeRunFailure(text) : Option.none()
      if (Option.isSome(run)) return Effect.fail(new RunFailed({ code: run.value.error.code, message: run.value.error.message }))
      return Effect.fail(new HttpClientError.ResponseError({ request: response.request, response, reason: "StatusCode" }))
    }
  )

/**
 * The answer the current call got, kept by the client's transport for the call's own decoding (the same fiber): a
 * failure HttpApi could not decode by the endpoint's declared errors is decoded again through every wire error.
 */
const currentResponse = globalValue(
  Symbol.for("atrium/client/currentResponse"),
  () => FiberRef.unsafeMake<Option.Option<HttpClientResponse.HttpClientResponse>>(Option.none())
)

/** A call's failure as its tagged error: the declared one (with its `Retry-After`), or one decoded again. */
const decodedFailure = <A>(effect: Effect.Effect<A, unknown>): Effect.Effect<A, unknown> =>
  Effect.catchAll(effect, (error) =>
    Effect.flatMap(FiberRef.get(currentResponse), (response) => {
      if (Option.isNone(response) || response.value.status < 400) return Effect.fail(error)
      const undecoded = ParseResult.isParseError(error) ||
        (HttpClientError.isHttpClientError(error) && error._tag === "ResponseError" && error.reason === "Decode")
      return undecoded ? failureOf(response.value) : Effect.fail(withRetryAfter(error, response.value))
    }))

/** One event of an SSE stream: its name (none for an unnamed one), its `id`, its data. */
interface Frame {
  readonly event?: string
  readonly id?: string
  readonly data: string
}

/**
 * The events of an SSE body, read with `@effect/experimental`'s SSE parser (the one the web app and the server's
 * model clients use), up to `data: [DONE]`. Comments, heartbeats and `retry:` blocks are no events. The parser names
 * an unnamed event `message`, which no event of ours is called: such a frame is unnamed here, as on the wire.
 *
 * Line ends reach the parser as LF: the grammar allows CR LF, LF and CR, and this version of the parser mishandles CR
 * (a CR LF split across two pieces reads as two line ends, so the event ends early and loses its name; within one
 * piece, CR LF before LF lines can merge two events). A CR at the end of a piece waits for the next one.
 */
const framesOf = <E>(bytes: Stream.Stream<Uint8Array, E>): Stream.Stream<Frame, E> =>
  Stream.suspend(() => {
    const parsed: Array<Frame> = []
    const parser = Sse.makeParser((event) => {
      if (event._tag !== "Event") return
      parsed.push({
        ...(event.event === "message" ? {} : { event: event.event }),
        ...(event.id === undefined ? {} : { id: event.id }),
        data: event.data
      })
      // No cap on an event's size: the caller chose the server it reads (the parser's 10 MiB default would drop one).
    }, { maxEventSize: Number.MAX_SAFE_INTEGER })
    let carriedCr = false
    const feed = (text: string) => {
      const joined = carriedCr ? `\r${text}` : text
      carriedCr = joined.endsWith("\r")
      parser.feed((carriedCr ? joined.slice(0, -1) : joined).replace(/\r\n?/g, "\n"))
      return parsed.splice(0)
    }
    return bytes.pipe(
      Stream.decodeText(),
      Stream.mapConcat(feed),
      Stream.concat(Stream.suspend(() => Stream.fromIterable(carriedCr ? feed("\n") : []))),
      Stream.takeWhile((frame) => frame.data !== "[DONE]")
    )
  })

const KNOWN_EVENTS: ReadonlySet<string> = new Set(
  PublicEvent.members.map((member) => (member.fields.type.literals as ReadonlyArray<string>)[0]!)
)
const decodeEvent = Schema.decodeUnknown(Schema.parseJson(PublicEvent))

/** The public events of a stream: names the client does not know are skipped (docs/events.md: consumers ignore them). */
const eventsOf = <E>(frames: Stream.Stream<Frame, E>): Stream.Stream<PublicEvent, E | ParseResult.ParseError> =>
  frames.pipe(
    Stream.filter((frame) => frame.event === undefined || KNOWN_EVENTS.has(frame.event)),
    Stream.mapEffect((frame) =>
      Effect.map(decodeEvent(frame.data), (event) =>
        event.seq === undefined && frame.id !== undefined && /^\d+$/.test(frame.id) ? { ...event, seq: Number(frame.id) } : event
      )
    )
  )

/** A run's events, failing with `RunFailed` where the run failed. */
const untilFailed = <E>(events: Stream.Stream<PublicEvent, E>): Stream.Stream<PublicEvent, E | RunFailed> =>
  Stream.mapEffect(events, (event) =>
    event.type === "run.failed" ? Effect.fail(new RunFailed({ code: event.code, message: event.message })) : Effect.succeed(event)
  )

export type RunEvents = Stream.Stream<PublicEvent, EdgeError | RunFailed | HttpClientError.HttpClientError | ParseResult.ParseError>
/** A session's events: a `run.failed` there is an event like the others (the session goes on). */
export type SessionEvents = Stream.Stream<PublicEvent, EdgeError | RunFailed | HttpClientError.HttpClientError | ParseResult.ParseError>

export interface SubscribeRequest {
  readonly path: { readonly id: string }
  readonly urlParams?: { readonly after?: number }
  /** The `seq` of the last event already seen: the stream starts after it. */
  readonly lastEventId?: number
  /** How many times a dropped connection is opened again (from the last `seq` seen); 5 unless given. */
  readonly reconnects?: number
}

const authorizer = (options: AtriumClientOptions) => (request: HttpClientRequest.HttpClientRequest) => {
  const withToken = options.token === undefined ? request : HttpClientRequest.bearerToken(request, options.token)
  return options.endUserId === undefined ? withToken : HttpClientRequest.setHeader(withToken, "x-end-user-id", options.endUserId)
}

/** The client HttpApi derives from the API's contract. */
const derive = (options: AtriumClientOptions) =>
  HttpApiClient.make(AtriumApi, {
    baseUrl: options.baseUrl,
    transformClient: (client) =>
      client.pipe(
        HttpClient.mapRequest(authorizer(options)),
        HttpClient.tap((response) => FiberRef.set(currentResponse, Option.some(response)))
      ),
    transformResponse: decodedFailure
  })
type Derived = Effect.Effect.Success<ReturnType<typeof derive>>

/** An endpoint's call without `withResponse`: its answer, its errors. */
type Call<F> = F extends (request: infer Q) => Effect.Effect<infer A, infer E, infer R>
  ? (request: Omit<Exclude<Q, undefined>, "withResponse">) => Effect.Effect<Exclude<A, readonly [unknown, unknown]>, E, R>
  : never
type RunView = Effect.Effect.Success<ReturnType<Call<Derived["runs"]["run"]>>>
type RunError = Effect.Effect.Error<ReturnType<Call<Derived["runs"]["run"]>>>

/** `runs.run`: one result with `stream: false`, else the run's events. */
export interface Run {
  (request: { readonly payload: typeof RunPayload.Encoded & { readonly stream: false } }): Effect.Effect<RunView, RunError>
  (request: { readonly payload: typeof RunPayload.Encoded }): RunEvents
}

/**
 * A call that may fail as a failed run; its headers (an `Idempotency-Key` for a retry that must not run twice) may be
 * left out.
 */
type OrRunFailed<F> = F extends (request: infer Q extends { readonly headers: unknown }) => Effect.Effect<infer A, infer E, infer R>
  ? (request: Omit<Q, "headers"> & { readonly headers?: Q["headers"] }) => Effect.Effect<A, E | EdgeError | RunFailed | HttpClientError.ResponseError, R>
  : never

/** The typed client: the derived one, with the streamed endpoints as `Stream`s. */
export type AtriumClient = Omit<Derived, "runs" | "responses" | "sessions"> & {
  readonly runs: Omit<Derived["runs"], "run" | "chatCompletions" | "runEvents"> & {
    readonly run: Run
    readonly chatCompletions: OrRunFailed<Call<Derived["runs"]["chatCompletions"]>>
    /** `GET /v1/runs/:id`: any run of the caller's, foreground or background. */
    readonly get: Derived["runs"]["getRun"]
    /** `POST /v1/runs/:id/cancel`: idempotent; a background run stops within a second. */
    readonly cancel: Derived["runs"]["cancelRun"]
    /**
     * A background run's events from its log, from the start or after `lastEventId`, live while it runs, from any
     * runner; a dropped connection resumes from the last `seq` seen. A run that ends `run.failed` fails the stream
     * with `RunFailed`, as `run` does.
     */
    readonly events: (request: SubscribeRequest) => RunEvents
  }
  readonly responses: Omit<Derived["responses"], "create"> & {
    readonly create: OrRunFailed<Call<Derived["responses"]["create"]>>
    /**
     * A background response's events (`GET /v1/responses/:id?stream=true`), OpenAI's Responses events as JSON objects
     * with their `sequence_number`, from the start or after `startingAfter`, live to its end (docs/runs.md).
     */
    readonly events: (request: { readonly path: { readonly id: string }; readonly startingAfter?: number }) => Stream.Stream<
      { readonly type: string; readonly sequence_number: number; readonly [key: string]: unknown },
      EdgeError | RunFailed | HttpClientError.HttpClientError
    >
  }
  readonly sessions: Omit<Derived["sessions"], "send" | "subscribe"> & {
    readonly send: (request: {
      readonly path: { readonly id: string }
      readonly payload: typeof MessageEvent.Encoded | typeof ApprovalEvent.Encoded
    }) => RunEvents
    readonly subscribe: (request: SubscribeRequest) => SessionEvents
  }
}

export const makeAtriumClient = (options: AtriumClientOptions): Effect.Effect<AtriumClient, never, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const authorize = authorizer(options)
    const api = yield* derive(options)
    const http = (yield* HttpClient.HttpClient).pipe(HttpClient.mapRequest(authorize))
    const base = options.baseUrl.replace(/\/+$/, "")

    /** Opens an SSE answer: its events once the status is 2xx, its tagged error otherwise. */
    const open = (request: HttpClientRequest.HttpClientRequest): SessionEvents =>
      Stream.unwrapScoped(
        Effect.gen(function*(): Effect.fn.Return<
          Stream.Stream<PublicEvent, HttpClientError.HttpClientError | ParseResult.ParseError>,
          EdgeError | RunFailed | HttpClientError.HttpClientError,
          Scope.Scope
        > {
          const response = yield* http.execute(HttpClientRequest.setHeader(request, "accept", "text/event-stream"))
          if (response.status >= 400) return yield* failureOf(response)
          if (response.status >= 300) {
            return yield* new HttpClientError.ResponseError({ request, response, reason: "StatusCode" })
          }
          return eventsOf(framesOf(response.stream))
        })
      )

    /** A failed run on the OpenAI-compatible routes (a 402, 429, 5xx with the run's `code`) as `RunFailed`. */
    const runFailure = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
      Effect.catchIf(
        effect,
        (error): error is E & HttpClientError.ResponseError =>
          HttpClientError.isHttpClientError(error) && error._tag === "ResponseError" && error.reason === "StatusCode",
        (error) => failureOf(error.response)
      )

    const run = ((request: { readonly payload: typeof RunPayload.Encoded }) =>
      request.payload.stream === false
        ? Effect.flatMap(Schema.decode(RunPayload)({ ...request.payload, stream: false }), (payload) => api.runs.run({ headers: {}, payload }))
        : untilFailed(open(HttpClientRequest.bodyUnsafeJson(HttpClientRequest.post(`${base}/v1/agents/run`), request.payload)))) as Run

    /** One turn (a message) or the rest of one (an approval's answer), as its events. */
    const send = (request: {
      readonly path: { readonly id: string }
      readonly payload: typeof MessageEvent.Encoded | typeof ApprovalEvent.Encoded
    }): RunEvents =>
      untilFailed(open(HttpClientRequest.bodyUnsafeJson(
        HttpClientRequest.post(`${base}/v1/sessions/${encodeURIComponent(request.path.id)}/events`),
        request.payload
      )))

    /** The events at `url` from `after` (or `lastEventId`) on, then live ones; a dropped connection resumes. */
    const resuming = (url: string, request: SubscribeRequest): SessionEvents =>
      Stream.unwrap(Effect.map(Ref.make(request.lastEventId ?? request.urlParams?.after), (last) => {
        const connect = Stream.unwrap(Effect.map(Ref.get(last), (seq) => {
          const get = HttpClientRequest.get(url)
          return open(seq === undefined ? get : HttpClientRequest.setHeader(get, "last-event-id", String(seq)))
        }))
        return connect.pipe(
          Stream.tap((event) => event.seq === undefined ? Effect.void : Ref.set(last, event.seq)),
          Stream.retry(Schedule.intersect(
            Schedule.recurWhile((error: unknown) => HttpClientError.isHttpClientError(error) && error._tag === "RequestError"),
            Schedule.intersect(Schedule.recurs(request.reconnects ?? 5), Schedule.spaced("1 second"))
          ))
        )
      }))

    const subscribe = (request: SubscribeRequest): SessionEvents =>
      resuming(`${base}/v1/sessions/${encodeURIComponent(request.path.id)}/events`, request)

    const runEvents = (request: SubscribeRequest): RunEvents =>
      untilFailed(resuming(`${base}/v1/runs/${encodeURIComponent(request.path.id)}/events`, request))

    return {
      ...api,
      runs: {
        ...api.runs,
        run,
        chatCompletions: (request: Parameters<AtriumClient["runs"]["chatCompletions"]>[0]) => runFailure(api.runs.chatCompletions({ ...request, headers: request.headers ?? {} })),
        get: api.runs.getRun,
        cancel: api.runs.cancelRun,
        events: runEvents
      },
      responses: {
        ...api.responses,
        create: (request: Parameters<AtriumClient["responses"]["create"]>[0]) => runFailure(api.responses.create({ ...request, headers: request.headers ?? {} })),
        events: (request) => {
          const after = request.startingAfter === undefined ? "" : `&starting_after=${request.startingAfter}`
          const get = HttpClientRequest.get(`${base}/v1/responses/${encodeURIComponent(request.path.id)}?stream=true${after}`)
          return Stream.unwrapScoped(Effect.gen(function*() {
            const response = yield* http.execute(HttpClientRequest.setHeader(get, "accept", "text/event-stream"))
            if (response.status >= 400) return yield* failureOf(response)
            return Stream.map(framesOf(response.stream), (frame) => JSON.parse(frame.data) as { type: string; sequence_number: number })
          }))
        }
      },
      sessions: { ...api.sessions, send, subscribe }
    }
  })

/** `makeAtriumClient` on the platform's `fetch`, for callers that run it with `Effect.runPromise`. */
export const makeAtriumFetchClient = (options: AtriumClientOptions) =>
  makeAtriumClient(options).pipe(Effect.provide(FetchHttpClient.layer))
