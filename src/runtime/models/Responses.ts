import * as AiError from "@effect/ai/AiError"
import type * as LanguageModel from "@effect/ai/LanguageModel"
import * as Sse from "@effect/experimental/Sse"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientError from "@effect/platform/HttpClientError"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import { Data, Duration, Effect, FiberRef, Option, Stream } from "effect"
import type { Options } from "./ChatCompletions.js"
import { CurrentOutputFormat, toTextFormat } from "./OutputFormat.js"
import {
  displayUrl,
  findCause,
  requestDetails,
  scrubber,
  timeoutError,
  tolerateToolArguments,
  transportCause,
  upstreamMessage,
  UpstreamTimeout
} from "./Upstream.js"

/**
 * The OpenAI Responses API through `@effect/ai-openai`, given the guarantees of the Chat Completions provider:
 * - a stall (no byte for `idleTimeout`) or a call over `requestTimeout` is an `UnknownError` caused by
 *   `UpstreamTimeout`, never a hung stream;
 * - an `error` or `response.failed` event fails the stream (the library would turn the first into an `error` part
 *   and the second into an ordinary `finish`);
 * - upstream statuses and transport failures are rebuilt as `HttpResponseError`/`HttpRequestError` with a short
 *   message and no request headers, so neither the key nor a long body reaches a run event;
 * - tool calls whose arguments their schema rejects still reach the engine (`tolerateToolArguments`).
 */

const MODULE = "Responses"

/** An `error` or `response.failed` event, noticed in the bytes before the library decodes them. */
class UpstreamReported extends Data.TaggedError("UpstreamReported")<{ readonly upstreamMessage: string }> {}

const stalled = (request: HttpClientRequest.HttpClientRequest, idle: Duration.Duration) =>
  new HttpClientError.RequestError({
    request,
    reason: "Transport",
    cause: new UpstreamTimeout({ phase: "idle", after: idle }),
    description: "the model upstream stalled"
  })

/** Watches the SSE events going by and fails on the ones that mean the response failed. */
const failOnUpstreamError = <E>(
  bytes: Stream.Stream<Uint8Array, E>,
  request: HttpClientRequest.HttpClientRequest
): Stream.Stream<Uint8Array, E | HttpClientError.RequestError> =>
  Stream.suspend(() => {
    const decoder = new TextDecoder()
    let failure: string | undefined
    const parser = Sse.makeParser((event) => {
      if (event._tag !== "Event" || failure !== undefined) return
      if (event.event !== "error" && event.event !== "response.failed" && !event.data.includes("\"error\"")) return
      try {
        const data: any = JSON.parse(event.data)
        if (data?.type === "error") failure = upstreamMessage(JSON.stringify(data)) ?? "no details"
        else if (data?.type === "response.failed") {
          failure = upstreamMessage(JSON.stringify({ error: data.response?.error ?? "the response failed" })) ??
            "the response failed"
        }
      } catch {
        // Not ours to judge: the library reports undecodable events itself.
      }
    })
    return bytes.pipe(
      Stream.mapChunksEffect((chunk) => {
        for (const bytes of chunk) parser.feed(decoder.decode(bytes, { stream: true }))
        return failure === undefined
          ? Effect.succeed(chunk)
          : Effect.fail(
            new HttpClientError.RequestError({
              request,
              reason: "Transport",
              cause: new UpstreamReported({ upstreamMessage: failure }),
              description: "the model upstream reported an error"
            })
          )
      })
    )
  })

/**
 * The response with its body guarded: no chunk for `idle` fails it, and so does an upstream failure event. Errors
 * are `RequestError`s so the library passes them on instead of trying to read the rest of a stalled body.
 */
const guardResponse = (
  response: HttpClientResponse.HttpClientResponse,
  request: HttpClientRequest.HttpClientRequest,
  idle: Duration.Duration
): HttpClientResponse.HttpClientResponse => {
  const guarded = Object.create(response) as HttpClientResponse.HttpClientResponse
  const bodyTimeout = <A, E>(effect: Effect.Effect<A, E>) =>
    Effect.timeoutFail(effect, {
      duration: idle,
      onTimeout: () =>
        new HttpClientError.ResponseError({
          request,
          response,
          reason: "Decode",
          cause: new UpstreamTimeout({ phase: "idle", after: idle }),
          description: "the model upstream stalled"
        })
    })
  Object.defineProperties(guarded, {
    stream: {
      get: () =>
        failOnUpstreamError(
          response.stream.pipe(Stream.timeoutFail(() => stalled(request, idle), idle)),
          request
        )
    },
    text: { get: () => bodyTimeout(response.text) },
    json: { get: () => bodyTimeout(response.json) }
  })
  return guarded
}

/**
 * Structured output for the Responses upstream: `@effect/ai`'s `streamText` always asks the library for text, so the
 * run's format (`CurrentOutputFormat`, read in the calling fiber) is written into the request's `text.format` here.
 */
const withOutputFormat = (client: HttpClient.HttpClient): HttpClient.HttpClient =>
  HttpClient.mapRequestEffect(client, (request) =>
    Effect.map(FiberRef.get(CurrentOutputFormat), (format) => {
      if (format === undefined || request.body._tag !== "Uint8Array") return request
      try {
        const body = JSON.parse(new TextDecoder().decode(request.body.body))
        return HttpClientRequest.bodyUnsafeJson(request, { ...body, text: { ...body.text, format: toTextFormat(format) } })
      } catch {
        return request
      }
    }))

export const idleGuard = (idle: Duration.Duration) => (client: HttpClient.HttpClient): HttpClient.HttpClient =>
  HttpClient.transform(client, (effect, request) =>
    effect.pipe(
      Effect.timeoutFail({ duration: idle, onTimeout: () => stalled(request, idle) }),
      Effect.map((response) => guardResponse(response, request, idle))
    ))

export const make = (options: Options): Effect.Effect<LanguageModel.Service, never, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const idle = Duration.decode(options.idleTimeout)
    const total = Duration.decode(options.requestTimeout)
    const baseUrl = options.baseUrl.replace(/\/+$/, "")
    const shownUrl = displayUrl(`${baseUrl}/responses`)
    const scrub = scrubber(options.apiKey)

    // Loaded on first use: the library's generated OpenAI schemas are 30 MB of heap and half a second of start-up,
    // for a provider most deployments never configure.
    const [OpenAiClient, OpenAiLanguageModel] = yield* Effect.promise(() =>
      Promise.all([import("@effect/ai-openai/OpenAiClient"), import("@effect/ai-openai/OpenAiLanguageModel")])
    )
    // The scope only bounds the library's header-redaction setting; the client outlives it.
    const client = yield* Effect.scoped(OpenAiClient.make({
      apiKey: Option.getOrUndefined(options.apiKey),
      apiUrl: baseUrl,
      transformClient: (http) => idleGuard(idle)(withOutputFormat(http))
    }))
    const model = yield* OpenAiLanguageModel.make({ model: options.model }).pipe(
      Effect.provideService(OpenAiClient.OpenAiClient, client)
    )

    return guardModel(model, { module: MODULE, idle, total, shownUrl, scrub })
  })

const isErrorLike = (u: unknown): u is { readonly cause?: unknown; readonly description?: string } =>
  typeof u === "object" && u !== null

/**
 * A library's `LanguageModel` (from `@effect/ai-openai`, `@effect/ai-anthropic`) with our guarantees: timeouts as
 * `UpstreamTimeout`, `error` parts failing the stream, errors rebuilt without headers or long bodies, tolerant tool
 * arguments. `idleGuard` must be the library client's `transformClient` for the idle rule to hold.
 */
export const guardModel = (
  model: LanguageModel.Service,
  { idle: _idle, module: MODULE, scrub, shownUrl, total }: {
    readonly module: string
    readonly idle: Duration.Duration
    readonly total: Duration.Duration
    readonly shownUrl: string
    readonly scrub: (text: string) => string
  }
): LanguageModel.Service => {
  const sanitize = (method: string) => (error: unknown): unknown => {
    if (!AiError.isAiError(error)) return error
    const timeout = findCause(error, (u): u is UpstreamTimeout => u instanceof UpstreamTimeout)
    if (timeout !== undefined) return timeoutError(MODULE, method, timeout)
    const reported = findCause(error, (u): u is UpstreamReported => u instanceof UpstreamReported)
    if (reported !== undefined) {
      return new AiError.UnknownError({
        module: MODULE,
        method,
        description: `the model upstream reported an error mid-stream: ${scrub(reported.upstreamMessage)}`
      })
    }
    switch (error._tag) {
      case "HttpRequestError":
        return new AiError.HttpRequestError({
          module: MODULE,
          method,
          reason: error.reason,
          request: requestDetails(shownUrl),
          description: `could not reach the model upstream at ${shownUrl}: ${
            scrub(transportCause(isErrorLike(error.cause) ? error.cause : error))
          }`
        })
      case "HttpResponseError": {
        const message = upstreamMessage(scrub(error.body ?? ""))
        return new AiError.HttpResponseError({
          module: MODULE,
          method,
          reason: error.reason,
          request: requestDetails(shownUrl),
          response: { status: error.response.status, headers: {} },
          ...(message !== undefined ? { body: message } : {}),
          description: error.reason === "StatusCode"
            ? `the model upstream returned ${error.response.status}${message === undefined ? "" : `: ${message}`}`
            : `the model upstream sent a response that could not be read (${error.response.status})`
        })
      }
      default:
        return error
    }
  }

  const overall = (method: string) =>
    Effect.sleep(total).pipe(
      Effect.zipRight(
        Effect.fail(timeoutError(MODULE, method, new UpstreamTimeout({ phase: "request", after: total })))
      )
    )

  const midStreamError = (method: string, error: unknown) =>
    new AiError.UnknownError({
      module: MODULE,
      method,
      description: `the model upstream reported an error mid-stream: ${
        scrub(upstreamMessage(JSON.stringify(error ?? null)) ?? "no details")
      }`
    })

  return tolerateToolArguments({
    generateText: (request: any) =>
      model.generateText(request).pipe(
        Effect.timeoutFail({
          duration: total,
          onTimeout: () =>
            timeoutError(MODULE, "generateText", new UpstreamTimeout({ phase: "request", after: total }))
        }),
        Effect.mapError(sanitize("generateText")),
        Effect.withSpan(`${MODULE}.generateText`)
      ),
    generateObject: (request: any) =>
      model.generateObject(request).pipe(
        Effect.timeoutFail({
          duration: total,
          onTimeout: () =>
            timeoutError(MODULE, "generateObject", new UpstreamTimeout({ phase: "request", after: total }))
        }),
        Effect.mapError(sanitize("generateObject")),
        Effect.withSpan(`${MODULE}.generateObject`)
      ),
    streamText: (request: any) =>
      model.streamText(request).pipe(
        Stream.mapEffect((part: any) =>
          part.type === "error" ? Effect.fail(midStreamError("streamText", part.error)) : Effect.succeed(part)
        ),
        Stream.interruptWhen(overall("streamText")),
        Stream.mapError(sanitize("streamText")),
        Stream.withSpan(`${MODULE}.streamText`)
      )
  } as LanguageModel.Service)
}
