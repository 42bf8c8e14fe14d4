import * as AiError from "@effect/ai/AiError"
import * as Tool from "@effect/ai/Tool"
import { toolParameters } from "./AdapterParts.js"
import type * as LanguageModel from "@effect/ai/LanguageModel"
import type * as Toolkit from "@effect/ai/Toolkit"
import * as Sse from "@effect/experimental/Sse"
import type * as HttpClient from "@effect/platform/HttpClient"
import type * as HttpClientError from "@effect/platform/HttpClientError"
import type * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import { Data, Duration, Effect, Option, ParseResult, Predicate, Redacted, Schema, Stream } from "effect"

/**
 * What every model upstream shares, whatever its dialect (Chat Completions, Responses): timeouts and the mapping of
 * any failure to the `code` and `message` of `run.failed`, scrubbing and excerpting upstream text, request details
 * without secrets, tool arguments that do not parse, tools that tolerate them, and SSE parsing of a response body.
 */

/** Marks an `AiError` as a timeout, so `describeFailure` can tell a stuck upstream from a broken one. */
export class UpstreamTimeout extends Data.TaggedError("UpstreamTimeout")<{
  readonly phase: "idle" | "request"
  readonly after: Duration.Duration
}> {
  override get message(): string {
    // "timed out" on purpose: callers that only look at the message should still see a timeout.
    return this.phase === "idle"
      ? `the model upstream timed out: nothing received for ${Duration.format(this.after)}`
      : `the model call timed out: not finished within ${Duration.format(this.after)}`
  }
}

export const timeoutError = (module: string, method: string, timeout: UpstreamTimeout): AiError.UnknownError =>
  new AiError.UnknownError({ module, method, description: timeout.message, cause: timeout })

export type FailureCode =
  | "upstream_timeout"
  | "upstream_unavailable"
  | "upstream_rate_limited"
  | "upstream_error"
  | "upstream_rejected"
  | "model_output_invalid"

/** The first error along a chain of `cause`s that passes `guard`. */
export const findCause = <A>(error: unknown, guard: (u: unknown) => u is A): A | undefined => {
  let current: unknown = error
  for (let depth = 0; depth < 8 && Predicate.isObject(current); depth++) {
    if (guard(current)) return current
    current = (current as { readonly cause?: unknown }).cause
  }
  return undefined
}

/** An upstream status that retrying the same request cannot fix: a 4xx other than 408 (timeout) and 429 (limit). */
export const rejects = (status: number) => status >= 400 && status < 500 && status !== 408 && status !== 429

const findTimeout = (error: unknown) =>
  findCause(error, (u): u is UpstreamTimeout => u instanceof UpstreamTimeout)

/**
 * The `code` and `message` for `run.failed` when a model call fails. Codes: `upstream_timeout` (stalled or too
 * slow), `upstream_unavailable` (no connection), `upstream_rate_limited` (429), `upstream_error` (another status,
 * an error reported mid-stream, a cut stream), `model_output_invalid` (a chunk that is not JSON, a tool that was
 * not offered, a prompt the upstream cannot carry). The message is short, human and free of secrets.
 */
export const describeFailure = (error: AiError.AiError): { readonly code: FailureCode; readonly message: string } => {
  const timeout = findTimeout(error)
  if (timeout !== undefined) return { code: "upstream_timeout", message: capitalise(timeout.message) }
  switch (error._tag) {
    case "HttpResponseError": {
      const status = error.response.status
      const detail = error.description ?? `the model upstream returned ${status}${excerptSuffix(error.body)}`
      // A 4xx other than 408 and 429 is the upstream refusing this request (a prompt too long, a parameter it does
      // not take): the same request fails the same way, so it is final for the client (issue 44 gap 1).
      const code = status === 429 ? "upstream_rate_limited" : rejects(status) ? "upstream_rejected" : "upstream_error"
      return { code, message: capitalise(detail) }
    }
    case "HttpRequestError":
      return {
        code: "upstream_unavailable",
        message: capitalise(error.description ?? "the model upstream could not be reached")
      }
    case "MalformedOutput":
      return {
        code: "model_output_invalid",
        message: capitalise(error.description ?? "the model upstream sent a response that could not be understood")
      }
    case "MalformedInput":
      return {
        code: "model_output_invalid",
        message: capitalise(error.description ?? "the conversation could not be encoded for the model upstream")
      }
    case "UnknownError":
      return { code: "upstream_error", message: capitalise(error.description ?? "the model call failed") }
  }
}

const capitalise = (text: string) => text.length === 0 ? text : text[0]!.toUpperCase() + text.slice(1)

const EXCERPT = 200

/**
 * The human part of an upstream error body, shortened: OpenAI's `{error: {message}}`, FastAPI's `{detail}`, a bare
 * `{message}` or `{error: "..."}`, else the raw text.
 */
export const upstreamMessage = (body: string | undefined): string | undefined => {
  if (body === undefined) return undefined
  const text = body.trim()
  if (text.length === 0) return undefined
  let message: unknown = text
  try {
    const json: unknown = JSON.parse(text)
    if (Predicate.isObject(json)) {
      const record = json as Record<string, unknown>
      const inner = record.error
      message = Predicate.isObject(inner) && typeof (inner as Record<string, unknown>).message === "string"
        ? (inner as Record<string, unknown>).message
        : typeof inner === "string"
        ? inner
        : typeof record.message === "string"
        ? record.message
        : typeof record.detail === "string"
        ? record.detail
        : text
    }
  } catch {
    // Not JSON: the raw text is the message.
  }
  const flat = String(message).replace(/\s+/g, " ").trim()
  return flat.length > EXCERPT ? `${flat.slice(0, EXCERPT)}…` : flat
}

const excerptSuffix = (body: string | undefined) => {
  const message = upstreamMessage(body)
  return message === undefined ? "" : `: ${message}`
}

/** Upstream text may echo what we sent; the key must not travel on into a run event or a log. */
export const scrubber = (apiKey: Option.Option<Redacted.Redacted>) => (text: string): string =>
  Option.match(apiKey, {
    onNone: () => text,
    onSome: (key) => {
      const secret = Redacted.value(key)
      return secret.length < 4 ? text : text.split(secret).join("[redacted]")
    }
  })

/** The URL without userinfo, fit for an error message. */
export const displayUrl = (url: string): string => {
  try {
    const parsed = new URL(url)
    parsed.username = ""
    parsed.password = ""
    return parsed.toString()
  } catch {
    return url.replace(/\/\/[^/@]*@/, "//")
  }
}

export const requestDetails = (url: string): typeof AiError.HttpRequestDetails.Type => ({
  method: "POST",
  url,
  urlParams: [],
  hash: Option.none(),
  // Deliberately empty: the real headers carry the API key.
  headers: {}
})

/** The most specific message along an error's causes: what actually went wrong on the wire. */
export const transportCause = (error: {
  readonly cause?: unknown
  readonly description?: string | undefined
  readonly reason?: string
}): string => {
  let current: unknown = error.cause
  let message: string | undefined
  // fetch wraps the interesting error (ECONNREFUSED, ENOTFOUND) in a generic "fetch failed".
  for (let depth = 0; depth < 4 && Predicate.isObject(current); depth++) {
    const candidate = (current as { readonly message?: unknown }).message
    if (typeof candidate === "string" && candidate.length > 0) message = candidate
    if (typeof candidate === "string" && candidate !== "fetch failed" && candidate.length > 0) break
    current = (current as { readonly cause?: unknown }).cause
  }
  return message ?? error.description ?? error.reason ?? "unknown error"
}

/** Upstream text on one line, cut at `max` characters. */
export const excerpt = (text: string, max = EXCERPT) => {
  const flat = text.replace(/\s+/g, " ").trim()
  return flat.length > max ? `${flat.slice(0, max)}…` : flat
}

/**
 * Parses a tool call's accumulated arguments. Text that is not JSON still yields a call, marked
 * `{ __invalid_arguments: raw }`, so the engine reports a failed tool and the model can try again, instead of the
 * whole run dying on one bad fragment. Empty arguments mean "no arguments" (Ollama and others send "").
 */
export const parseToolArguments = (raw: string): unknown => {
  if (raw.trim().length === 0) return {}
  try {
    const parsed: unknown = JSON.parse(raw)
    // Some models double-encode: a JSON string holding the JSON object.
    if (typeof parsed === "string") {
      try {
        const inner: unknown = JSON.parse(parsed)
        if (Predicate.isObject(inner)) return inner
      } catch {
        // Keep the string; the tool's schema will reject it.
      }
    }
    return parsed
  } catch {
    return { [INVALID_ARGUMENTS]: raw }
  }
}

export const INVALID_ARGUMENTS = "__invalid_arguments"

export const isInvalidArguments = (params: unknown): params is { readonly __invalid_arguments: string } =>
  Predicate.isObject(params) && typeof (params as Record<string, unknown>)[INVALID_ARGUMENTS] === "string"

/**
 * `LanguageModel` decodes every `tool-call` part with the tool's parameter schema, so one call with arguments the
 * schema rejects would fail the whole stream. The engine resolves tools itself and wants to report that call as a
 * failed tool instead. The parameter schema is therefore swapped for one that decodes as before when it can and
 * otherwise passes the model's arguments through untouched (`Toolkit.handle` then fails with the precise reason);
 * the `__invalid_arguments` marker always passes through. The JSON Schema sent upstream stays the original one.
 */
const lenientTools = new WeakMap<Tool.Any, Tool.Any>()

const lenientTool = (tool: Tool.Any): Tool.Any => {
  if (Tool.isProviderDefined(tool)) return tool
  const cached = lenientTools.get(tool)
  if (cached !== undefined) return cached
  const original = tool.parametersSchema as unknown as Schema.Schema<unknown, unknown, never>
  const decodeOriginal = ParseResult.decodeUnknown(original)
  const parametersSchema = Schema.transformOrFail(Schema.Unknown, Schema.Unknown, {
    strict: true,
    decode: (input) =>
      isInvalidArguments(input) ? ParseResult.succeed(input) : Effect.orElseSucceed(decodeOriginal(input), () => input),
    encode: ParseResult.succeed
  }).annotations({ jsonSchema: toolParameters(tool) })
  const lenient = Object.assign(Object.create(Object.getPrototypeOf(tool)), tool, { parametersSchema }) as Tool.Any
  lenientTools.set(tool, lenient)
  return lenient
}

const lenientToolkit = <T extends Toolkit.WithHandler<any>>(toolkit: T): T => {
  const tools: Record<string, Tool.Any> = {}
  for (const [key, tool] of Object.entries(toolkit.tools as Record<string, Tool.Any>)) tools[key] = lenientTool(tool)
  return { ...toolkit, tools }
}

const withLenientToolkit = <O extends { readonly toolkit?: unknown }>(options: O): O => {
  const toolkit = options.toolkit
  if (toolkit === undefined || toolkit === null) return options
  return {
    ...options,
    toolkit: Effect.isEffect(toolkit)
      ? Effect.map(toolkit as Effect.Effect<Toolkit.WithHandler<any>>, lenientToolkit)
      : lenientToolkit(toolkit as Toolkit.WithHandler<any>)
  }
}

/** A `LanguageModel.Service` whose tool calls survive arguments their tool's schema rejects (see above). */
export const tolerateToolArguments = (service: LanguageModel.Service): LanguageModel.Service =>
  ({
    generateText: (options: any) => service.generateText(withLenientToolkit(options)),
    generateObject: (options: any) => service.generateObject(withLenientToolkit(options)),
    streamText: (options: any) => service.streamText(withLenientToolkit(options))
  }) as LanguageModel.Service

// =============================================================================
// Provider
// =============================================================================

/** SSE events as `{event, data}`, across chunk boundaries that fall anywhere (mid-line, mid-character). */
export const sseEvents = <E, R>(
  bytes: Stream.Stream<Uint8Array, E, R>,
  onTooLarge: () => E
): Stream.Stream<{ readonly event: string; readonly data: string }, E, R> =>
  Stream.suspend(() => {
    const pending: Array<{ readonly event: string; readonly data: string }> = []
    const parser = Sse.makeParser((event) => {
      if (event._tag === "Event") pending.push({ event: event.event, data: event.data })
    })
    return bytes.pipe(
      Stream.decodeText(),
      Stream.mapConcatEffect((text) =>
        parser.feed(text) === undefined ? Effect.succeed(pending.splice(0)) : Effect.fail(onTooLarge())
      )
    )
  })

/** Who sends a request upstream, for the errors it may become: the provider's module, the call, the URL shown. */
export interface UpstreamCall {
  readonly module: string
  readonly method: string
  /** The URL without credentials (`displayUrl`). */
  readonly shownUrl: string
  readonly idle: Duration.Duration
  readonly idleError: () => AiError.AiError
  readonly scrub: (text: string) => string
}

/**
 * Sends one request to a model upstream under the idle rule. A transport failure becomes an `HttpRequestError` naming
 * the shown URL and the cause on the wire; the response comes back whatever its status.
 */
export const executeUpstream = (
  client: HttpClient.HttpClient,
  request: HttpClientRequest.HttpClientRequest,
  call: UpstreamCall
): Effect.Effect<HttpClientResponse.HttpClientResponse, AiError.AiError> =>
  client.execute(request).pipe(
    Effect.timeoutFail({ duration: call.idle, onTimeout: call.idleError }),
    Effect.catchIf(
      (error): error is HttpClientError.HttpClientError => !AiError.isAiError(error),
      (error) =>
        Effect.fail(
          new AiError.HttpRequestError({
            module: call.module,
            method: call.method,
            reason: error._tag === "RequestError" ? error.reason : "Transport",
            request: requestDetails(call.shownUrl),
            description: `could not reach the model upstream at ${call.shownUrl}: ${call.scrub(transportCause(error))}`
          })
        )
    )
  )

/**
 * A non-2xx answer as an `HttpResponseError`: its status, its `Retry-After` (fallbacks and clients honour it) and the
 * upstream's own message, credentials scrubbed. The body is read under the same idle rule: a 500 that then stalls must
 * not hang the run.
 */
export const statusError = (response: HttpClientResponse.HttpClientResponse, call: UpstreamCall) =>
  Effect.gen(function*() {
    const text = yield* response.text.pipe(Effect.timeout(call.idle), Effect.orElseSucceed(() => ""))
    const message = upstreamMessage(call.scrub(text))
    const retryAfter = response.headers["retry-after"]
    return yield* new AiError.HttpResponseError({
      module: call.module,
      method: call.method,
      reason: "StatusCode",
      request: requestDetails(call.shownUrl),
      response: { status: response.status, headers: retryAfter === undefined ? {} : { "retry-after": retryAfter } },
      ...(message !== undefined ? { body: message } : {}),
      description: `the model upstream returned ${response.status}${message === undefined ? "" : `: ${message}`}`
    })
  })
