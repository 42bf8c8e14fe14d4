import type * as FileSystem from "@effect/platform/FileSystem"
import * as HttpIncomingMessage from "@effect/platform/HttpIncomingMessage"
import type * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect, Option } from "effect"
import { InvalidRequest } from "../Errors.js"
import { wireErrorResponse } from "./ErrorResponse.js"
import { routePath } from "../Network.js"
import { JSON_MEDIA_TYPE } from "./Guards.js"

/**
 * Text the database refuses (PostgreSQL `text` and `jsonb` take no NUL; a lone UTF-16 surrogate is not Unicode),
 * numbers no column holds as sent (past 2^53, or infinite) and JSON nested deeper than anything the platform stores
 * are the caller's bad input: 400 `invalid_request` naming the field, checked once at the edge for every path
 * segment, query parameter, JSON body and form body (DESIGN §6), before any route sees them (`textRefusal`).
 */

/** Deeper than any document the platform stores (agent configs, session metadata, tool arguments). */
export const MAX_JSON_DEPTH = 64

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

/** What is wrong with `value` as stored text, or undefined. */
export const textProblem = (value: string): string | undefined => {
  if (value.includes("\u0000")) return "must not contain a NUL character (\\u0000)"
  if (LONE_SURROGATE.test(value)) return "must not contain a lone UTF-16 surrogate"
  return undefined
}

export interface Problem {
  readonly field: string
  readonly problem: string
}

/** The first string (or key) of a parsed JSON document the database would refuse, or a nesting past the bound. */
export const jsonProblem = (root: unknown, maxDepth = MAX_JSON_DEPTH): Problem | undefined => {
  const stack: Array<{ readonly value: unknown; readonly path: string; readonly depth: number }> = [
    { value: root, path: "", depth: 0 }
  ]
  while (stack.length > 0) {
    const { depth, path, value } = stack.pop()!
    if (typeof value === "string") {
      const problem = textProblem(value)
      if (problem !== undefined) return { field: path || "body", problem }
      continue
    }
    if (typeof value === "number") {
      // JSON.parse reads 1e400 as Infinity and 2^64 as a rounded float: neither is the number the caller meant,
      // and either reaches SQL as a value the column refuses.
      if (!Number.isFinite(value) || Math.abs(value) > Number.MAX_SAFE_INTEGER) {
        return { field: path || "body", problem: `is out of range (at most ${Number.MAX_SAFE_INTEGER} in magnitude)` }
      }
      continue
    }
    if (value === null || typeof value !== "object") continue
    if (depth >= maxDepth) return { field: path || "body", problem: `is nested deeper than ${maxDepth} levels` }
    if (Array.isArray(value)) {
      value.forEach((item, i) => stack.push({ value: item, path: path ? `${path}.${i}` : String(i), depth: depth + 1 }))
      continue
    }
    for (const [key, item] of Object.entries(value)) {
      const field = path ? `${path}.${key}` : key
      const problem = textProblem(key)
      if (problem !== undefined) return { field, problem: `has a key that ${problem}` }
      stack.push({ value: item, path: field, depth: depth + 1 })
    }
  }
  return undefined
}

/** The first field (name or value) of a form body (`application/x-www-form-urlencoded`) the database would refuse. */
export const formProblem = (body: string): Problem | undefined => {
  for (const [key, value] of new URLSearchParams(body)) {
    const problem = textProblem(key) ?? textProblem(value)
    if (problem !== undefined) return { field: textProblem(key) === undefined ? key : "body", problem }
  }
  return undefined
}

/** The first path segment or query parameter of a request target the database would refuse. */
export const targetProblem = (url: string): Problem | undefined => {
  const [rawPath = "", rawQuery = ""] = url.split("#", 1)[0]!.split(/\?(.*)/s, 2)
  for (const segment of rawPath.split("/")) {
    let decoded: string
    try {
      decoded = decodeURIComponent(segment)
    } catch {
      continue
    }
    const problem = textProblem(decoded)
    if (problem !== undefined) return { field: "path", problem: `segment "${segment}" ${problem}` }
  }
  for (const [key, value] of new URLSearchParams(rawQuery)) {
    const problem = textProblem(key) ?? textProblem(value)
    if (problem !== undefined) return { field: key, problem }
  }
  return undefined
}

/**
 * The edge's check (the global middleware runs it before any route): NUL, lone surrogates, out-of-range numbers and
 * over-deep JSON anywhere in the target, a JSON body or a form body are a 400 naming the field, before a route (and
 * the database) sees them. The body read here is the one the route reads: the request caches it. `/oauth/token`
 * answers in RFC 6749's error shape, which its clients read. `exempt`: routes that read their own bytes (file
 * storage; MCP, which checks its messages itself).
 *
 * Undefined when the target is clean and there is no body to read (a GET, say): the common request is judged
 * without running an effect. Otherwise the effect gives the refusal, or undefined. `routed`: the request's
 * `routePath`, when the caller has it already.
 */
export const textRefusal = (
  request: HttpServerRequest.HttpServerRequest,
  exempt: boolean,
  maxBodySize: Option.Option<FileSystem.Size>,
  routed?: string
): Effect.Effect<HttpServerResponse.HttpServerResponse | undefined> | undefined => {
  const invalid = (found: Problem) => {
    const message = `Invalid request: ${found.field}: ${found.problem}`
    return (routed ?? routePath(request.url)) === "/oauth/token"
      ? Effect.succeed(HttpServerResponse.unsafeJson({ error: "invalid_request", error_description: message }, {
        status: 400,
        headers: { "cache-control": "no-store" }
      }))
      : wireErrorResponse(new InvalidRequest({ message }))
  }
  const inTarget = targetProblem(request.url)
  if (inTarget !== undefined) return invalid(inTarget)
  const contentType = request.headers["content-type"] ?? ""
  const json = JSON_MEDIA_TYPE.test(contentType)
  const form = /^application\/x-www-form-urlencoded\s*(;|$)/i.test(contentType)
  if (exempt || request.method === "GET" || request.method === "HEAD" || !(json || form)) return undefined
  return Effect.gen(function*() {
    const text = yield* request.text.pipe(
      Effect.provideService(HttpIncomingMessage.MaxBodySize, maxBodySize),
      Effect.option
    )
    if (Option.isNone(text) || text.value === "") return undefined
    if (form) {
      const inForm = formProblem(text.value)
      return inForm === undefined ? undefined : yield* invalid(inForm)
    }
    let parsed: unknown
    try {
      parsed = JSON.parse(text.value)
    } catch {
      return undefined
    }
    const inBody = jsonProblem(parsed)
    return inBody === undefined ? undefined : yield* invalid(inBody)
  })
}
