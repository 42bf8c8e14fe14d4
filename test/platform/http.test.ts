import { HttpServerRequest } from "@effect/platform"
import { assert, describe, it, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import * as Http from "node:http"
import * as Zlib from "node:zlib"
import { clientAddress, isPrivateAddress, routePath } from "../../src/platform/Network.js"
import { freshPhone, type Reply } from "../support/Client.js"
import { realWait } from "../support/Poll.js"
import {
  internalAuth,
  makeSmsInbox,
  makeMigratedStorage,
  type SmsInbox,
  startServer,
  type Storage,
  TestServer
} from "../support/TestServer.js"

/**
 * HTTP conventions (DESIGN.md §6): one error body for every error, the body limit, health, the OpenAPI document
 * and docs, and the `/internal/*` guard (spec 5.2 rule 6).
 *
 * The file boots one storage and starts three servers on it one after another (default settings, behind a trusted
 * proxy, with the key-value store down), so embedded mode creates one database instead of three.
 */

const MAX_BODY_BYTES = 1024 * 1024

/** Nothing listens here: a Redis that is down. */
const DEAD_REDIS = "redis://127.0.0.1:1"

/** A request with a deadline of its own: a hung server fails the test instead of stalling it. */
const send = (method: string, path: string, init: { headers?: Record<string, string>; body?: string | Uint8Array } = {}) =>
  Effect.flatMap(TestServer, (server) =>
    Effect.promise(async (): Promise<Reply> => {
      const response = await fetch(server.url + path, {
        method,
        ...(init.headers ? { headers: init.headers } : {}),
        ...(init.body !== undefined ? { body: init.body } : {}),
        signal: AbortSignal.timeout(10_000)
      })
      const text = await response.text()
      let body: unknown
      try {
        body = JSON.parse(text)
      } catch {
        body = undefined
      }
      return { status: response.status, headers: response.headers, text, body }
    }))

const postJson = (path: string, body: string | Uint8Array, headers: Record<string, string> = {}) =>
  send("POST", path, { body, headers: { "content-type": "application/json", ...headers } })

/** A response read whole by node:http, as `Reply`. */
const readReply = (res: Http.IncomingMessage, finish: (reply: Effect.Effect<Reply, Error>) => void) => {
  let text = ""
  res.setEncoding("utf8")
  res.on("data", (chunk: string) => (text += chunk))
  res.on("end", () => {
    let body: unknown
    try {
      body = JSON.parse(text)
    } catch {
      body = undefined
    }
    const headers = new Headers()
    for (const [name, value] of Object.entries(res.headers)) {
      if (typeof value === "string") headers.set(name, value)
    }
    finish(Effect.succeed({ status: res.statusCode ?? 0, headers, text, body }))
  })
  res.on("error", (error) => finish(Effect.fail(error)))
}

/**
 * A request through node:http, which sends the target exactly as written (`//x`, `/%69x`, `http://host/x`) and,
 * given `chunks`, a body with `Transfer-Encoding: chunked` and no Content-Length. It resolves with the response
 * even when the server answers before the body is complete.
 */
const raw = (
  method: string,
  target: string,
  options: { headers?: Record<string, string>; chunks?: () => Iterator<string | Buffer> } = {}
) =>
  Effect.flatMap(TestServer, (server) =>
    Effect.async<Reply, Error>((resume) => {
      let done = false
      const finish = (result: Effect.Effect<Reply, Error>) => {
        if (!done) {
          done = true
          resume(result)
        }
      }
      const url = new URL(server.url)
      const req = Http.request({
        host: url.hostname,
        port: url.port,
        method,
        path: target,
        headers: {
          ...(options.chunks ? { "content-type": "application/json", "transfer-encoding": "chunked" } : {}),
          ...options.headers
        },
        timeout: 10_000
      })
      req.on("response", (res) => readReply(res, finish))
      req.on("timeout", () => req.destroy(new Error("no response within 10 s")))
      req.on("error", (error) => finish(Effect.fail(error)))
      if (options.chunks === undefined) {
        req.end()
      } else {
        const chunks = options.chunks()
        const pump = () => {
          while (!done) {
            const next = chunks.next()
            if (next.done) return void req.end()
            if (!req.write(next.value)) return void req.once("drain", pump)
          }
        }
        pump()
      }
      return Effect.sync(() => req.destroy())
    }))

/** `{"phone":"aaa...a"}` of at least `totalBytes`, in 64 KiB chunks. */
function* paddedPhone(totalBytes: number) {
  const chunk = Buffer.alloc(64 * 1024, "a")
  yield "{\"phone\":\""
  for (let sent = 0; sent < totalBytes; sent += chunk.length) yield chunk
  yield "\"}"
}

/** The platform's one error body and nothing else: `{"error":{"type","message"}}`. */
const assertEnvelope = (reply: Reply, status: number, type: string) => {
  assert.strictEqual(reply.status, status, reply.text)
  assert.match(reply.headers.get("content-type") ?? "", /^application\/json/)
  assert.deepStrictEqual(Object.keys(reply.body ?? {}), ["error"], reply.text)
  assert.deepStrictEqual(Object.keys(reply.body.error).sort(), ["message", "type"], reply.text)
  assert.strictEqual(reply.body.error.type, type, reply.text)
  assert.isString(reply.body.error.message)
  assert.isAbove(reply.body.error.message.length, 0)
  return reply.body.error.message as string
}

/** What must never reach a caller: stack frames, SQL, driver and connection details. */
const assertNoInternals = (reply: Reply) => {
  for (const leak of [/\bat .*\(.*:\d+:\d+\)/, /node_modules/, /\.ts:\d+/, /stack/i, /redis/i, /ioredis/i,
    /ECONNREFUSED/, /127\.0\.0\.1/, /SELECT|INSERT/, /_tag/, /Error:/, /enableOfflineQueue/, /writeable/])
  {
    assert.notMatch(reply.text, leak, `response leaks internals: ${reply.text}`)
  }
}

class Shared extends Context.Tag("test/http/Shared")<Shared, { storage: Storage; inbox: SmsInbox }>() {}

const SharedLive = Layer.scoped(Shared, Effect.all({ storage: makeMigratedStorage, inbox: makeSmsInbox }))

/** A server on the shared storage with `env` on top; it stops when its `it.layer` block ends. */
const serverWith = (env: Record<string, string>) =>
  Layer.scoped(TestServer, Effect.flatMap(Shared, ({ inbox, storage }) => startServer(storage, inbox, env)))

/** Does not build a request from a socket: `clientAddress` only reads headers and the peer address. */
const fakeRequest = (remoteAddress: string | undefined, forwardedFor?: string) =>
  HttpServerRequest.fromWeb(
    new Request("http://atrium.test/internal/x", forwardedFor ? { headers: { "x-forwarded-for": forwardedFor } } : {})
  ).modify(remoteAddress === undefined ? {} : { remoteAddress })

describe("private network addresses", () => {
  it("isPrivateAddress accepts loopback and private ranges", () => {
    for (
      const address of [
        "127.0.0.1",
        "127.255.0.9",
        "10.0.0.1",
        "10.255.255.255",
        "172.16.0.1",
        "172.31.255.254",
        "192.168.1.10",
        "169.254.1.1",
        "100.64.0.1",
        "::1",
        "fc00::1",
        "fd12:3456:789a::1",
        "fe80::1",
        "::ffff:10.0.0.1",
        "::ffff:127.0.0.1",
        "::FFFF:192.168.0.1",
        "::ffff:a00:1"
      ]
    ) assert.isTrue(isPrivateAddress(address), address)
  })

  it("isPrivateAddress refuses public addresses and what is not an address", () => {
    for (
      const address of [
        "8.8.8.8",
        "1.1.1.1",
        "172.15.255.255",
        "172.32.0.1",
        "192.169.0.1",
        "11.0.0.1",
        "100.128.0.1",
        "2001:4860:4860::8888",
        "fe00::1",
        "::ffff:8.8.8.8",
        "::ffff:808:808",
        "::",
        "",
        "unknown",
        "localhost",
        "10.0.0.1, 8.8.8.8"
      ]
    ) assert.isFalse(isPrivateAddress(address), address)
  })

  it("clientAddress is the socket's peer, IPv4-mapped IPv6 unwrapped", () => {
    assert.strictEqual(clientAddress(fakeRequest("::ffff:10.0.0.1"), false), "10.0.0.1")
    assert.isTrue(isPrivateAddress(clientAddress(fakeRequest("::ffff:10.0.0.1"), false)))
    assert.strictEqual(clientAddress(fakeRequest("::1"), false), "::1")
    assert.strictEqual(clientAddress(fakeRequest("203.0.113.7"), false), "203.0.113.7")
    assert.isFalse(isPrivateAddress(clientAddress(fakeRequest(undefined), false)))
  })

  it("clientAddress ignores X-Forwarded-For unless the proxy is trusted", () => {
    assert.strictEqual(clientAddress(fakeRequest("127.0.0.1", "8.8.8.8"), false), "127.0.0.1")
    assert.strictEqual(clientAddress(fakeRequest("127.0.0.1", "8.8.8.8"), true), "8.8.8.8")
    assert.strictEqual(clientAddress(fakeRequest("127.0.0.1", "::ffff:8.8.8.8"), true), "8.8.8.8")
    // Not an address: the header is useless, the peer (the proxy) is what we know.
    assert.strictEqual(clientAddress(fakeRequest("127.0.0.1", "garbage"), true), "127.0.0.1")
  })

  it("clientAddress behind a trusted proxy takes the entry that proxy appended, not one the caller wrote", () => {
    // The proxy appends the address it saw; whatever stands left of it came from the caller and may be forged.
    assert.strictEqual(clientAddress(fakeRequest("127.0.0.1", "10.0.0.1, 8.8.8.8"), true), "8.8.8.8")
    assert.strictEqual(clientAddress(fakeRequest("127.0.0.1", " 10.0.0.1 ,203.0.113.9 "), true), "203.0.113.9")
  })
})

describe("routePath", () => {
  it("sees the path the router matches, however the target is written", () => {
    for (
      const target of [
        "/internal/x",
        "//internal/x",
        "/internal//x",
        "/%69nternal/x",
        "/INTERNAL/x",
        "/Internal/x?y=1",
        "/internal/x;jsessionid=1",
        "/internal/x#frag",
        "http://example.com/internal/x",
        "HTTP://example.com//internal/x"
      ]
    ) assert.strictEqual(routePath(target), "/internal/x", target)
    assert.strictEqual(routePath("/api/health?x=/internal/y"), "/api/health")
    assert.strictEqual(routePath("/%E0%A4%A"), "/%e0%a4%a")
  })
})

describe("HTTP", () => {
  // Live services: the servers run on the real clock, not on a TestClock frozen at 1970.
  layer(SharedLive, { excludeTestServices: true })((it) => {
    it.layer(serverWith({}))("with default settings", (it) => {
      it.effect("an unknown route outside /api is 404 not_found with only the error body", () =>
        Effect.gen(function*() {
          assertEnvelope(yield* send("GET", "/nope"), 404, "not_found")
          assertEnvelope(yield* send("POST", "/nope/deeper?x=1", { body: "{}" }), 404, "not_found")
        }))

      it.scoped("a keep-alive connection left idle longer than Node's 5 s default still serves the next request", () =>
        Effect.gen(function*() {
          const { url } = yield* TestServer
          // A client whose pool keeps an idle socket as long as it likes, as a load balancer's does (60 s on common
          // ones): the server must not be the side that closes it first.
          const agent = new Http.Agent({ keepAlive: true, maxSockets: 1 })
          yield* Effect.addFinalizer(() => Effect.sync(() => agent.destroy()))
          const get = () =>
            Effect.async<{ status: number; reused: boolean }, Error>((resume) => {
              const req = Http.get(`${url}/api/health`, { agent }, (res) => {
                res.resume()
                res.on("end", () => resume(Effect.succeed({ status: res.statusCode!, reused: req.reusedSocket })))
              })
              req.on("error", (error) => resume(Effect.fail(error)))
            })
          assert.deepStrictEqual(yield* get(), { status: 200, reused: false })
          // Real wait: the server's idle timeout is wall-clock time on its sockets, and a socket it keeps says nothing.
          yield* realWait(6_000)
          assert.deepStrictEqual(yield* get(), { status: 200, reused: true })
        }), 30_000)

      it.effect("an unknown /v1 route without credentials is 404 not_found", () =>
        Effect.gen(function*() {
          assertEnvelope(yield* send("GET", "/v1/nope"), 404, "not_found")
        }))

      it.effect("a known path with a method it does not serve is 405 method_not_allowed with Allow (issue 16)", () =>
        Effect.gen(function*() {
          const reply = yield* send("GET", "/api/auth/login")
          assertEnvelope(reply, 405, "method_not_allowed")
          assert.strictEqual(reply.headers.get("allow"), "POST")
          const agents = yield* send("DELETE", "/v1/agents")
          assertEnvelope(agents, 405, "method_not_allowed")
          assert.deepStrictEqual(agents.headers.get("allow")!.split(", ").sort(), ["GET", "POST"])
        }))

      it.effect("malformed JSON is 400 invalid_request", () =>
        Effect.gen(function*() {
          assertEnvelope(yield* postJson("/api/auth/login", "{\"phone\": \"+8613800000000\", "), 400, "invalid_request")
          assertEnvelope(yield* postJson("/api/auth/login", "not json at all"), 400, "invalid_request")
        }))

      it.effect("a missing field is 400 invalid_request naming the field", () =>
        Effect.gen(function*() {
          const message = assertEnvelope(
            yield* postJson("/api/auth/login", JSON.stringify({ phone: "+8613800000000" })),
            400,
            "invalid_request"
          )
          assert.include(message, "code")
        }))

      it.effect("a field of the wrong type is 400 invalid_request naming the field", () =>
        Effect.gen(function*() {
          const message = assertEnvelope(
            yield* postJson("/api/auth/login", JSON.stringify({ phone: 8613800000000, code: "123456" })),
            400,
            "invalid_request"
          )
          assert.include(message, "phone")
          const other = assertEnvelope(
            yield* postJson("/api/auth/sms/sendCode", JSON.stringify({ phone: "not-a-phone" })),
            400,
            "invalid_request"
          )
          assert.include(other, "phone")
        }))

      it.effect("a body over the limit with a Content-Length is 413 payload_too_large", () =>
        Effect.gen(function*() {
          const reply = yield* postJson("/api/auth/login", new Uint8Array(MAX_BODY_BYTES + 1).fill(0x20))
          assertEnvelope(reply, 413, "payload_too_large")
        }))

      it.effect("a body of exactly the limit is read", () =>
        Effect.gen(function*() {
          const json = JSON.stringify({ phone: "+8613800000000", code: "000000" })
          // Leading whitespace is valid JSON: the body is exactly MAX_BODY_BYTES long and parses.
          const body = " ".repeat(MAX_BODY_BYTES - json.length) + json
          assert.strictEqual(Buffer.byteLength(body), MAX_BODY_BYTES)
          const reply = yield* postJson("/api/auth/login", body)
          assert.notStrictEqual(reply.status, 413, reply.text)
          assert.notStrictEqual(reply.status, 400, reply.text)
        }))

      it.effect("a chunked body (no Content-Length) over the limit is 413 payload_too_large", () =>
        Effect.gen(function*() {
          const reply = yield* raw("POST", "/api/auth/login", { chunks: () => paddedPhone(MAX_BODY_BYTES + 1) })
          assertEnvelope(reply, 413, "payload_too_large")
          // The server is still fine afterwards.
          assert.strictEqual((yield* send("GET", "/api/health")).status, 200)
        }))

      it.effect("a chunked body under the limit reaches the handler whole", () =>
        Effect.gen(function*() {
          const login = yield* raw("POST", "/api/auth/login", {
            chunks: () => ["{\"phone\":\"+86138", "00000000\",", "\"code\":\"123456\"}"][Symbol.iterator]()
          })
          assert.strictEqual(login.status, 200, login.text)
          assert.isString(login.body.token)
          // Headers (the cookie with the token) come along with the buffered body.
          const list = yield* raw("POST", "/api/user/apiKey/create", {
            headers: { cookie: `token=${login.body.token}` },
            chunks: () => ["{\"name\":", "\"chunked\"}"][Symbol.iterator]()
          })
          assert.strictEqual(list.status, 200, list.text)
          assert.strictEqual(list.body.name, "chunked")
          // A GET that sends a (pointless) chunked body is still served.
          const health = yield* raw("GET", "/api/health", { chunks: () => ["{}"][Symbol.iterator]() })
          assert.strictEqual(health.status, 200, health.text)
          // Near the limit, in many chunks: read and validated (an invalid phone), not refused.
          const big = yield* raw("POST", "/api/auth/login", { chunks: () => paddedPhone(MAX_BODY_BYTES - 128 * 1024) })
          assert.include(assertEnvelope(big, 400, "invalid_request"), "phone")
        }))

      it.effect("GET /api/health is 200 with the database and the store ok", () =>
        Effect.gen(function*() {
          const reply = yield* send("GET", "/api/health")
          assert.strictEqual(reply.status, 200, reply.text)
          const { capabilities, ...checks } = reply.body
          assert.deepStrictEqual(checks, { status: "ok", database: "ok", store: "ok" })
          // run_code's sandbox reports itself once its start-up self-check has run.
          assert.oneOf(capabilities.run_code.status, ["checking", "available"], JSON.stringify(capabilities))
        }))

      it.effect("/openapi.json is the OpenAPI 3.1 document of the API", () =>
        Effect.gen(function*() {
          const reply = yield* send("GET", "/openapi.json")
          assert.strictEqual(reply.status, 200)
          assert.match(reply.headers.get("content-type") ?? "", /^application\/json/)
          assert.strictEqual(reply.body.openapi, "3.1.0")
          for (const path of ["/api/auth/login", "/api/auth/sms/sendCode", "/api/health", "/v1/models"]) {
            assert.property(reply.body.paths, path)
          }
        }))

      it.effect("/docs is an HTML page", () =>
        Effect.gen(function*() {
          const reply = yield* send("GET", "/docs")
          assert.strictEqual(reply.status, 200)
          assert.match(reply.headers.get("content-type") ?? "", /^text\/html/)
          assert.match(reply.text, /<html/i)
        }))

      it.effect("answers in memory are compressed for a caller that accepts it and carry an ETag that a revalidation meets with 304", () =>
        Effect.gen(function*() {
          const { url } = yield* TestServer
          /** The bytes as they cross the wire (fetch would decompress them). */
          const raw = (path: string, headers: Record<string, string>) =>
            Effect.promise(() =>
              new Promise<{ status: number; headers: Http.IncomingHttpHeaders; bytes: Buffer }>((resolve, reject) => {
                Http.get(url + path, { headers }, (response) => {
                  const chunks: Array<Buffer> = []
                  response.on("data", (chunk: Buffer) => chunks.push(chunk))
                  response.on("end", () => resolve({ status: response.statusCode!, headers: response.headers, bytes: Buffer.concat(chunks) }))
                }).on("error", reject)
              })
            )
          const plain = yield* raw("/openapi.json", {})
          assert.strictEqual(plain.status, 200)
          assert.isUndefined(plain.headers["content-encoding"])
          const brotli = yield* raw("/openapi.json", { "accept-encoding": "gzip, deflate, br" })
          assert.strictEqual(brotli.headers["content-encoding"], "br")
          assert.include(brotli.headers["vary"] ?? "", "accept-encoding")
          assert.isBelow(brotli.bytes.length, plain.bytes.length / 4)
          assert.isTrue(Zlib.brotliDecompressSync(brotli.bytes).equals(plain.bytes))
          const gzip = yield* raw("/openapi.json", { "accept-encoding": "gzip;q=1, br;q=0" })
          assert.strictEqual(gzip.headers["content-encoding"], "gzip")
          assert.isTrue(Zlib.gunzipSync(gzip.bytes).equals(plain.bytes))
          // One validator for the representation's content, whichever encoding carried it.
          const etag = plain.headers["etag"]!
          assert.match(etag, /^W\/"/)
          assert.strictEqual(brotli.headers["etag"], etag)
          const revalidated = yield* raw("/openapi.json", { "if-none-match": etag, "accept-encoding": "br" })
          assert.strictEqual(revalidated.status, 304)
          assert.strictEqual(revalidated.bytes.length, 0)
          assert.strictEqual((yield* raw("/openapi.json", { "if-none-match": 'W/"other"' })).status, 200)
          // Errors and small answers go as they are.
          const missing = yield* raw("/v1/no-such-route", { "accept-encoding": "br" })
          assert.strictEqual(missing.status, 404)
          assert.isUndefined(missing.headers["content-encoding"])
        }))

      it.effect("/internal/* answers a loopback caller with the operator's bearer (no route yet: 404, not 403)", () =>
        Effect.gen(function*() {
          assertEnvelope(yield* send("GET", "/internal/anything", { headers: internalAuth }), 404, "not_found")
        }))

      it.effect("/internal/* refuses a loopback caller without the bearer, or with another one, with 401", () =>
        Effect.gen(function*() {
          const bare = yield* send("GET", "/internal/anything")
          assertEnvelope(bare, 401, "unauthorized")
          assert.strictEqual(bare.headers.get("www-authenticate"), "Bearer")
          for (
            const authorization of [
              "Bearer wrong",
              `Bearer ${internalAuth.authorization!.slice(7, -1)}`,
              `Basic ${internalAuth.authorization!.slice(7)}`,
              "Bearer "
            ]
          ) assertEnvelope(yield* send("POST", "/internal/wallets/usr_x/grants", { headers: { authorization } }), 401, "unauthorized")
        }))

      it.effect("/internal/* ignores X-Forwarded-For when the proxy is not trusted", () =>
        Effect.gen(function*() {
          const reply = yield* send("GET", "/internal/anything", { headers: { "x-forwarded-for": "8.8.8.8", ...internalAuth } })
          assertEnvelope(reply, 404, "not_found")
        }))
    })

    it.layer(serverWith({ INTERNAL_TOKEN: "" }))("without INTERNAL_TOKEN", (it) => {
      it.effect("/internal/* is closed (403) to every caller, loopback and bearer included", () =>
        Effect.gen(function*() {
          assertEnvelope(yield* send("GET", "/internal/anything"), 403, "forbidden")
          assertEnvelope(yield* send("GET", "/internal/anything", { headers: internalAuth }), 403, "forbidden")
        }))
    })

    it.layer(serverWith({ TRUST_PROXY: "true" }))("behind a trusted proxy", (it) => {
      it.effect("/internal/* refuses a public client named by X-Forwarded-For with 403 forbidden, bearer or not", () =>
        Effect.gen(function*() {
          const reply = yield* send("GET", "/internal/anything", { headers: { "x-forwarded-for": "8.8.8.8" } })
          assertEnvelope(reply, 403, "forbidden")
          const withBearer = yield* send("GET", "/internal/anything", { headers: { "x-forwarded-for": "8.8.8.8", ...internalAuth } })
          assertEnvelope(withBearer, 403, "forbidden")
          assertEnvelope(reply, 403, "forbidden")
          const v6 = yield* send("GET", "/internal/anything", { headers: { "x-forwarded-for": "2001:db8::1" } })
          assertEnvelope(v6, 403, "forbidden")
        }))

      it.effect("/internal/* refuses a public client that forges a private address left of the proxy's entry", () =>
        Effect.gen(function*() {
          const reply = yield* send("GET", "/internal/anything", {
            headers: { "x-forwarded-for": "10.0.0.1, 8.8.8.8" }
          })
          assertEnvelope(reply, 403, "forbidden")
        }))

      it.effect("/internal/* refuses a public client however the path is written", () =>
        Effect.gen(function*() {
          const headers = { "x-forwarded-for": "8.8.8.8" }
          for (
            const target of [
              "//internal/anything",
              "/%69nternal/anything",
              "/INTERNAL/anything",
              "/internal",
              "/internal;x",
              "http://atrium.example/internal/anything"
            ]
          ) assertEnvelope(yield* raw("GET", target, { headers }), 403, "forbidden")
        }))

      it.effect("/internal/* answers a private client named by X-Forwarded-For", () =>
        Effect.gen(function*() {
          const reply = yield* send("GET", "/internal/anything", { headers: { "x-forwarded-for": "10.1.2.3", ...internalAuth } })
          assertEnvelope(reply, 404, "not_found")
        }))

      it.effect("routes outside /internal are not guarded", () =>
        Effect.gen(function*() {
          const reply = yield* send("GET", "/api/health", { headers: { "x-forwarded-for": "8.8.8.8" } })
          assert.strictEqual(reply.status, 200, reply.text)
        }))
    })

    it.layer(serverWith({ REDIS_URL: DEAD_REDIS }))("with the key-value store down", (it) => {
      it.effect("GET /api/health is 503 naming the store, promptly", () =>
        Effect.gen(function*() {
          const reply = yield* send("GET", "/api/health")
          const message = assertEnvelope(reply, 503, "service_unavailable")
          assert.include(message, "store")
          assert.notInclude(message, "database")
          assertNoInternals(reply)
        }))

      // An outage is not a bug (issue 33): a request that needs the store is a 503 the client may retry, with no details.
      it.effect("a request that needs the store is 503 service_unavailable with Retry-After, no details", () =>
        Effect.gen(function*() {
          const reply = yield* postJson("/api/auth/sms/sendCode", JSON.stringify({ phone: freshPhone() }))
          assertEnvelope(reply, 503, "service_unavailable")
          assert.isNotNull(reply.headers.get("retry-after"), reply.text)
          assertNoInternals(reply)
        }))
    })
  })
})
