import * as FileSystem from "@effect/platform/FileSystem"
import * as Headers from "@effect/platform/Headers"
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpIncomingMessage from "@effect/platform/HttpIncomingMessage"
import * as HttpLayerRouter from "@effect/platform/HttpLayerRouter"
import * as HttpServer from "@effect/platform/HttpServer"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import { Cause, Context, Duration, Effect, Layer, Option, Redacted, Scope } from "effect"
import { createServer } from "node:http"
import type { Readable } from "node:stream"
import { AgentsHttpLive } from "./agents/Http.js"
import { AtriumApi } from "./Api.js"
import { BillingHttp } from "./billing/Http.js"
import { RunPayerLive } from "./billing/RunPayerLive.js"
import { Wallets, WalletLive } from "./billing/Wallet.js"
import { CredentialsHttpLive } from "./credentials/Http.js"
import { EnvironmentsHttpLive } from "./environments/Http.js"
import { FilesHttpLive } from "./files/Http.js"
import { KnowledgeHttpLive } from "./knowledge/Http.js"
import { KnowledgeSearchLive } from "./knowledge/KnowledgeSearchLive.js"
import { isStorageRoute, StorageRoute } from "./files/StorageHttp.js"
import { accountOf, MISSING_END_USER, missingEndUser } from "./identity/Authentication.js"
import { ApiKeys } from "./identity/ApiKeys.js"
import { AccountHttp, AuthHttp } from "./identity/Http.js"
import { fallbackLoginPage, OAuthRoutes } from "./identity/oauth/Http.js"
import { OAuth } from "./identity/oauth/OAuth.js"
import { Tokens } from "./identity/Tokens.js"
import { MarketHttpLive } from "./market/Http.js"
import { NotificationsHttpLive } from "./notifications/Http.js"
import { McpRoute } from "./mcp/Http.js"
import { ClusterLive } from "./platform/Cluster.js"
import { isOutage, RETRY_AFTER_SECONDS } from "./platform/Outage.js"
import { IdempotencyRepo } from "./platform/http/Repo.js"
import { bearerTokenOf, credentialOf, credentialText } from "./platform/http/Bearer.js"
import { AppConfig } from "./platform/Config.js"
import { DatabaseLive } from "./platform/Database.js"
import { errorBody, errorType } from "./platform/Errors.js"
import { errorResponse } from "./platform/http/ErrorResponse.js"
import { HealthHttp } from "./platform/HealthHttp.js"
import { conditionalAndCompressed } from "./platform/http/Compression.js"
import { pageHeaders, withPagePolicy } from "./platform/http/Csp.js"
import { cookieRefusal, JSON_MEDIA_TYPE, mediaRefusal, preflight, refreshByLink, withCorsHeaders } from "./platform/http/Guards.js"
import { idempotent } from "./platform/http/Idempotency.js"
import { textRefusal } from "./platform/http/Text.js"
import { KeyValueLive } from "./platform/KeyValue.js"
import { accessLog } from "./platform/telemetry/AccessLog.js"
import { clientAddress, isPrivateAddress, routePath, secretMatches } from "./platform/Network.js"
import { makeWebAppRoutes } from "./platform/WebApp.js"
import * as Sse from "./platform/sse/Sse.js"
import { ModelsHttp } from "./runtime/models/Http.js"
import { AgentModelsLive } from "./runs/AgentModels.js"
import { RunsHttpLive } from "./runs/Http.js"
import { ResponsesHttpLive } from "./responses/Http.js"
import { EvolutionHttpLive } from "./evolution/Http.js"
import { DistillationsHttpLive } from "./distillation/Http.js"
import { SessionsHttpLive } from "./sessions/Http.js"
import { SessionLive } from "./sessions/Session.js"

/** Spec 5.2 rule 6: what only the private network may call (matched against `routePath`). */
const INTERNAL = /^\/internal(\/|$)/

/** The platform's own HTML forms (the OAuth consent page): same-origin form posts, not JSON. */
const FORM_ROUTE = /^\/oauth\//

/** Routes under `/api` that need no login token (spec 5.2 rule 5). */
const PUBLIC_API = /^\/api\/(auth\/login|auth\/challenge|auth\/sms\/sendCode|health|market\/.*|payment\/notify\/.*)\/?$/i

/**
 * Turns what HttpApi writes for a failure (`{"_tag": ..., ...}`, including its own `HttpApiDecodeError`) into the
 * platform's one error body, `{"error":{"type","message"}}`, and `retry_after` into a `Retry-After` header.
 */
const toEnvelope = (response: HttpServerResponse.HttpServerResponse, withParam: boolean) => {
  if (response.status < 400 || response.body._tag !== "Uint8Array") return response
  let parsed: { _tag?: unknown; message?: unknown; issues?: unknown; retry_after?: unknown; param?: unknown }
  try {
    parsed = JSON.parse(new TextDecoder().decode(response.body.body))
  } catch {
    return response
  }
  if (typeof parsed?._tag !== "string") return response
  if (parsed._tag === "HttpApiDecodeError") {
    const param = withParam ? paramOf(parsed.issues) : undefined
    return HttpServerResponse.unsafeJson({
      error: {
        ...errorBody("invalid_request", describeDecodeIssues(parsed.issues, parsed.message)).error,
        ...(param === undefined ? {} : { param })
      }
    }, { status: 400 })
  }
  const headers: Record<string, string> = {}
  if (typeof parsed.retry_after === "number") headers["retry-after"] = String(parsed.retry_after)
  const body = errorBody(errorType(parsed._tag), typeof parsed.message === "string" ? parsed.message : "Request failed.")
  return HttpServerResponse.unsafeJson(
    withParam && typeof parsed.param === "string" ? { error: { ...body.error, param: parsed.param } } : body,
    { status: response.status, headers }
  )
}

/** The field of the first decode issue, as OpenAI's clients name it (`messages[0].role`). */
const paramOf = (issues: unknown): string | undefined => {
  const path = Array.isArray(issues) ? (issues[0] as { path?: Array<unknown> } | undefined)?.path : undefined
  if (!Array.isArray(path) || path.length === 0) return undefined
  return path.map((key, index) => typeof key === "number" ? `[${key}]` : index === 0 ? String(key) : `.${String(key)}`).join("")
}

/** Every route of the API as a path pattern and its methods, for a 405 that says which methods a path serves. */
const ROUTES: ReadonlyArray<{ readonly pattern: RegExp; readonly method: string }> = (() => {
  const routes: Array<{ pattern: RegExp; method: string }> = []
  HttpApi.reflect(AtriumApi, {
    onGroup: () => {},
    onEndpoint: ({ endpoint }) => {
      const pattern = endpoint.path.split("/").map((segment) =>
        segment.startsWith(":") ? "[^/]+" : segment.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
      ).join("/")
      routes.push({ pattern: new RegExp(`^${pattern}/?$`), method: endpoint.method })
    }
  })
  return routes
})()

/** The methods the API serves at `path` (none for a path it does not know). */
const allowedMethods = (path: string) => [...new Set(ROUTES.filter((route) => route.pattern.test(path)).map((route) => route.method))]

/** The routes OpenAI's clients call: their errors also carry `code` and `param`, which those clients read. */
const OPENAI_ROUTES = /^\/v1\/(chat\/completions|responses|models|vector_stores)(\/|$)/

/**
 * What every error answer adds for the clients that read it: `WWW-Authenticate` on a 401 (RFC 6750), and on the
 * OpenAI-compatible routes OpenAI's error fields beside the platform's (`code`, `param`; `type` stays the
 * platform's).
 */
const forClients = (request: HttpServerRequest.HttpServerRequest, response: HttpServerResponse.HttpServerResponse) => {
  if (response.status < 400) return response
  let answer = response
  if (answer.status === 401 && answer.headers["www-authenticate"] === undefined) {
    answer = HttpServerResponse.setHeader(answer, "www-authenticate", 'Bearer realm="atrium"')
  }
  if (!OPENAI_ROUTES.test(request.url.split("?")[0]!) || answer.body._tag !== "Uint8Array") return answer
  try {
    const parsed = JSON.parse(new TextDecoder().decode(answer.body.body)) as { error?: Record<string, unknown> }
    if (typeof parsed?.error !== "object" || parsed.error === null) return answer
    const error = { ...parsed.error, code: parsed.error.code ?? parsed.error.type ?? null, param: parsed.error.param ?? null }
    return HttpServerResponse.unsafeJson({ ...parsed, error }, { status: answer.status, headers: answer.headers })
  } catch {
    return answer
  }
}

/** "Invalid request: phone: is missing" — the field first, so a caller sees at once what to fix. */
const describeDecodeIssues = (issues: unknown, fallback: unknown): string => {
  if (!Array.isArray(issues) || issues.length === 0) {
    return `Invalid request: ${typeof fallback === "string" ? fallback.split("\n")[0] : "malformed input"}`
  }
  // A value outside a union of literals is one issue per literal: told as one, listing every allowed value.
  const byPath = new Map<string, Array<string>>()
  for (const issue of issues as Array<{ path?: Array<unknown>; message?: string }>) {
    const path = Array.isArray(issue.path) && issue.path.length > 0 ? issue.path.join(".") : "body"
    byPath.set(path, [...(byPath.get(path) ?? []), issue.message ?? "invalid"])
  }
  const parts = [...byPath].slice(0, 3).map(([path, messages]) => {
    const expected = messages.map((message) => /^Expected (.+), actual (.+)$/s.exec(message))
    if (messages.length > 1 && expected.every((match) => match !== null)) {
      return `${path}: Expected one of ${expected.map((match) => match![1]).join(", ")}; actual ${expected[0]![2]}`
    }
    return `${path}: ${messages.join("; or ")}`
  })
  return `Invalid request: ${parts.join("; ")}`
}

/**
 * Reads a body of unknown length (`Transfer-Encoding: chunked`) up to `limit` bytes; none when it is longer. Past
 * the limit it stops keeping the bytes but lets the rest drain, so the caller gets its 413 instead of a reset
 * connection (the platform's own limit destroys the request, and with it the socket the answer would go out on).
 */
const readLimited = (source: Readable, limit: number) =>
  Effect.async<Option.Option<Buffer>, Error>((resume) => {
    const chunks: Array<Buffer> = []
    let size = 0
    const cleanup = () => {
      source.off("data", onData)
      source.off("end", onEnd)
      source.off("error", onError)
      source.off("close", onClose)
    }
    const onData = (chunk: Buffer) => {
      size += chunk.length
      if (size <= limit) return void chunks.push(chunk)
      cleanup()
      source.resume()
      resume(Effect.succeed(Option.none()))
    }
    const onEnd = () => {
      cleanup()
      resume(Effect.succeed(Option.some(Buffer.concat(chunks))))
    }
    const onError = (error: Error) => {
      cleanup()
      resume(Effect.fail(error))
    }
    const onClose = () => onError(new Error("the request closed before its body ended"))
    source.on("data", onData)
    source.once("end", onEnd)
    source.once("error", onError)
    source.once("close", onClose)
    return Effect.sync(cleanup)
  })

/**
 * A request whose body came without a length, its body read here under the limit: the same request (URL, method,
 * headers, peer address) with the body in memory. None when the body is over the limit; fails when the body could
 * not be read.
 */
const bufferUnknownLength = (request: HttpServerRequest.HttpServerRequest, limit: number) =>
  Effect.flatMap(readLimited(NodeHttpServerRequest.toIncomingMessage(request), limit), (body) =>
    Effect.try(() =>
      Option.map(body, (bytes) => {
        // GET and HEAD carry no body a route reads (and a web Request refuses one).
        const withBody = request.method !== "GET" && request.method !== "HEAD"
        const web = new Request("http://localhost/", { method: request.method, ...(withBody ? { body: bytes } : {}) })
        return HttpServerRequest.fromWeb(web).modify({
          url: request.url,
          headers: request.headers,
          ...Option.match(request.remoteAddress, { onNone: () => ({}), onSome: (remoteAddress) => ({ remoteAddress }) })
        })
      })
    ))

const ErrorEnvelope = HttpLayerRouter.middleware(
  Effect.gen(function*() {
    const config = yield* AppConfig
    const tokens = yield* Tokens
    const idempotencyStore = yield* IdempotencyRepo
    const apiKeys = yield* ApiKeys
    const oauth = yield* OAuth
    /** The account a create's `Idempotency-Key` belongs to; a store failure is a defect (503 in an outage, else 500). */
    const identify = (request: HttpServerRequest.HttpServerRequest) =>
      accountOf(request).pipe(
        Effect.provideService(Tokens, tokens),
        Effect.provideService(ApiKeys, apiKeys),
        Effect.provideService(OAuth, oauth),
        Effect.orDie
      )
    const maxBodySize = Option.some(FileSystem.Size(config.maxBodyBytes))

    /** An unknown `/api` route answers 401 to a caller without a token: it reveals nothing about what exists. */
    const notFound = (request: HttpServerRequest.HttpServerRequest) =>
      Effect.gen(function*() {
        const path = request.url.split("?")[0]!
        const routed = routePath(request.url)
        if (routed.startsWith("/api/") && !PUBLIC_API.test(routed)) {
          const token = credentialText(credentialOf(request))
          const valid = yield* Effect.isSuccess(tokens.authenticate(token))
          if (!valid) return errorResponse(401, "unauthorized", "A valid login token is required.")
        }
        const allowed = allowedMethods(path)
        if (allowed.length > 0) {
          return errorResponse(405, "method_not_allowed", `${path} does not serve ${request.method}; it serves ${allowed.join(", ")}.`, {
            allow: allowed.join(", ")
          })
        }
        return errorResponse(404, "not_found", `No route ${request.method} ${path}.`)
      })

    /**
     * `/internal/*` moves money and decides reviews: the operator's bearer is required, and the private-network
     * check stays as a second wall. Without `INTERNAL_TOKEN` the routes are closed (403) rather than open to
     * whoever shares the host, which a reverse proxy on the same machine makes of every internet client.
     */
    const internalRefusal = (request: HttpServerRequest.HttpServerRequest) => {
      if (!isPrivateAddress(clientAddress(request, config.trustProxy))) {
        return errorResponse(403, "forbidden", "Internal routes answer the private network only.")
      }
      if (Option.isNone(config.internalToken)) {
        return errorResponse(403, "forbidden", "Internal routes are closed: INTERNAL_TOKEN is not set.")
      }
      const presented = bearerTokenOf(request)
      if (presented === undefined || !secretMatches(presented, Redacted.value(config.internalToken.value))) {
        return errorResponse(401, "unauthorized", "Internal routes require the operator's bearer token.", {
          "www-authenticate": "Bearer"
        })
      }
      return undefined
    }

    /** The MCP route reads its own body as bytes (which the request does not cache) and checks it itself. */
    const isMcp = (request: HttpServerRequest.HttpServerRequest) => routePath(request.url).startsWith(routePath(config.mcpPath))

    const guarded = <E, R>(app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
      Effect.gen(function*() {
        let request = yield* HttpServerRequest.HttpServerRequest
        const tooLarge = errorResponse(413, "payload_too_large", `Request body exceeds ${config.maxBodyBytes} bytes.`)
        const declaredLength = Number(request.headers["content-length"] ?? "0")
        // File bytes go to the storage route, which streams them to disk under its own, signed limit.
        const exempt = isStorageRoute(request.url)
        if (declaredLength > config.maxBodyBytes && !exempt) return tooLarge
        if (request.headers["content-length"] === undefined && request.headers["transfer-encoding"] !== undefined && !exempt) {
          const buffered = yield* Effect.either(bufferUnknownLength(request, config.maxBodyBytes))
          if (buffered._tag === "Left") return errorResponse(400, "invalid_request", "The request body could not be read.")
          if (Option.isNone(buffered.right)) return tooLarge
          request = buffered.right.value
        }
        const cors = preflight(request, config.corsOrigins)
        if (cors === "refused") return errorResponse(403, "forbidden", "This origin may not call the API.")
        if (cors !== undefined) return cors
        const refusedCookie = cookieRefusal(request, config.baseUrl, FORM_ROUTE.test(routePath(request.url)) || exempt)
        if (refusedCookie !== undefined) return errorResponse(refusedCookie.status, refusedCookie.type, refusedCookie.message)
        if (missingEndUser(request)) return errorResponse(400, "invalid_request", MISSING_END_USER)
        const byLink = refreshByLink(request)
        if (byLink !== undefined) return byLink
        const badMedia = mediaRefusal(request, exempt || isMcp(request))
        // A path the API does not serve stays a 404, whatever its body.
        if (badMedia !== undefined && allowedMethods(request.url.split("?")[0]!).length > 0) return badMedia
        const contentType = request.headers["content-type"]
        if (contentType !== undefined && !/^application\/json\s*(;|$)/i.test(contentType) && JSON_MEDIA_TYPE.test(contentType)) {
          // HttpApi reads only `application/json` as JSON: an `application/<x>+json` body is the same JSON to it.
          request = request.modify({ headers: Headers.set(request.headers, "content-type", "application/json") })
        }
        const badText = yield* textRefusal(request, exempt || isMcp(request), maxBodySize)
        if (badText !== undefined) return badText
        if (INTERNAL.test(routePath(request.url))) {
          const refused = internalRefusal(request)
          if (refused !== undefined) return refused
        }
        const served = app.pipe(
          Effect.provideService(HttpServerRequest.HttpServerRequest, request),
          Effect.provideService(HttpIncomingMessage.MaxBodySize, maxBodySize)
        )
        return yield* idempotent(idempotencyStore, request, identify(request), served).pipe(
          // `param` is OpenAI's field: the platform's own routes keep the envelope to `type` and `message`.
          Effect.map((response) => toEnvelope(response, OPENAI_ROUTES.test(request.url.split("?")[0]!))),
          Effect.catchAllCause((cause) => {
            if (Cause.isInterruptedOnly(cause)) return Effect.failCause(cause)
            // HttpApi lets a body it could not read escape as a defect: it is still the caller's bad input.
            const error = Cause.squash(cause) as { _tag?: string } | undefined
            if (error?._tag === "RouteNotFound") return notFound(request)
            if (error?._tag === "RequestError" && String((error as { cause?: unknown }).cause).includes("maxBytes")) {
              return Effect.succeed(tooLarge)
            }
            if (error?._tag === "RequestError") {
              return Effect.succeed(errorResponse(400, "invalid_request", "The request body could not be read as JSON."))
            }
            // PostgreSQL, Redis or an entity's owner unreachable: an outage, not a bug; the caller retries (issue 33).
            if (isOutage(cause)) {
              return Effect.as(
                Effect.logWarning("request failed during an outage", Cause.squash(cause)),
                errorResponse(503, "service_unavailable", "A service this request needs is unavailable; retry shortly.", {
                  "retry-after": String(RETRY_AFTER_SECONDS)
                })
              )
            }
            return Effect.as(
              Effect.logError("unhandled failure", cause),
              errorResponse(500, "internal_error", "Something went wrong on our side.")
            )
          }),
          Effect.map((response) => withCorsHeaders(request, config.corsOrigins, response))
        )
      })

    return (app) =>
      Effect.gen(function*() {
        const original = yield* HttpServerRequest.HttpServerRequest
        return yield* conditionalAndCompressed(original, withPagePolicy(forClients(original, yield* guarded(app))))
      })
  }),
  { global: true }
)

const ApiRoutes = HttpLayerRouter.addHttpApi(AtriumApi, { openapiPath: "/openapi.json" }).pipe(
  Layer.provide([HealthHttp, AuthHttp, AccountHttp, ModelsHttp.pipe(Layer.provide(AgentModelsLive)), BillingHttp, AgentsHttpLive, RunsHttpLive, ResponsesHttpLive, SessionsHttpLive, MarketHttpLive, NotificationsHttpLive, FilesHttpLive, KnowledgeHttpLive, EnvironmentsHttpLive, CredentialsHttpLive, EvolutionHttpLive, DistillationsHttpLive]),
  Layer.provide([RunPayerLive, KnowledgeSearchLive]),
  Layer.provide(Wallets.Default)
)

/** The web app (web/dist): its pages, its assets and the login page. */
const WebAppRoutes = makeWebAppRoutes(fallbackLoginPage)

/**
 * The API reference, built on its first request: Scalar's bundle is 6 MB of module source and its page 6 MB more,
 * a twentieth of the process's idle memory for a page few deployments ever open.
 */
const DocsRoute = HttpLayerRouter.use(Effect.fnUntraced(function*(router) {
  const scope = yield* Effect.scope
  const docs = yield* Effect.cached(
    Effect.promise(() => import("@effect/platform/HttpApiScalar")).pipe(
      // A router of its own (Layer.build, not the app's memo map, which would hand back the platform's router).
      Effect.flatMap((Scalar) =>
        // Scalar's default fonts come from fonts.scalar.com: the page uses the system's, and loads nothing from
        // another host (its policy, `withPagePolicy`, would refuse it anyway).
        Layer.build(Layer.provideMerge(
          Scalar.layerHttpLayerRouter({ api: AtriumApi, path: "/docs", scalar: { withDefaultFonts: false } }),
          HttpLayerRouter.layer
        ))
      ),
      Effect.map((context) => Context.get(context, HttpLayerRouter.HttpRouter).asHttpEffect()),
      Scope.extend(scope)
    )
  )
  /**
   * The page policy of the reference (platform/http/Csp.ts), computed once from the page Scalar wrote: its bundle
   * and configuration run by hash, and it compiles WebAssembly (`'wasm-unsafe-eval'`, not JavaScript's eval).
   */
  const withPolicy = yield* Effect.cached(Effect.map(Effect.flatten(docs), (page) =>
    page.body._tag === "Uint8Array" ? pageHeaders(new TextDecoder().decode(page.body.body), true) : pageHeaders("", true)))
  yield* router.add("GET", "/docs", Effect.orDie(Effect.zipWith(Effect.flatten(docs), withPolicy, HttpServerResponse.setHeaders)))
}))

export const Routes = Layer.mergeAll(ApiRoutes, DocsRoute, OAuthRoutes, WebAppRoutes, StorageRoute, McpRoute, ErrorEnvelope).pipe(
  Layer.provide([Tokens.Default, ApiKeys.Default, OAuth.Default, IdempotencyRepo.Default])
)

/** The entities this process runs, on one cluster runner over the database. */
const Entities = Layer.mergeAll(WalletLive, SessionLive.pipe(Layer.provide([RunPayerLive, KnowledgeSearchLive]), Layer.provide(Wallets.Default))).pipe(
  Layer.provideMerge(ClusterLive)
)

/**
 * Everything the routes stand on: configuration, the database with its migrations, the key-value store, and the
 * cluster with its entities.
 */
export const Infrastructure = Entities.pipe(
  Layer.provideMerge(Layer.mergeAll(AppConfig.Default, DatabaseLive, KeyValueLive))
)

/**
 * Node's `server.close()` waits for every open connection, so one idle keep-alive socket or a stalled upload would
 * hold shutdown forever. This finalizer runs first (it is built last): it closes idle connections at once and cuts
 * the rest after `SHUTDOWN_GRACE`. Request fibers, streams included, are interrupted before it runs.
 */
export const HttpServerLive = Layer.unwrapEffect(
  Effect.map(AppConfig, (config) => {
    const server = createServer()
    const grace = Layer.scopedDiscard(Effect.addFinalizer(() =>
      Effect.sync(() => {
        // Held streams have no request fiber that the server's shutdown would interrupt.
        Sse.endHeld()
        server.closeIdleConnections()
        setTimeout(() => server.closeAllConnections(), Duration.toMillis(config.shutdownGrace)).unref()
      })
    ))
    return grace.pipe(Layer.provideMerge(NodeHttpServer.layer(() => server, { port: config.port, host: config.host })))
  })
).pipe(Layer.provide(AppConfig.Default))

/**
 * The whole platform as one layer: serve `routes` on `HOST:PORT` until the scope closes. It also yields the
 * `HttpServer` (whose address tells a test which random port it got) and the infrastructure (a test's view of the
 * database). `ServerLive` serves the platform's own routes; a test may add routes of its own.
 */
export const makeServer = <E, R>(routes: Layer.Layer<never, E, R>) => Layer.unwrapEffect(
  Effect.map(HttpLayerRouter.HttpRouter, (router) => HttpServer.serve(router.asHttpEffect(), accessLog))
).pipe(
  HttpServer.withLogAddress,
  // Order matters: every route is registered before the socket listens, so a request never reaches a server
  // that has no handler yet (Node would leave it hanging). `HttpLayerRouter.serve` builds them the other way round.
  Layer.provideMerge(HttpServerLive),
  Layer.provide(routes),
  Layer.provide([HttpLayerRouter.layer, NodeHttpServer.layerContext]),
  Layer.provideMerge(Infrastructure)
)

export const ServerLive = makeServer(Routes)
