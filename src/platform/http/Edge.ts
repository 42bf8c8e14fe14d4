import * as FileSystem from "@effect/platform/FileSystem"
import * as Headers from "@effect/platform/Headers"
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpIncomingMessage from "@effect/platform/HttpIncomingMessage"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import * as Multipart from "@effect/platform/Multipart"
import { Cause, Context, type Duration, Effect, Fiber, FiberRef, Option, Redacted } from "effect"
import {
  ErrorHeaders,
  Forbidden,
  InternalError,
  InvalidRequest,
  MethodNotAllowed,
  NotFound,
  OpenAiFields,
  PayloadTooLarge,
  ServiceUnavailable,
  Unauthorized
} from "../Errors.js"
import type { KeyValueStore } from "../KeyValue.js"
import { clientAddress, isPrivateAddress, routePath, secretMatches } from "../Network.js"
import { isOutage, RETRY_AFTER_SECONDS } from "../Outage.js"
import { conditionalAndCompressed } from "./Compression.js"
import { withPagePolicy } from "./Csp.js"
import { wireErrorResponse } from "./ErrorResponse.js"
import { bodyDeadline, checkMultipart, multipartFailure, multipartLimits, readLimited, withBody } from "./Body.js"
import {
  cookieRefusal,
  isMultipartUpload,
  JSON_MEDIA_TYPE,
  mediaRefusal,
  preflight,
  refreshByLink,
  withCorsHeaders
} from "./Guards.js"
import { idempotent } from "./Idempotency.js"
import { textRefusal } from "./Text.js"
import { bearerTokenOf, credentialOf, credentialText } from "./Bearer.js"

/**
 * The platform's HTTP edge (DESIGN.md §6): the global middleware's policies, apart from the layers `Server.ts`
 * composes. The domains it consults (login tokens, accounts, the storage route) come in as `EdgeOptions`.
 */

/** Spec 5.2 rule 6: what only the private network may call (matched against `routePath`). */
const INTERNAL = /^\/internal(\/|$)/

/** The platform's own HTML forms (the OAuth consent page): same-origin form posts, not JSON. */
const FORM_ROUTE = /^\/oauth\//

/** Routes under `/api` that need no login token (spec 5.2 rule 5). */
const PUBLIC_API = /^\/api\/(auth\/login|auth\/challenge|auth\/sms\/sendCode|health|market\/.*|payment\/notify\/.*)\/?$/i

/**
 * The methods `api` serves at a path (none for a path it does not know): every route as a path pattern, for a 405
 * that says which methods a path serves.
 */
export const methodsServed = (api: HttpApi.HttpApi.Any): (path: string) => ReadonlyArray<string> => {
  const routes: Array<{ pattern: RegExp; method: string }> = []
  HttpApi.reflect(api as HttpApi.HttpApi.AnyWithProps, {
    onGroup: () => {},
    onEndpoint: ({ endpoint }) => {
      const pattern = endpoint.path.split("/").map((segment) =>
        segment.startsWith(":") ? "[^/]+" : segment.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
      ).join("/")
      routes.push({ pattern: new RegExp(`^${pattern}/?$`), method: endpoint.method })
    }
  })
  return (path) => [...new Set(routes.filter((route) => route.pattern.test(path)).map((route) => route.method))]
}

/** The routes OpenAI's clients call: their errors also carry `code` and `param`, which those clients read. */
const OPENAI_ROUTES = /^\/v1\/(chat\/completions|responses|models|vector_stores)(\/|$)/

/** A 401 names its scheme (RFC 6750 `WWW-Authenticate`) for the clients that read it. */
const withAuthenticateHeader = (response: HttpServerResponse.HttpServerResponse) =>
  response.status === 401 && response.headers["www-authenticate"] === undefined
    ? HttpServerResponse.setHeader(response, "www-authenticate", 'Bearer realm="atrium"')
    : response

/** An error answer with the headers its error's encoding left out of the body (`Retry-After`). */
const withErrorHeaders = <E, R>(answer: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
  Effect.flatMap(answer, (response) =>
    response.status < 400 ? Effect.succeed(response) : Effect.map(
      FiberRef.get(ErrorHeaders),
      (headers) => Object.keys(headers).length === 0 ? response : HttpServerResponse.setHeaders(response, headers)
    ))

/**
 * A request whose body came without a length, its body read here under the limit: the same request with the body in
 * memory. None when the body is over the limit; fails when the body could not be read.
 */
const bufferUnknownLength = (request: HttpServerRequest.HttpServerRequest, limit: number) =>
  Effect.flatMap(readLimited(NodeHttpServerRequest.toIncomingMessage(request), limit), (body) =>
    Effect.try(() => Option.map(body, (bytes) => withBody(request, bytes))))

/**
 * Headers on every answer, whatever wrote it (JSON, streams, errors, pages, the web app's files, file downloads):
 * no answer is sniffed into another type than it says, and a link followed from our pages tells another origin only
 * our origin, never a path or query that may hold an id (issue 42 item 8).
 */
const EVERY_ANSWER = {
  "referrer-policy": "strict-origin-when-cross-origin",
  "x-content-type-options": "nosniff"
} as const

/** What the edge needs from the platform's domains and settings. */
export interface EdgeOptions {
  readonly config: {
    readonly maxBodyBytes: number
    readonly bodyTimeout: Duration.Duration
    readonly trustProxy: boolean
    readonly internalToken: Option.Option<Redacted.Redacted>
    readonly corsOrigins: ReadonlyArray<string>
    readonly baseUrl: string
    readonly mcpPath: string
  }
  readonly idempotencyStore: KeyValueStore
  /** Whether `token` is a valid login token. */
  readonly isLoggedIn: (token: string) => Effect.Effect<boolean>
  /** The account a create's `Idempotency-Key` belongs to; a store failure is a defect (503 in an outage, else 500). */
  readonly accountOf: (request: HttpServerRequest.HttpServerRequest) => Effect.Effect<Option.Option<string>>
  /** Routes that read their own bytes under their own limit (file storage). */
  readonly isExempt: (url: string) => boolean
  /** Why the request's caller must name its end user (`X-End-User-Id`), or undefined. */
  readonly missingEndUser: (request: HttpServerRequest.HttpServerRequest) => string | undefined
  readonly methodsServed: (path: string) => ReadonlyArray<string>
}

/**
 * The global middleware every request passes (DESIGN.md §6): body limits, CORS, the cookie and media rules, text
 * checks, the private network's routes, idempotent creates, and every failure as a wire error (a 404 or 405 for an
 * unknown route, 503 in an outage, 500 for a bug), its headers included.
 */
export const makeEdge = (options: EdgeOptions) => {
  const { config, idempotencyStore, methodsServed: allowedMethods } = options
  const identify = options.accountOf
  const maxBodySize = Option.some(FileSystem.Size(config.maxBodyBytes))
  const mcpPath = routePath(config.mcpPath)
  // Made only when a request is refused: an error's construction captures a stack, which every request would pay.
  const tooLarge = () =>
    wireErrorResponse(new PayloadTooLarge({ message: `Request body exceeds ${config.maxBodyBytes} bytes.` }))

  /** An unknown `/api` route answers 401 to a caller without a token: it reveals nothing about what exists. */
  const notFound = (request: HttpServerRequest.HttpServerRequest) =>
    Effect.gen(function*() {
      const path = request.url.split("?")[0]!
      const routed = routePath(request.url)
      if (routed.startsWith("/api/") && !PUBLIC_API.test(routed)) {
        const token = credentialText(credentialOf(request))
        const valid = yield* options.isLoggedIn(token)
        if (!valid) return yield* wireErrorResponse(new Unauthorized({ message: "A valid login token is required." }))
      }
      const allowed = allowedMethods(path)
      if (allowed.length > 0) {
        return yield* wireErrorResponse(
          new MethodNotAllowed({ message: `${path} does not serve ${request.method}; it serves ${allowed.join(", ")}.` }),
          { allow: allowed.join(", ") }
        )
      }
      return yield* wireErrorResponse(new NotFound({ message: `No route ${request.method} ${path}.` }))
    })

  /**
   * `/internal/*` moves money and decides reviews: the operator's bearer is required, and the private-network
   * check stays as a second wall. Without `INTERNAL_TOKEN` the routes are closed (403) rather than open to
   * whoever shares the host, which a reverse proxy on the same machine makes of every internet client.
   */
  const internalRefusal = (request: HttpServerRequest.HttpServerRequest) => {
    if (!isPrivateAddress(clientAddress(request, config.trustProxy))) {
      return wireErrorResponse(new Forbidden({ message: "Internal routes answer the private network only." }))
    }
    if (Option.isNone(config.internalToken)) {
      return wireErrorResponse(new Forbidden({ message: "Internal routes are closed: INTERNAL_TOKEN is not set." }))
    }
    const presented = bearerTokenOf(request)
    if (presented === undefined || !secretMatches(presented, Redacted.value(config.internalToken.value))) {
      return wireErrorResponse(new Unauthorized({ message: "Internal routes require the operator's bearer token." }), {
        "www-authenticate": "Bearer"
      })
    }
    return undefined
  }

  /**
   * The MCP route reads its own body as bytes (which the request does not cache) and checks it itself. `routed` is
   * the request's `routePath`.
   */
  const isMcp = (routed: string) => routed.startsWith(mcpPath)

  const guarded = <E, R>(app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
    Effect.gen(function*() {
      const original = yield* HttpServerRequest.HttpServerRequest
      let request = original
      // Every rule below judges the same target: the path is normalised once per request (a replaced request keeps
      // the URL).
      const routed = routePath(request.url)
      const declaredLength = Number(request.headers["content-length"] ?? "0")
      // File bytes go to the storage route, which streams them to disk under its own, signed limit.
      const exempt = options.isExempt(request.url)
      if (declaredLength > config.maxBodyBytes && !exempt) return yield* tooLarge()
      // A multipart upload is read whole below, once the cheaper refusals had their say.
      const upload = !exempt && isMultipartUpload(request, routed)
      if (request.headers["content-length"] === undefined && request.headers["transfer-encoding"] !== undefined && !exempt && !upload) {
        const buffered = yield* Effect.either(bufferUnknownLength(request, config.maxBodyBytes))
        if (buffered._tag === "Left") {
          return yield* wireErrorResponse(new InvalidRequest({ message: "The request body could not be read." }))
        }
        if (Option.isNone(buffered.right)) return yield* tooLarge()
        request = buffered.right.value
      }
      const cors = preflight(request, config.corsOrigins)
      if (cors === "refused") return yield* wireErrorResponse(new Forbidden({ message: "This origin may not call the API." }))
      if (cors !== undefined) return cors
      const refusedCookie = cookieRefusal(request, config.baseUrl, FORM_ROUTE.test(routed) || exempt)
      if (refusedCookie !== undefined) return yield* wireErrorResponse(refusedCookie)
      const endUser = options.missingEndUser(request)
      if (endUser !== undefined) {
        // Authentication comes before the header check (issue 44 gap 6): a key that opens no account is a 401,
        // which every client treats as "fix the key", not a 400 about a header the caller may well send next.
        if (Option.isNone(yield* identify(request))) {
          return yield* wireErrorResponse(new Unauthorized({ message: "Invalid or revoked API key." }))
        }
        return yield* wireErrorResponse(new InvalidRequest({ message: endUser }))
      }
      const byLink = refreshByLink(request)
      if (byLink !== undefined) return yield* wireErrorResponse(byLink, { allow: "POST" })
      const ownBytes = exempt || isMcp(routed)
      const badMedia = mediaRefusal(request, ownBytes, routed)
      // A path the API does not serve stays a 404, whatever its body.
      if (badMedia !== undefined && allowedMethods(request.url.split("?")[0]!).length > 0) return yield* wireErrorResponse(badMedia)
      // The multipart parser runs on a part as it arrives, and a malformed part threw out of it (taking the process
      // down), named a temporary file after a name the disk cannot hold, or was a 500: so the body (within the limit)
      // is read and checked whole first, and the route parses the checked copy (issue 42 item 4).
      let fingerprint: string | undefined
      if (upload) {
        const read = yield* Effect.either(readLimited(NodeHttpServerRequest.toIncomingMessage(request), config.maxBodyBytes))
        if (read._tag === "Left") return yield* wireErrorResponse(new InvalidRequest({ message: "The request body could not be read." }))
        if (Option.isNone(read.right)) return yield* tooLarge()
        const checked = checkMultipart(request.headers["content-type"]!, read.right.value)
        if (checked._tag === "Left") return yield* wireErrorResponse(new InvalidRequest({ message: checked.left }))
        fingerprint = checked.right
        request = withBody(request, read.right.value)
      }
      const contentType = request.headers["content-type"]
      if (contentType !== undefined && !/^application\/json\s*(;|$)/i.test(contentType) && JSON_MEDIA_TYPE.test(contentType)) {
        // HttpApi reads only `application/json` as JSON: an `application/<x>+json` body is the same JSON to it.
        request = request.modify({ headers: Headers.set(request.headers, "content-type", "application/json") })
      }
      const badText = textRefusal(request, ownBytes, maxBodySize, routed)
      if (badText !== undefined) {
        const refused = yield* badText
        if (refused !== undefined) return refused
      }
      if (INTERNAL.test(routed)) {
        const refused = internalRefusal(request)
        if (refused !== undefined) return yield* refused
      }
      // The route reads under the edge's limit, which the server usually set already (Server.ts); the context is
      // changed only when something is missing (each change copies the fiber's locals twice): the limit, or the
      // request the edge replaced.
      const replaced = request
      const limit = yield* HttpIncomingMessage.MaxBodySize
      const limited = Option.isSome(limit) && limit.value === FileSystem.Size(config.maxBodyBytes)
      type Outer = Exclude<R, HttpIncomingMessage.MaxBodySize | HttpServerRequest.HttpServerRequest>
      const served = limited && replaced === original ? app as Effect.Effect<HttpServerResponse.HttpServerResponse, E, Outer> : Effect.mapInputContext(app, (context: Context.Context<Outer>) => {
        const withLimit = Context.add(context, HttpIncomingMessage.MaxBodySize, maxBodySize)
        return (replaced === original ? withLimit : Context.add(withLimit, HttpServerRequest.HttpServerRequest, replaced)) as Context.Context<R>
      })
      const parsed = upload ? Multipart.withLimits(served, multipartLimits) : served
      const answered = idempotent(idempotencyStore, request, identify(request), parsed, fingerprint).pipe(
        Effect.catchAllCause((cause) => {
          if (Cause.isInterruptedOnly(cause)) return Effect.failCause(cause)
          // HttpApi lets a body it could not read escape as a defect: it is still the caller's bad input.
          const error = Cause.squash(cause) as { _tag?: string; reason?: string; cause?: unknown } | undefined
          if (error?._tag === "RouteNotFound") return notFound(request)
          // Bodies over the limit were answered 413 above (declared, or read here under the limit).
          if (error?._tag === "RequestError") {
            return wireErrorResponse(new InvalidRequest({ message: "The request body could not be read as JSON." }))
          }
          const refusedPart = error?._tag === "MultipartError" ? multipartFailure(error) : undefined
          if (refusedPart !== undefined) return wireErrorResponse(new InvalidRequest({ message: refusedPart }))
          // PostgreSQL, Redis or an entity's owner unreachable: an outage, not a bug; the caller retries (issue 33).
          if (isOutage(cause)) {
            return Effect.zipRight(
              Effect.logWarning("request failed during an outage", Cause.squash(cause)),
              wireErrorResponse(new ServiceUnavailable({
                message: "A service this request needs is unavailable; retry shortly.",
                retry_after: RETRY_AFTER_SECONDS
              }))
            )
          }
          return Effect.zipRight(
            Effect.logError("unhandled failure", cause),
            wireErrorResponse(new InternalError({ message: "Something went wrong on our side." }))
          )
        })
      )
      // Only a request that names an origin can get CORS headers.
      return yield* request.headers["origin"] === undefined
        ? answered
        : Effect.map(answered, (response) => withCorsHeaders(request, config.corsOrigins, response))
    })

  return <E, R>(app: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
    Effect.flatMap(HttpServerRequest.HttpServerRequest, (original) => {
      // A body that has not all arrived races its deadline: whichever answers first is the answer (Body.ts). The
      // server runs its middleware uninterruptibly (routes restore interruption for themselves), so both sides are
      // made interruptible: else the loser, the edge reading a body that never ends, could never be stopped.
      const deadline = bodyDeadline(original, config.bodyTimeout, options.isExempt(original.url))
      const answered = withErrorHeaders(
        deadline === undefined ? guarded(app) : Effect.raceWith(Effect.interruptible(guarded(app)), Effect.interruptible(deadline), {
          onSelfDone: (exit, waiting) => Effect.zipRight(Fiber.interrupt(waiting), exit),
          // The route is stopped once the 408 is out, not before: stopping a read of the body destroys the request,
          // and with it the socket the answer was to go out on.
          onOtherDone: (exit, route) => Effect.zipRight(Effect.addFinalizer(() => Fiber.interrupt(route)), exit)
        })
      )
      // Every error written below (by HttpApi or the guards) carries OpenAI's fields on OpenAI's routes. Elsewhere
      // the flag keeps its default (off), and `ErrorHeaders` starts empty in every request's own fiber (only error
      // encoding writes it, in that fiber): neither needs a scoped change per request.
      const marked = OPENAI_ROUTES.test(original.url.split("?")[0]!) ? Effect.locally(answered, OpenAiFields, true) : answered
      return Effect.flatMap(marked, (answer) =>
        conditionalAndCompressed(original, HttpServerResponse.setHeaders(withPagePolicy(withAuthenticateHeader(answer)), EVERY_ANSWER)))
    })
}

