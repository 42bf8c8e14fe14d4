import * as HttpLayerRouter from "@effect/platform/HttpLayerRouter"
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import { Effect, Layer, Option } from "effect"
import * as Fs from "node:fs"
import { errorResponse } from "../platform/http/ErrorResponse.js"
import { routePath } from "../platform/Network.js"
import { FilesConfig } from "./Config.js"
import { contentDisposition, EmbeddedObjects, STORAGE_KEY } from "./Storage.js"

/**
 * The embedded object store's own route (DESIGN.md §4): `PUT /storage/:key` and `GET /storage/:key`, authorised by
 * the URL's HMAC signature alone (no login, no API key), outside the HttpApi. A PUT streams the request body to disk
 * and is exempt from the API's `MAX_BODY_BYTES`; its limit is the size signed into the URL (at most `FILE_MAX_BYTES`).
 */

/** Whether `url` is the storage route's: the HTTP edge (platform/http/Edge.ts) exempts it from the API body limit. */
export const isStorageRoute = (url: string) => routePath(url).startsWith("/storage/")

/** Storage answers are never cached: a URL's verdict changes when it expires. */
const json = (status: number, type: string, message: string, headers: Record<string, string> = {}) =>
  errorResponse(status, type, message, { "cache-control": "no-store", ...headers })

const refused = (verdict: "forged" | "expired") =>
  json(
    403,
    "forbidden",
    verdict === "expired"
      ? "This storage URL has expired: ask for a new one."
      : "The signature of this storage URL is not valid."
  )

export const StorageRoute = Layer.effectDiscard(Effect.gen(function*() {
  const router = yield* HttpLayerRouter.HttpRouter
  const objects = yield* EmbeddedObjects
  const config = yield* FilesConfig

  /** The key and query of a storage request, once its signature holds. */
  const authorise = (method: "PUT" | "GET") =>
    Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const { params } = yield* HttpRouter.RouteContext
      const key = params["key"] ?? ""
      const query = new URL(request.url, "http://localhost").searchParams
      // Not our key shape: nothing was ever signed for it, so it is a forgery like any other.
      if (!STORAGE_KEY.test(key)) return yield* Effect.fail(refused("forged"))
      const verdict = yield* objects.verify(method, key, query)
      if (verdict !== "ok") return yield* Effect.fail(refused(verdict))
      return { key, query, request }
    })

  const put = Effect.gen(function*() {
    const { key, query, request } = yield* authorise("PUT")
    const size = Number(query.get("size"))
    if (!Number.isSafeInteger(size) || size < 0) return json(403, "forbidden", "This storage URL names no size.")
    if (size > config.maxBytes) {
      return json(413, "payload_too_large", `Files are limited to ${config.maxBytes} bytes (FILE_MAX_BYTES).`)
    }
    const declared = request.headers["content-length"]
    if (declared !== undefined && Number(declared) !== size) {
      return json(
        400,
        "invalid_request",
        `Invalid request: Content-Length: this URL takes exactly ${size} bytes, the request declares ${declared}.`
      )
    }
    const outcome = yield* objects.write(key, NodeHttpServerRequest.toIncomingMessage(request), size)
    switch (outcome._tag) {
      case "Stored":
        return HttpServerResponse.unsafeJson(
          { size: outcome.object.size, sha256: outcome.object.sha256 },
          { headers: { etag: `"${outcome.object.sha256}"`, "cache-control": "no-store" } }
        )
      case "TooLarge":
        // The rest of the body is not read: close the connection after the answer rather than drain it.
        return json(413, "payload_too_large", `This URL takes exactly ${size} bytes; more were sent.`, {
          connection: "close"
        })
      case "TooShort":
        return json(
          400,
          "invalid_request",
          `Invalid request: body: this URL takes exactly ${size} bytes, ${outcome.received} were sent.`
        )
      case "Conflict":
        return json(409, "conflict", "Different bytes were already uploaded to this URL; ask for a new upload URL.")
      case "Aborted":
        return json(400, "invalid_request", "The upload was interrupted before all its bytes arrived.", {
          connection: "close"
        })
    }
  }).pipe(Effect.catchAll(Effect.succeed))

  const get = Effect.gen(function*() {
    const { key, query, request } = yield* authorise("GET")
    const found = yield* objects.open(key)
    if (Option.isNone(found)) return json(404, "not_found", "No object is stored at this URL.")
    const { object, path } = found.value
    const headers = {
      "content-disposition": contentDisposition(query.get("filename") ?? key),
      etag: `"${object.sha256}"`,
      "x-content-type-options": "nosniff",
      // Bytes of any user on our origin: never let a browser run them as a page of ours.
      "content-security-policy": "sandbox; default-src 'none'",
      "cache-control": "private, no-store"
    }
    const options = { headers, contentType: query.get("content_type") ?? "application/octet-stream", contentLength: object.size }
    if (request.method === "HEAD") return HttpServerResponse.empty(options)
    return HttpServerResponse.raw(Fs.createReadStream(path), options)
  }).pipe(Effect.catchAll(Effect.succeed))

  yield* router.add("PUT", "/storage/:key", put)
  yield* router.add("GET", "/storage/:key", get)
})).pipe(Layer.provide([EmbeddedObjects.Default, FilesConfig.Default]))
