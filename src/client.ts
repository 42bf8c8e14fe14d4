import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as HttpApiClient from "@effect/platform/HttpApiClient"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import { Effect } from "effect"
import { AtriumApi } from "./Api.js"

/**
 * A typed client of the platform's API for TypeScript callers, derived from the same `HttpApi` the server serves
 * (`import { makeAtriumClient } from "atrium/client"`): every group and endpoint with its request and answer types.
 * The README shows it in use.
 *
 * Failures arrive as the endpoint's tagged errors (`NotFound`, `InsufficientCredits`, ...): the wire carries the
 * platform's envelope (`{"error": {"type": "not_found", "message"}}`), which the client turns back into the tagged
 * form (`{"_tag": "NotFound", "message"}`) before HttpApi decodes it.
 */
export interface AtriumClientOptions {
  /** Where the platform is, e.g. `http://127.0.0.1:8080`. */
  readonly baseUrl: string
  /** A login token, an API key (`sk_...`) or an OAuth access token. */
  readonly token?: string
  /** With an API key, the end user the calls are for (`X-End-User-Id`). */
  readonly endUserId?: string
}

/** `not_found` -> `NotFound`: the inverse of the server's `errorType`. */
const tagOf = (type: string) => type.split("_").map((word) => word.charAt(0).toUpperCase() + word.slice(1)).join("")

/** An error answer in the envelope, re-encoded as HttpApi's tagged error body; anything else as it came. */
const asTaggedError = (response: HttpClientResponse.HttpClientResponse) =>
  response.status < 400 || !/json/i.test(response.headers["content-type"] ?? "")
    ? Effect.succeed(response)
    : Effect.map(Effect.orElseSucceed(response.json, () => undefined), (body) => {
      const error = (body as { error?: { type?: unknown; message?: unknown } } | undefined)?.error
      if (typeof error?.type !== "string") return response
      const tagged = { ...error, _tag: tagOf(error.type), message: typeof error.message === "string" ? error.message : "" }
      return HttpClientResponse.fromWeb(
        response.request,
        new Response(JSON.stringify(tagged), { status: response.status, headers: { "content-type": "application/json" } })
      )
    })

export const makeAtriumClient = (options: AtriumClientOptions) =>
  HttpApiClient.make(AtriumApi, {
    baseUrl: options.baseUrl,
    transformClient: (client) =>
      client.pipe(
        HttpClient.mapRequest((request) => {
          const withToken = options.token === undefined ? request : HttpClientRequest.bearerToken(request, options.token)
          return options.endUserId === undefined ? withToken : HttpClientRequest.setHeader(withToken, "x-end-user-id", options.endUserId)
        }),
        HttpClient.transformResponse(Effect.flatMap(asTaggedError))
      )
  })

/** `makeAtriumClient` on the platform's `fetch`, for callers that run it with `Effect.runPromise`. */
export const makeAtriumFetchClient = (options: AtriumClientOptions) =>
  makeAtriumClient(options).pipe(Effect.provide(FetchHttpClient.layer))
