import type * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Forbidden, MethodNotAllowed, UnsupportedMediaType } from "../Errors.js"
import { routePath } from "../Network.js"

/**
 * Request guards the global middleware applies before any route: cross-origin access (`CORS_ORIGINS`) and the rule
 * that a state change authenticated by the cookie alone is same-origin JSON (DESIGN §6). They read headers only.
 */

const STATE_CHANGING = new Set(["POST", "PUT", "PATCH", "DELETE"])

const ALLOW_HEADERS = "authorization, content-type, idempotency-key, x-end-user-id, last-event-id, x-request-id"
const EXPOSE_HEADERS = "retry-after, x-request-id, location"

/** `https://app.example.com` as browsers write `Origin`: scheme, host and port only. */
export const parseOrigins = (raw: string): ReadonlyArray<string> | string => {
  const origins: Array<string> = []
  for (const entry of raw.split(",").map((s) => s.trim()).filter((s) => s.length > 0)) {
    let parsed: URL
    try {
      parsed = new URL(entry)
    } catch {
      return `"${entry}" is not an origin such as https://app.example.com`
    }
    if (parsed.origin !== entry.replace(/\/$/, "") || parsed.origin === "null") {
      return `"${entry}" is not an origin such as https://app.example.com (no path, no "*")`
    }
    origins.push(parsed.origin)
  }
  return origins
}

/** The request's own origin as the browser would write it, from `Host` (the scheme does not matter here). */
const sameOrigin = (request: HttpServerRequest.HttpServerRequest, origin: string, baseUrl: string) => {
  let host: string
  try {
    host = new URL(origin).host
  } catch {
    return false
  }
  return host === request.headers["host"] || origin === new URL(baseUrl).origin
}

/**
 * The answer to a CORS preflight (`OPTIONS` with `Origin` and `Access-Control-Request-Method`), or undefined when
 * the request is not one. Only allowed origins get one; credentials are never allowed (cookie routes stay
 * same-site, cross-origin apps send a bearer), so the exact origin is echoed and `*` never appears.
 */
export const preflight = (request: HttpServerRequest.HttpServerRequest, allowed: ReadonlyArray<string>) => {
  const origin = request.headers["origin"]
  if (request.method !== "OPTIONS" || origin === undefined || request.headers["access-control-request-method"] === undefined) {
    return undefined
  }
  if (!allowed.includes(origin)) return "refused" as const
  return HttpServerResponse.empty({
    status: 204,
    headers: {
      "access-control-allow-origin": origin,
      "access-control-allow-methods": "GET, POST, PUT, PATCH, DELETE",
      "access-control-allow-headers": ALLOW_HEADERS,
      "access-control-max-age": "600",
      vary: "Origin"
    }
  })
}

/** Adds the CORS headers an allowed origin's actual request needs to its response. */
export const withCorsHeaders = (
  request: HttpServerRequest.HttpServerRequest,
  allowed: ReadonlyArray<string>,
  response: HttpServerResponse.HttpServerResponse
) => {
  const origin = request.headers["origin"]
  if (origin === undefined || !allowed.includes(origin)) return response
  return HttpServerResponse.setHeaders(response, {
    "access-control-allow-origin": origin,
    "access-control-expose-headers": EXPOSE_HEADERS,
    vary: "Origin"
  })
}

/**
 * Why a state change authenticated by the `token` cookie alone is refused, or undefined. A browser attaches the
 * cookie to a form another site posts here, so such a request must come from our own origin (when the browser
 * says where it comes from) and carry JSON (which no plain form can send). A bearer is never sent by a browser on
 * its own, so bearer requests are unaffected; `/oauth/authorize`'s consent form is ours and same-origin.
 */
export const cookieRefusal = (
  request: HttpServerRequest.HttpServerRequest,
  baseUrl: string,
  formRoute: boolean
): Forbidden | UnsupportedMediaType | undefined => {
  if (!STATE_CHANGING.has(request.method)) return undefined
  if (request.headers["authorization"] !== undefined || request.cookies["token"] === undefined) return undefined
  const origin = request.headers["origin"]
  if (origin !== undefined && !sameOrigin(request, origin, baseUrl)) {
    return new Forbidden({ message: "Cookie-authenticated changes are accepted from this site only." })
  }
  if (formRoute) return undefined
  const contentType = request.headers["content-type"]
  if (contentType !== undefined && !/^application\/([\w.+-]+\+)?json\s*(;|$)/i.test(contentType)) {
    return new UnsupportedMediaType({ message: "Send the body as application/json (or authenticate with a bearer token)." })
  }
  return undefined
}

/**
 * Routes whose bodies are not JSON: the OAuth forms (RFC 6749 fixes form bodies) and the payment provider's signed
 * callback (its bytes as sent). Every other route with a body is a JSON route.
 */
const NOT_JSON_ROUTE = /^\/(oauth|api\/payment\/notify)\//

/**
 * OpenAI's one-step file upload (`client.files.create`): `POST /v1/files` also takes `multipart/form-data`, which
 * HttpApi reads as a multipart payload (docs/knowledge.md). Only with a bearer credential: the cookie rules above
 * still refuse a cookie-authenticated form post.
 */
const MULTIPART_ROUTE = /^\/v1\/files\/?$/
const MULTIPART = /^multipart\/form-data\s*(;|$)/i

/** OpenAI's one-step upload: a multipart `POST /v1/files`, which the edge reads and checks whole (Body.ts). */
export const isMultipartUpload = (request: HttpServerRequest.HttpServerRequest, routed: string) =>
  request.method === "POST" && MULTIPART.test(request.headers["content-type"] ?? "") && MULTIPART_ROUTE.test(routed)

/** `application/json` and every `application/<x>+json` (RFC 6839), parameters allowed. */
export const JSON_MEDIA_TYPE = /^application\/([\w.-]+\+)?json\s*(;|$)/i

/**
 * A body on a JSON route is JSON (`application/json` or any `application/<x>+json`), or 415 at once, whatever the
 * credential: HttpApi would otherwise read a form as a record and anything else as bytes, and a body it read as
 * bytes after the edge had read it as text was never answered (issue 26 item 4). A request without a
 * `Content-Type` is left to the route (an empty body is a valid request to many). `exempt`: routes that read their
 * own bytes (file storage, MCP). `routed`: the request's `routePath`, when the caller has it already.
 */
export const mediaRefusal = (
  request: HttpServerRequest.HttpServerRequest,
  exempt: boolean,
  routed: string = routePath(request.url)
) => {
  const contentType = request.headers["content-type"]
  if (contentType === undefined || request.method === "GET" || request.method === "HEAD" || request.method === "OPTIONS") {
    return undefined
  }
  if (exempt || NOT_JSON_ROUTE.test(routed) || JSON_MEDIA_TYPE.test(contentType)) return undefined
  if (isMultipartUpload(request, routed)) return undefined
  return new UnsupportedMediaType({ message: `This route takes application/json, not ${contentType.split(";")[0]!.trim()}.` })
}

/**
 * Spec 4.7 names `GET /api/token/refresh`; a cross-site link sends that GET with the victim's cookie, and the new
 * token voids the old one. So the GET takes a bearer only (no browser sends one on its own); with the cookie alone
 * it is 405 and the browser POSTs, which the cookie rules cover (issue 26 item 4).
 */
export const refreshByLink = (request: HttpServerRequest.HttpServerRequest) =>
  request.method === "GET" && routePath(request.url).replace(/\/$/, "") === "/api/token/refresh" &&
    request.headers["authorization"] === undefined && request.cookies["token"] !== undefined
    ? new MethodNotAllowed({ message: "GET /api/token/refresh takes a bearer token; with the cookie, POST it." })
    : undefined
