import { FetchHttpClient, HttpApiClient, HttpClient, HttpClientError, type HttpClientResponse } from "@effect/platform"
import { Effect, FiberRef, Option, ParseResult, Schema } from "effect"
import { AnyError, AtriumApi } from "../../src/Api.js"
import { errorType } from "../../src/platform/Errors.js"

/**
 * A failed answer as the page shows it: its status, its envelope's `type` and `message`, and `Retry-After`. The
 * envelope is each wire error's own encoding (src/platform/Errors.ts), so HttpApi decodes a declared error into its
 * class; what the platform's edge answers beside them (a 415, a 503 in an outage) is decoded through every wire
 * error's schema (`AnyError`). The status and `Retry-After` are the answer's own.
 */
interface Failure {
  readonly status: number
  readonly retryAfter: number | undefined
  readonly error: unknown
}

/** The answer the current call got, kept by the transport for the call's own failure (the same fiber). */
const currentResponse = FiberRef.unsafeMake<Option.Option<HttpClientResponse.HttpClientResponse>>(Option.none())

const decodeAnyError = Schema.decodeUnknownOption(Schema.parseJson(AnyError))
const isWireError = Schema.is(AnyError)

/** A call's failure with the answer it came with: the declared error, or the body decoded through every wire error. */
const withAnswer = (effect: Effect.Effect<unknown, unknown>): Effect.Effect<unknown, unknown> =>
  Effect.catchAll(effect, (error) =>
    Effect.flatMap(FiberRef.get(currentResponse), (last): Effect.Effect<never, unknown> => {
      if (Option.isNone(last) || last.value.status < 400) return Effect.fail(error)
      const response = last.value
      const failure = (decoded: unknown): Failure => ({
        status: response.status,
        retryAfter: Number(response.headers["retry-after"] ?? 0) || undefined,
        error: decoded
      })
      const undecoded = ParseResult.isParseError(error) ||
        (HttpClientError.isHttpClientError(error) && error._tag === "ResponseError" && error.reason === "Decode")
      if (!undecoded) return Effect.fail(failure(error))
      return Effect.flatMap(
        Effect.orElseSucceed(response.arrayBuffer, () => new ArrayBuffer(0)),
        (bytes) => Effect.fail(failure(Option.getOrElse(decodeAnyError(new TextDecoder().decode(bytes)), () => error)))
      )
    }))

const makeClient = HttpApiClient.make(AtriumApi, {
  baseUrl: typeof location === "undefined" ? "http://localhost" : location.origin,
  transformClient: HttpClient.tap((response) => FiberRef.set(currentResponse, Option.some(response))),
  transformResponse: withAnswer
})

export type Client = Effect.Effect.Success<typeof makeClient>

/** Calls the platform through the client derived from its `HttpApi`; rejects with an `Error` whose message is readable. */
export const call = <A>(f: (client: Client) => Effect.Effect<A, unknown>): Promise<A> =>
  // Not `runPromise`: it rejects with a FiberFailure wrapping the error, so `instanceof ShownError` never held.
  Effect.runPromise(
    makeClient.pipe(
      Effect.flatMap(f),
      Effect.mapError((e) => toError(e)),
      Effect.provide(FetchHttpClient.layer),
      Effect.provideService(FetchHttpClient.RequestInit, { credentials: "same-origin" }),
      Effect.either
    )
  ).then((result) => {
    if (result._tag === "Left") throw result.left
    return result.right
  })

export class ShownError extends Error {
  constructor(message: string, readonly status: number, readonly type: string, readonly retryAfter?: number) {
    super(message)
    // A 401 tells the whole app that this browser's login no longer counts (session.tsx says so on every page).
    if (status === 401 && typeof dispatchEvent === "function") dispatchEvent(new Event(UNAUTHORIZED))
  }
}

/** The window event of a request answered 401. */
export const UNAUTHORIZED = "atrium:unauthorized"

/** Words a person should never read: the texts of Schema's parse errors. */
const JARGON = /Schema|declaration|Expected|└─|<->|readonly |ParseError|Type side|Encoded side|\{ *\}|\bactual\b/

/** What each request field is called on the pages, and what a good value looks like. */
const FIELDS: Record<string, { label: string; hint: string }> = {
  phone: { label: "Phone number", hint: "Write it in international format: + and the country code, for example +8613800000000." },
  code: { label: "Code", hint: "It is the 6 digits of the SMS we sent." },
  amount: { label: "Amount", hint: "Write a positive number of credits, with at most 6 decimal places, for example 100 or 12.5." },
  name: { label: "Name", hint: "Give it a name of 1 to 100 characters." },
  price: { label: "Price", hint: "Write a number of credits, for example 5 or 2.5." },
  "billing.price": { label: "Price", hint: "Write a number of credits, for example 5 or 2.5." },
  "billing.free_trial_per_user": { label: "Free trial messages", hint: "Write a whole number from 0 to 1000." },
  free_trial_per_user: { label: "Free trial messages", hint: "Write a whole number from 0 to 1000." },
  mcp_servers: { label: "Remote tools", hint: "Each server needs a name, an https URL, an auth kind and its tools." },
  tools: { label: "Tools", hint: "Each tool may appear once." },
  subagents: { label: "Subagents", hint: "List identifiers of experts that exist." },
  model: { label: "Model", hint: "Pick one of the listed models." },
  title: { label: "Title", hint: "Keep it under 200 characters." },
  reason: { label: "Reason", hint: "Write a reason of 1 to 2000 characters." },
  message: { label: "Message", hint: "Write something to send." },
  email: { label: "Email", hint: "Write an email address like name@example.com." },
  cron: { label: "Cron", hint: "Write 5 fields: minute hour day-of-month month day-of-week, for example 0 9 * * 1-5." },
  timezone: { label: "Time zone", hint: "Write a zone name like Europe/Paris, America/New_York or UTC." },
  input: { label: "Message", hint: "Write what each run sends to the expert." },
  url: { label: "Endpoint URL", hint: "Write the full https:// address of your endpoint." },
  events: { label: "Events", hint: "Choose at least one event to send." }
}

const fieldOf = (path: string) =>
  FIELDS[path] ?? FIELDS[path.replace(/\.\d+(\.|$)/g, "$1").replace(/\.$/, "")] ?? FIELDS[path.split(".")[0]!] ??
    { label: path.replace(/[._]/g, " ").replace(/^./, (c) => c.toUpperCase()), hint: "" }

/** A sentence for a field that was refused: the problem as said, or, when the problem is schema text, the field's hint. */
const fieldSentence = (path: string, problem: string) => {
  const field = fieldOf(path)
  if (problem.trim() === "" || JARGON.test(problem)) return `${field.label} is not valid. ${field.hint}`.trim()
  if (/is missing/.test(problem)) return `${field.label} is missing. ${field.hint}`.trim()
  return `${field.label}: ${problem.replace(/^./, (c) => c.toLowerCase()).replace(/\.?$/, ".")}`
}

const BY_TYPE: Record<string, string> = {
  unauthorized: "You are not logged in, or your login has ended. Log in again.",
  forbidden: "You are not allowed to do that.",
  not_found: "That was not found: it may have been deleted.",
  internal_error: "Something went wrong on our side. Try again in a moment.",
  service_unavailable: "The service is busy or unavailable right now. Try again in a moment.",
  insufficient_credits: "Your wallet does not have enough credits for this. Top up in the wallet and try again.",
  network: "The network is unreachable. Check your connection and try again."
}

/**
 * Every failure the pages show, in words (issue 27 item 5): the platform's message when it is a sentence; for a
 * refused field, its name and what a good value looks like; never the text of a schema.
 */
export const humanize = (type: string, message: string): string => {
  // What browsers say when a request never reached the platform ("Failed to fetch" is no reason a person can use).
  if (/^(Failed to fetch|NetworkError|Load failed|network error)/i.test(message)) return BY_TYPE.network!
  const invalid = /^Invalid request: ([A-Za-z0-9_.[\]]+): (.*)$/s.exec(message.split("\n")[0] ?? "")
  if (invalid) return fieldSentence(invalid[1]!.replace(/\[(\d+)\]/g, ".$1"), invalid[2]!.split(";")[0]!)
  if (message && !JARGON.test(message)) return message.replace(/^Invalid request: /, "").replace(/^./, (c) => c.toUpperCase())
  return BY_TYPE[type] ?? (type === "invalid_request" ? "Some of what you entered is not valid. Check the form and try again." : "Something went wrong. Try again.")
}

/** A failure of the client itself: a payload the API definition refuses before it is sent. */
const parseErrorSentence = (error: ParseResult.ParseError) => {
  const issues = ParseResult.ArrayFormatter.formatErrorSync(error)
  const first = issues.find((issue) => issue.path.length > 0) ?? issues[0]
  const path = (first?.path ?? []).map(String).filter((p) => p !== "payload" && p !== "urlParams" && p !== "path").join(".")
  return path ? fieldSentence(path, "") : "Some of what you entered is not valid. Check the form and try again."
}

const isFailure = (e: unknown): e is Failure =>
  typeof e === "object" && e !== null && "status" in e && "error" in e && typeof (e as Failure).status === "number"

const toError = (e: unknown): ShownError => {
  if (isFailure(e)) {
    if (isWireError(e.error)) {
      const error = e.error as { readonly _tag: string; readonly message: string }
      const type = errorType(error._tag)
      return new ShownError(humanize(type, error.message), e.status, type, e.retryAfter)
    }
    return new ShownError(`The server answered ${e.status}. Try again in a moment.`, e.status, "http_error", e.retryAfter)
  }
  const tagged = e as { _tag?: string; message?: string; reason?: string; description?: string }
  if (tagged?._tag === "RequestError") return new ShownError(BY_TYPE.network!, 0, "network")
  if (ParseResult.isParseError(e)) return new ShownError(parseErrorSentence(e), 0, "invalid_request")
  if (tagged?._tag === "ResponseError") return new ShownError("The server's answer could not be read. Reload the page and try again.", 0, "decode")
  return new ShownError(humanize(tagged?._tag ?? "unknown", tagged?.message ?? ""), 0, tagged?._tag ?? "unknown")
}

/** A failed `fetch` answer (the routes read without the derived client) as a `ShownError` in words. */
export const failureOf = async (response: Response): Promise<ShownError> => {
  const body = await response.json().catch(() => ({})) as { error?: { type?: string; message?: string } }
  const type = body.error?.type ?? "http_error"
  return new ShownError(
    humanize(type, body.error?.message ?? ""),
    response.status,
    type,
    Number(response.headers.get("retry-after") ?? 0) || undefined
  )
}

/** A list in either shape the platform has used: a bare array, `{data}` or `{data, has_more}`. */
export const itemsOf = <T>(list: unknown): ReadonlyArray<T> => {
  if (Array.isArray(list)) return list as Array<T>
  const data = (list as { data?: unknown; items?: unknown } | null)?.data ?? (list as { items?: unknown } | null)?.items
  return Array.isArray(data) ? (data as Array<T>) : []
}

export const hasMore = (list: unknown): boolean => Boolean((list as { has_more?: unknown } | null)?.has_more)

