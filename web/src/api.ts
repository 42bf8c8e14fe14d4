import { FetchHttpClient, HttpApiClient, HttpClient, HttpClientError } from "@effect/platform"
import { Effect } from "effect"
import { AtriumApi } from "../../src/Api.js"

/**
 * The platform's one error envelope (`{"error":{"type","message"}}`, Server.ts) replaces HttpApi's `{_tag}` encoding
 * on the wire, so the derived client would not recognise it: every response >= 400 becomes a `ResponseError` whose
 * description carries the envelope, before HttpApi tries to decode it.
 */
const envelope = (client: HttpClient.HttpClient): HttpClient.HttpClient =>
  HttpClient.transformResponse(client, (effect) => Effect.flatMap(effect, (response) =>
    response.status < 400 ? Effect.succeed(response) : Effect.flatMap(
      Effect.orElseSucceed(response.json, () => ({})),
      (body) => {
        const error = (body as { error?: { type?: string; message?: string } }).error
        return Effect.fail(new HttpClientError.ResponseError({
          request: response.request,
          response,
          reason: "StatusCode",
          description: JSON.stringify({
            status: response.status,
            type: error?.type ?? "http_error",
            message: error?.message ?? `The server answered ${response.status}.`
          })
        }))
      }
    )))

const makeClient = HttpApiClient.make(AtriumApi, {
  baseUrl: typeof location === "undefined" ? "http://localhost" : location.origin,
  transformClient: envelope
})

export type Client = Effect.Effect.Success<typeof makeClient>

/** Calls the platform through the client derived from its `HttpApi`; rejects with an `Error` whose message is readable. */
export const call = <A>(f: (client: Client) => Effect.Effect<A, unknown>): Promise<A> =>
  Effect.runPromise(
    makeClient.pipe(
      Effect.flatMap(f),
      Effect.mapError((e) => toError(e)),
      Effect.provide(FetchHttpClient.layer),
      Effect.provideService(FetchHttpClient.RequestInit, { credentials: "same-origin" })
    )
  )

export class ShownError extends Error {
  constructor(message: string, readonly status: number, readonly type: string) {
    super(message)
  }
}

const toError = (e: unknown): ShownError => {
  const tagged = e as { _tag?: string; message?: string; reason?: string; description?: string }
  if (tagged?._tag === "ResponseError" && tagged.reason === "StatusCode" && tagged.description) {
    try {
      const failure = JSON.parse(tagged.description) as { status: number; type: string; message: string }
      return new ShownError(failure.message, failure.status, failure.type)
    } catch {
      // Not ours: fall through.
    }
  }
  if (tagged?._tag === "RequestError") return new ShownError("The network is unreachable. Try again.", 0, "network")
  return new ShownError(tagged?.message ?? "Something went wrong.", 0, tagged?._tag ?? "unknown")
}

/** A list in either shape the platform has used: a bare array, `{data}` or `{data, has_more}`. */
export const itemsOf = <T>(list: unknown): ReadonlyArray<T> => {
  if (Array.isArray(list)) return list as Array<T>
  const data = (list as { data?: unknown; items?: unknown } | null)?.data ?? (list as { items?: unknown } | null)?.items
  return Array.isArray(data) ? (data as Array<T>) : []
}

export const hasMore = (list: unknown): boolean => Boolean((list as { has_more?: unknown } | null)?.has_more)

