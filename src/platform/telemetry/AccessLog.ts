import * as HttpApp from "@effect/platform/HttpApp"
import * as HttpServerError from "@effect/platform/HttpServerError"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Context, Effect, Exit, FiberRef, HashMap, LogLevel, Metric, MetricKey, MetricLabel, Option, Tracer } from "effect"
import { randomUUID } from "node:crypto"
import type { UserId } from "../Ids.js"
import { httpRequestDurationKey, httpRequestsKey } from "./Metrics.js"

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
export const noteAccount = (accountId: UserId) =>
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
  return routeOnlySpan(capture)
}

/**
 * The request's span when there is none (tracing off, so the server makes no span per request): it only remembers
 * the route. It is a whole span all the same, since any span begun below takes it as its parent and reads its
 * context; that context stops propagation, so those spans start traces of their own, as they would with no parent.
 */
const routeOnlySpan = (capture: (key: string, value: unknown) => void): Tracer.Span => ({
  _tag: "Span",
  name: "http.server",
  spanId: "",
  traceId: "",
  parent: Option.none(),
  context: Context.make(Tracer.DisablePropagation, true),
  status: { _tag: "Started", startTime: BigInt(0) },
  attributes: new Map(),
  links: [],
  sampled: false,
  kind: "server",
  end: () => {},
  attribute: capture,
  event: () => {},
  addLinks: () => {}
})

const UNMATCHED = "unmatched"

type RequestMetrics = {
  readonly requests: Metric.Metric.Counter<number>
  readonly duration: Metric.Metric.Histogram<number>
}

/**
 * The request metrics of one method, route pattern and status, made once from keys that carry the labels:
 * `Metric.tagged` would make a new labelled key on every update, which the registry hashes and compares. Bounded
 * (methods, patterns and statuses are few; past the bound a combination is made afresh each time).
 */
const taggedMetrics = new Map<string, RequestMetrics>()
const TAGGED_MAX = 2048

const requestMetrics = (method: string, route: string, status: number): RequestMetrics => {
  const key = `${method} ${status} ${route}`
  const known = taggedMetrics.get(key)
  if (known !== undefined) return known
  const labels = [MetricLabel.make("method", method), MetricLabel.make("route", route), MetricLabel.make("status", String(status))]
  const made = {
    requests: Metric.fromMetricKey(MetricKey.taggedWithLabels(httpRequestsKey, labels)),
    duration: Metric.fromMetricKey(MetricKey.taggedWithLabels(httpRequestDurationKey, labels))
  }
  if (taggedMetrics.size < TAGGED_MAX) taggedMetrics.set(key, made)
  return made
}


export const accessLog = <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R> =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const requestId = requestIdOf(request)
    const started = process.hrtime.bigint()
    const facts: RequestFacts = { route: undefined, accountId: undefined }
    yield* HttpApp.appendPreResponseHandler((_request, response) =>
      Effect.succeed(HttpServerResponse.setHeader(response, REQUEST_ID_HEADER, requestId))
    )
    // The request has this fiber to itself (the server forks one per request, and this middleware is its
    // outermost), so what the layers below must see is set on the fiber for the rest of the request rather than
    // scoped with `annotateLogs`/`provideService`, each of which copies the fiber's locals twice.
    // Whatever else the request logs (a failure, say) names it too.
    yield* FiberRef.update(FiberRef.currentLogAnnotations, HashMap.set("request_id", requestId as unknown))
    yield* FiberRef.update(FiberRef.currentContext, (context) => {
      const parent = Option.getOrUndefined(Context.getOption(context, Tracer.ParentSpan))
      return Context.add(Context.add(context, CurrentRequestFacts, facts), Tracer.ParentSpan, capturingRoute(parent, facts))
    })
    return yield* app.pipe(
      Effect.onExit((exit) => {
        // One step for the common answer: the metrics updated and the line written (when Info is logged) on the
        // fiber directly, as `Metric.increment`, `Metric.update` and the level check would, each a step of its own.
        const finish = (status: number) =>
          Effect.withFiberRuntime<void>((fiber) => {
            const seconds = Number(process.hrtime.bigint() - started) / 1e9
            const route = facts.route ?? UNMATCHED
            const metrics = requestMetrics(request.method, route, status)
            const labels = fiber.getFiberRef(FiberRef.currentMetricLabels)
            metrics.requests.unsafeUpdate(1, labels)
            metrics.duration.unsafeUpdate(seconds, labels)
            if (LogLevel.greaterThan(fiber.getFiberRef(FiberRef.currentMinimumLogLevel), LogLevel.Info)) return Effect.void
            const endUser = request.headers["x-end-user-id"]
            return Effect.logInfo("request").pipe(
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
        if (Exit.isSuccess(exit)) return finish(exit.value.status)
        // Interrupted with nothing sent: the client went away first (nginx's 499).
        return Effect.flatMap(
          Effect.option(Effect.map(HttpServerError.causeResponse(exit.cause), ([response]) => response.status)),
          (status) => finish(Option.getOrElse(status, () => 499))
        )
      })
    )
  })
