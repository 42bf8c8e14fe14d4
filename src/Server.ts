import {
  FileSystem,
  HttpApiScalar,
  HttpIncomingMessage,
  HttpLayerRouter,
  HttpServer,
  HttpServerRequest,
  HttpServerResponse
} from "@effect/platform"
import { NodeHttpServer, NodeHttpServerRequest } from "@effect/platform-node"
import { Cause, Duration, Effect, Layer, Option } from "effect"
import { createServer } from "node:http"
import type { Readable } from "node:stream"
import { AgentsHttpLive } from "./agents/Http.js"
import { AtriumApi } from "./Api.js"
import { BillingHttp } from "./billing/Http.js"
import { Wallets, WalletLive } from "./billing/Wallet.js"
import { EnvironmentsHttpLive } from "./environments/Http.js"
import { FilesHttpLive } from "./files/Http.js"
import { isStorageRoute, StorageRoute } from "./files/StorageHttp.js"
import { MISSING_END_USER, missingEndUser } from "./identity/Authentication.js"
import { AccountHttp, AuthHttp } from "./identity/Http.js"
import { LoginPageRoute, OAuthRoutes } from "./identity/OAuthHttp.js"
import { Tokens } from "./identity/Tokens.js"
import { MarketHttpLive } from "./market/Http.js"
import { McpRoute } from "./mcp/Http.js"
import { ClusterLive } from "./platform/Cluster.js"
import { AppConfig } from "./platform/Config.js"
import { DatabaseLive } from "./platform/Database.js"
import { errorBody, errorType } from "./platform/Errors.js"
import { HealthHttp } from "./platform/HealthHttp.js"
import { KeyValueLive } from "./platform/KeyValue.js"
import { clientAddress, isPrivateAddress, routePath } from "./platform/Network.js"
import { ModelsHttp } from "./runtime/models/Http.js"
import { RunsHttpLive } from "./runs/Http.js"
import { EvolutionHttpLive } from "./evolution/Http.js"
import { DistillationsHttpLive } from "./distillation/Http.js"
import { SessionsHttpLive } from "./sessions/Http.js"
import { SessionLive } from "./sessions/Session.js"

const json = (status: number, type: string, message: string, headers?: Record<string, string>) =>
  HttpServerResponse.unsafeJson(errorBody(type, message), { status, ...(headers ? { headers } : {}) })

/** Spec 5.2 rule 6: what only the private network may call (matched against `routePath`). */
const INTERNAL = /^\/internal(\/|$)/

/** Routes under `/api` that need no login token (spec 5.2 rule 5). */
const PUBLIC_API = /^\/api\/(auth\/login|auth\/sms\/sendCode|health|market\/.*|payment\/notify\/.*)\/?$/i

/**
 * Turns what HttpApi writes for a failure (`{"_tag": ..., ...}`, including its own `HttpApiDecodeError`) into the
 * platform's one error body, `{"error":{"type","message"}}`, and `retry_after` into a `Retry-After` header.
 */
const toEnvelope = (response: HttpServerResponse.HttpServerResponse) => {
  if (response.status < 400 || response.body._tag !== "Uint8Array") return response
  let parsed: { _tag?: unknown; message?: unknown; issues?: unknown; retry_after?: unknown }
  try {
    parsed = JSON.parse(new TextDecoder().decode(response.body.body))
  } catch {
    return response
  }
  if (typeof parsed?._tag !== "string") return response
  if (parsed._tag === "HttpApiDecodeError") {
    return json(400, "invalid_request", describeDecodeIssues(parsed.issues, parsed.message))
  }
  const headers: Record<string, string> = {}
  if (typeof parsed.retry_after === "number") headers["retry-after"] = String(parsed.retry_after)
  return json(
    response.status,
    errorType(parsed._tag),
    typeof parsed.message === "string" ? parsed.message : "Request failed.",
    headers
  )
}

/** "Invalid request: phone: is missing" — the field first, so a caller sees at once what to fix. */
const describeDecodeIssues = (issues: unknown, fallback: unknown): string => {
  if (!Array.isArray(issues) || issues.length === 0) {
    return `Invalid request: ${typeof fallback === "string" ? fallback.split("\n")[0] : "malformed input"}`
  }
  const parts = issues.slice(0, 3).map((issue: { path?: Array<unknown>; message?: string }) => {
    const path = Array.isArray(issue.path) && issue.path.length > 0 ? issue.path.join(".") : "body"
    return `${path}: ${issue.message ?? "invalid"}`
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
    const maxBodySize = Option.some(FileSystem.Size(config.maxBodyBytes))

    /** An unknown `/api` route answers 401 to a caller without a token: it reveals nothing about what exists. */
    const notFound = (request: HttpServerRequest.HttpServerRequest) =>
      Effect.gen(function*() {
        const path = request.url.split("?")[0]!
        const routed = routePath(request.url)
        if (routed.startsWith("/api/") && !PUBLIC_API.test(routed)) {
          const token = request.headers["authorization"]?.replace(/^Bearer\s+/i, "") ?? request.cookies["token"] ?? ""
          const valid = yield* Effect.isSuccess(tokens.authenticate(token))
          if (!valid) return json(401, "unauthorized", "A valid login token is required.")
        }
        return json(404, "not_found", `No route ${request.method} ${path}.`)
      })

    return (app) =>
      Effect.gen(function*() {
        let request = yield* HttpServerRequest.HttpServerRequest
        const tooLarge = json(413, "payload_too_large", `Request body exceeds ${config.maxBodyBytes} bytes.`)
        const declaredLength = Number(request.headers["content-length"] ?? "0")
        // File bytes go to the storage route, which streams them to disk under its own, signed limit.
        const exempt = isStorageRoute(request.url)
        if (declaredLength > config.maxBodyBytes && !exempt) return tooLarge
        if (request.headers["content-length"] === undefined && request.headers["transfer-encoding"] !== undefined && !exempt) {
          const buffered = yield* Effect.either(bufferUnknownLength(request, config.maxBodyBytes))
          if (buffered._tag === "Left") return json(400, "invalid_request", "The request body could not be read.")
          if (Option.isNone(buffered.right)) return tooLarge
          request = buffered.right.value
        }
        if (missingEndUser(request)) return json(400, "invalid_request", MISSING_END_USER)
        if (INTERNAL.test(routePath(request.url)) && !isPrivateAddress(clientAddress(request, config.trustProxy))) {
          return json(403, "forbidden", "Internal routes answer the private network only.")
        }
        return yield* app.pipe(
          Effect.provideService(HttpServerRequest.HttpServerRequest, request),
          Effect.provideService(HttpIncomingMessage.MaxBodySize, maxBodySize),
          Effect.map(toEnvelope),
          Effect.catchAllCause((cause) => {
            if (Cause.isInterruptedOnly(cause)) return Effect.failCause(cause)
            // HttpApi lets a body it could not read escape as a defect: it is still the caller's bad input.
            const error = Cause.squash(cause) as { _tag?: string } | undefined
            if (error?._tag === "RouteNotFound") return notFound(request)
            if (error?._tag === "RequestError" && String((error as { cause?: unknown }).cause).includes("maxBytes")) {
              return Effect.succeed(tooLarge)
            }
            if (error?._tag === "RequestError") {
              return Effect.succeed(json(400, "invalid_request", "The request body could not be read as JSON."))
            }
            return Effect.as(
              Effect.logError("unhandled failure", cause),
              json(500, "internal_error", "Something went wrong on our side.")
            )
          })
        )
      })
  }),
  { global: true }
)

const ApiRoutes = HttpLayerRouter.addHttpApi(AtriumApi, { openapiPath: "/openapi.json" }).pipe(
  Layer.provide([HealthHttp, AuthHttp, AccountHttp, ModelsHttp, BillingHttp, AgentsHttpLive, RunsHttpLive, SessionsHttpLive, MarketHttpLive, FilesHttpLive, EnvironmentsHttpLive, EvolutionHttpLive, DistillationsHttpLive]),
  Layer.provide(Wallets.Default)
)

const DocsRoute = HttpApiScalar.layerHttpLayerRouter({ api: AtriumApi, path: "/docs" })

export const Routes = Layer.mergeAll(ApiRoutes, DocsRoute, OAuthRoutes, LoginPageRoute, StorageRoute, McpRoute, ErrorEnvelope).pipe(
  Layer.provide(Tokens.Default)
)

/** The entities this process runs, on one cluster runner over the database. */
const Entities = Layer.mergeAll(WalletLive, SessionLive.pipe(Layer.provide(Wallets.Default))).pipe(
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
  Effect.map(HttpLayerRouter.HttpRouter, (router) => HttpServer.serve(router.asHttpEffect()))
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
