import * as HttpApp from "@effect/platform/HttpApp"
import * as HttpServerError from "@effect/platform/HttpServerError"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Context, Effect, Exit, Metric, Option, Tracer } from "effect"
import { randomUUID } from "node:crypto"
import { httpRequestDuration, httpRequests } from "./Metrics.js"

/**
 * One line per request, its request id on the response, and the request metrics: the outermost middleware of the
 * HTTP server (`HttpServer.serve(app, accessLog)` in Server.ts), so it sees every request, routed or not, and the
 * status of whatever answered.
 */

/** What the layers below learn about a request and the access line reports: filled in as the request goes. */
export interface RequestFacts {
  /** The route pattern the router matched (`/v1/sessions/:id`), never the raw path: it may carry ids or secrets. */
  route: string | undefined
  /** The account the credentials belong to, once authentication resolved them. */
  accountId: string | undefined
}

export class CurrentRequestFacts extends Context.Tag("atrium/platform/telemetry/CurrentRequestFacts")<
  CurrentRequestFacts,
  RequestFacts
>() {}

/** Tells the access line whose request this is (called by authentication; nothing happens outside a request). */
export const noteAccount = (accountId: string) =>
  Effect.serviceOption(CurrentRequestFacts).pipe(
    Effect.map(Option.map((facts) => void (facts.accountId = accountId)))
  )

export const REQUEST_ID_HEADER = "x-request-id"

/** A caller's id is kept when it is one short token (a UUID, a ULID, a proxy's hex id); anything else is replaced. */
const SANE_REQUEST_ID = /^[A-Za-z0-9._:@-]{1,128}$/
const END_USER_ID = /^[A-Za-z0-9._:@-]{1,128}$/

export const requestIdOf = (request: HttpServerRequest.HttpServerRequest): string => {
  const given = request.headers[REQUEST_ID_HEADER]
  return given !== undefined && SANE_REQUEST_ID.test(given) ? given : randomUUID()
}

/**
 * The router writes the matched pattern onto the request's span (`http.route`), and nowhere else a middleware can
 * read. So the request runs under a span that is the real one in every respect (ids, parent, attributes all read
 * through to it) except that it remembers that one attribute.
 */
const capturingRoute = (parent: Tracer.AnySpan | undefined, facts: RequestFacts): Tracer.Span => {
  const capture = (key: string, value: unknown) => {
    if (key === "http.route" && typeof value === "string") facts.route = value
  }
  if (parent !== undefined && parent._tag === "Span") {
    const span: Tracer.Span = Object.create(parent)
    ;(span as { attribute: Tracer.Span["attribute"] }).attribute = (key, value) => {
      capture(key, value)
      parent.attribute(key, value)
    }
    return span
  }
  return { _tag: "Span", attribute: capture } as unknown as Tracer.Span
}

const UNMATCHED = "unmatched"

export const accessLog = <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R> =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const requestId = requestIdOf(request)
    const started = process.hrtime.bigint()
    const facts: RequestFacts = { route: undefined, accountId: undefined }
    yield* HttpApp.appendPreResponseHandler((_request, response) =>
      Effect.succeed(HttpServerResponse.setHeader(response, REQUEST_ID_HEADER, requestId))
    )
    const parent = Option.getOrUndefined(yield* Effect.serviceOption(Tracer.ParentSpan))
    return yield* app.pipe(
      // Whatever else the request logs (a failure, say) names it too.
      Effect.annotateLogs("request_id", requestId),
      Effect.provideService(CurrentRequestFacts, facts),
      Effect.provideService(Tracer.ParentSpan, capturingRoute(parent, facts)),
      Effect.onExit((exit) =>
        Effect.gen(function*() {
          const seconds = Number(process.hrtime.bigint() - started) / 1e9
          // Interrupted with nothing sent: the client went away first (nginx's 499).
          const status = Exit.isSuccess(exit)
            ? exit.value.status
            : (yield* Effect.option(Effect.map(HttpServerError.causeResponse(exit.cause), ([response]) => response.status)))
              .pipe(Option.getOrElse(() => 499))
          const route = facts.route ?? UNMATCHED
          const tagged = <T extends Metric.Metric<any, any, any>>(metric: T): T =>
            metric.pipe(
              Metric.tagged("method", request.method),
              Metric.tagged("route", route),
              Metric.tagged("status", String(status))
            ) as T
          yield* Metric.increment(tagged(httpRequests))
          yield* Metric.update(tagged(httpRequestDuration), seconds)
          const endUser = request.headers["x-end-user-id"]
          yield* Effect.logInfo("request").pipe(
            Effect.annotateLogs({
              method: request.method,
              route,
              status,
              duration_ms: Math.round(seconds * 1e6) / 1e3,
              request_id: requestId,
              account_id: facts.accountId ?? null,
              end_user: endUser !== undefined && END_USER_ID.test(endUser) ? endUser : null
            })
          )
        })
      )
    )
  })
