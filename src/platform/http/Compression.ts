import * as HttpBody from "@effect/platform/HttpBody"
import type * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect } from "effect"
import * as Crypto from "node:crypto"
import { promisify } from "node:util"
import * as Zlib from "node:zlib"

/**
 * Every answer held in memory (JSON, pages, the API document, the web app's assets) gets a validator and travels
 * compressed when the caller accepts it: the API document is 160 KB and `/docs` 3.4 MB as they are. Streams (SSE,
 * file downloads) are left as they are: compressing them would hold events back in the compressor's buffer.
 */

const COMPRESSIBLE = /^(application\/([\w.+-]+\+)?json|application\/(javascript|xml)|text\/|image\/svg\+xml)/i

/** Below this a compressed body saves less than its own headers and the CPU it costs. */
const MIN_BYTES = 1024

/** Compressed forms of large bodies, by validator: the API document, `/docs` and the assets are asked for again and again. */
const CACHE_FROM_BYTES = 16 * 1024
const CACHE_ENTRIES = 64
const compressedCache = new Map<string, Uint8Array>()

const brotli = promisify(Zlib.brotliCompress)
const gzip = promisify(Zlib.gzip)

type Encoding = "br" | "gzip"

/** The encoding to answer with: brotli over gzip, neither when refused (`q=0`) or not offered. */
export const encodingFor = (acceptEncoding: string | undefined): Encoding | undefined => {
  if (acceptEncoding === undefined) return undefined
  const offered = new Map<string, number>()
  for (const part of acceptEncoding.split(",")) {
    const [name, ...params] = part.trim().toLowerCase().split(";")
    const q = params.map((p) => /^\s*q=([\d.]+)\s*$/.exec(p)?.[1]).find((v) => v !== undefined)
    if (name) offered.set(name, q === undefined ? 1 : Number(q))
  }
  const accepts = (name: Encoding) => (offered.get(name) ?? offered.get("*") ?? 0) > 0
  return accepts("br") ? "br" : accepts("gzip") ? "gzip" : undefined
}

const validatorOf = (bytes: Uint8Array) => `W/"${Crypto.createHash("sha1").update(bytes).digest("base64url")}"`

const matches = (ifNoneMatch: string | undefined, etag: string) =>
  ifNoneMatch !== undefined &&
  ifNoneMatch.split(",").some((tag) => {
    const candidate = tag.trim()
    return candidate === "*" || candidate.replace(/^W\//, "") === etag.replace(/^W\//, "")
  })

const compress = (bytes: Uint8Array, encoding: Encoding, etag: string | undefined) => {
  const key = etag === undefined ? undefined : `${encoding} ${etag}`
  const cached = key === undefined ? undefined : compressedCache.get(key)
  if (cached !== undefined) return Effect.succeed(cached)
  return Effect.promise(() =>
    encoding === "br"
      ? brotli(bytes, { params: { [Zlib.constants.BROTLI_PARAM_QUALITY]: 5, [Zlib.constants.BROTLI_PARAM_SIZE_HINT]: bytes.length } })
      : gzip(bytes, { level: 6 })
  ).pipe(Effect.tap((compressed) =>
    Effect.sync(() => {
      if (key === undefined || bytes.length < CACHE_FROM_BYTES) return
      if (compressedCache.size >= CACHE_ENTRIES) compressedCache.delete(compressedCache.keys().next().value!)
      compressedCache.set(key, compressed)
    })
  ))
}

const withVary = (response: HttpServerResponse.HttpServerResponse) => {
  const vary = response.headers["vary"]
  return vary === undefined
    ? HttpServerResponse.setHeader(response, "vary", "accept-encoding")
    : /accept-encoding/i.test(vary)
    ? response
    : HttpServerResponse.setHeader(response, "vary", `${vary}, accept-encoding`)
}

/**
 * A successful answer held in memory gets a weak `ETag` when it was read (a `GET` whose `If-None-Match` has it is
 * a 304 without the body) and is compressed with brotli or gzip when the caller accepts one. Anything else passes
 * unchanged.
 */
export const conditionalAndCompressed = (
  request: HttpServerRequest.HttpServerRequest,
  response: HttpServerResponse.HttpServerResponse
): Effect.Effect<HttpServerResponse.HttpServerResponse> => {
  const body = response.body
  if (response.status !== 200 || body._tag !== "Uint8Array" || response.headers["content-encoding"] !== undefined) {
    return Effect.succeed(response)
  }
  const bytes = body.body
  // A validator is for reading a representation again: answers to POSTs (a charge, a turn) are not hashed.
  const readable = request.method === "GET" || request.method === "HEAD"
  const etag = readable ? response.headers["etag"] ?? validatorOf(bytes) : undefined
  const compressible = COMPRESSIBLE.test(body.contentType) && bytes.length >= MIN_BYTES
  const varied = compressible ? withVary(response) : response
  const tagged = etag === undefined ? varied : HttpServerResponse.setHeader(varied, "etag", etag)
  if (etag !== undefined && matches(request.headers["if-none-match"], etag)) {
    return Effect.succeed(tagged.pipe(HttpServerResponse.setBody(HttpBody.empty), HttpServerResponse.setStatus(304)))
  }
  const encoding = compressible ? encodingFor(request.headers["accept-encoding"]) : undefined
  if (encoding === undefined) return Effect.succeed(tagged)
  return Effect.map(compress(bytes, encoding, etag), (compressed) =>
    tagged.pipe(
      HttpServerResponse.setBody(HttpBody.uint8Array(compressed, body.contentType)),
      HttpServerResponse.setHeader("content-encoding", encoding)
    ))
}
