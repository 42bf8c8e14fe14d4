import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs/promises"
import * as Http from "node:http"
import type * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import { requestAt } from "../support/Client.js"
import { pollPromise } from "../support/Poll.js"
import { freePort, jsonLines, launchPlatform, type PlatformProcess } from "../support/Process.js"
import { seedDataDir } from "../support/Templates.js"

/**
 * What an operator sees of a running process (issue 17), through the real entry point as its own process with its
 * stdout a pipe, as under a container runtime or systemd: JSON access lines with request ids, Prometheus text on the
 * metrics listener, and spans exported over OTLP/HTTP to a collector (here a node:http server on a random port that
 * decodes the JSON export).
 */

interface ReceivedSpan {
  readonly traceId: string
  readonly spanId: string
  readonly name: string
  readonly attributes: Record<string, unknown>
}

/** A stand-in OpenTelemetry collector: keeps every span POSTed to /v1/traces (OTLP/HTTP, JSON encoding). */
const makeCollector = Effect.acquireRelease(
  Effect.promise(() =>
    new Promise<{ readonly url: string; readonly spans: Array<ReceivedSpan>; readonly paths: Array<string>; readonly server: Http.Server }>((resolve) => {
      const spans: Array<ReceivedSpan> = []
      const paths: Array<string> = []
      const server = Http.createServer((request, response) => {
        let body = ""
        request.setEncoding("utf8")
        request.on("data", (chunk) => (body += chunk))
        request.on("end", () => {
          paths.push(`${request.method} ${request.url} ${request.headers["content-type"]}`)
          try {
            const decoded = JSON.parse(body)
            for (const resource of decoded.resourceSpans ?? []) {
              for (const scope of resource.scopeSpans ?? []) {
                for (const span of scope.spans ?? []) {
                  const attributes: Record<string, unknown> = {}
                  for (const attribute of span.attributes ?? []) {
                    attributes[attribute.key] = Object.values(attribute.value ?? {})[0]
                  }
                  spans.push({ traceId: span.traceId, spanId: span.spanId, name: span.name, attributes })
                }
              }
            }
          } catch {}
          response.writeHead(200, { "content-type": "application/json" })
          response.end("{}")
        })
      })
      server.listen(0, "127.0.0.1", () => {
        const { port } = server.address() as Net.AddressInfo
        resolve({ url: `http://127.0.0.1:${port}`, spans, paths, server })
      })
    })
  ),
  ({ server }) => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
)

/**
 * Already migrated (a copy of the run's template, Templates.ts): this test is about what a running process reports,
 * not a first start, whose output test/main.test.ts reads line by line as JSON.
 */
const tempDir = Effect.acquireRelease(
  Effect.promise(async () => {
    const dir = await Fs.mkdtemp(Path.join(Os.tmpdir(), "atrium-telemetry-"))
    await seedDataDir(dir)
    return dir
  }),
  (dir) => Effect.promise(() => Fs.rm(dir, { recursive: true, force: true }))
)

/** The access line of the request with this id; the pipe may trail the answer, so it is waited for. */
const accessLine = (platform: PlatformProcess, requestId: string) =>
  Effect.promise(async () => {
    // Polled: a real process's output pipe may trail its answer.
    const line = await pollPromise(
      () => jsonLines(platform).find((l) => l.msg === "request" && l.request_id === requestId),
      (found) => found !== undefined,
      `the access line for ${requestId}`,
      { every: 50, within: 10_000 }
    ).catch(() => undefined)
    if (line === undefined) throw new Error(`no access line for ${requestId} in:\n${platform.output()}`)
    return line
  })

const waitFor = <A>(what: string, probe: () => Promise<A | undefined>) =>
  // Polled: what a real process exports (its metrics, its spans) is read from outside it.
  Effect.promise(async () => (await pollPromise(probe, (found) => found !== undefined, what, { within: 30_000 }))!)

const PHONE = "+8613700001717"
const CODE = "171717"

describe("operations: logs, metrics and traces of the real process", () => {
  it.scopedLive("JSON access lines with request ids, /metrics on its own loopback listener, spans over OTLP", () =>
    Effect.gen(function*() {
      const collector = yield* makeCollector
      const metricsPort = yield* freePort
      const platform = yield* launchPlatform({
        DATA_DIR: yield* tempDir,
        SMS_TEST_OTP: `${PHONE}=${CODE}`,
        METRICS_PORT: String(metricsPort),
        OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
        OTEL_SERVICE_NAME: "atrium-under-test"
      })

      // A caller's sane request id comes back and names the access line; an insane one is replaced.
      const health = yield* requestAt(platform.url, "GET", "/api/health", { headers: { "x-request-id": "req-17-health" } })
      assert.strictEqual(health.status, 200)
      assert.strictEqual(health.headers.get("x-request-id"), "req-17-health")
      const odd = yield* requestAt(platform.url, "GET", "/api/health", { headers: { "x-request-id": "no spaces <allowed>" } })
      const generated = odd.headers.get("x-request-id")
      assert.match(generated ?? "", /^[0-9a-f-]{36}$/)
      // Errors carry it too, including a path no route matches.
      const missing = yield* requestAt(platform.url, "GET", "/no/such/route?code=query-secret-17", {
        headers: { "x-request-id": "req-17-missing" }
      })
      assert.strictEqual(missing.status, 404)
      assert.strictEqual(missing.headers.get("x-request-id"), "req-17-missing")

      const login = yield* requestAt(platform.url, "POST", "/api/auth/login", {
        body: { phone: PHONE, code: CODE },
        headers: { "x-request-id": "req-17-login" }
      })
      assert.strictEqual(login.status, 200)
      const token = login.body.token as string
      const key = yield* requestAt(platform.url, "POST", "/api/user/apiKey/create", {
        token,
        headers: { "x-request-id": "req-17-key" }
      })
      assert.strictEqual(key.status, 200)
      const models = yield* requestAt(platform.url, "GET", "/v1/models?api_key=query-secret-17", {
        token: key.body.key,
        headers: { "x-request-id": "req-17-models", "x-end-user-id": "end-user-17" }
      })
      assert.strictEqual(models.status, 200)

      const healthLine = yield* accessLine(platform, "req-17-health")
      assert.strictEqual(healthLine.level, "info")
      assert.strictEqual(healthLine.method, "GET")
      assert.strictEqual(healthLine.route, "/api/health")
      assert.strictEqual(healthLine.status, 200)
      assert.strictEqual(typeof healthLine.duration_ms, "number")
      assert.strictEqual(healthLine.account_id, null)
      assert.strictEqual((yield* accessLine(platform, generated!)).status, 200)
      const missingLine = yield* accessLine(platform, "req-17-missing")
      assert.strictEqual(missingLine.status, 404)
      assert.strictEqual(missingLine.route, "unmatched")

      // The account behind the credentials, and the end user it acts for, are named; the route is the pattern.
      const keyLine = yield* accessLine(platform, "req-17-key")
      assert.strictEqual(keyLine.route, "/api/user/apiKey/create")
      const userId = keyLine.account_id
      assert.match(String(userId), /^usr_/)
      const modelsLine = yield* accessLine(platform, "req-17-models")
      assert.strictEqual(modelsLine.route, "/v1/models")
      assert.strictEqual(modelsLine.account_id, userId)
      assert.strictEqual(modelsLine.end_user, "end-user-17")
      assert.strictEqual((yield* accessLine(platform, "req-17-login")).account_id, null)

      // Exactly one access line per request, and no secret anywhere in the log: not the login code, the login
      // token, the API key, nor what a query string carried.
      const requestLines = jsonLines(platform).filter((l) => l.msg === "request")
      for (const id of ["req-17-health", "req-17-missing", "req-17-login", "req-17-key", "req-17-models"]) {
        assert.strictEqual(requestLines.filter((l) => l.request_id === id).length, 1, id)
      }
      const log = platform.output()
      for (const secret of [token, key.body.key as string, "query-secret-17", CODE]) {
        assert.notInclude(log, secret)
      }

      // Tracing is on, so each access line names its trace, and the span of that request reaches the collector
      // with the route the router matched.
      assert.match(String(modelsLine.trace_id), /^[0-9a-f]{32}$/)
      const requestSpan = yield* waitFor("the /v1/models request span", async () =>
        collector.spans.find((s) => s.traceId === modelsLine.trace_id && s.attributes["http.route"] === "/v1/models"))
      assert.strictEqual(requestSpan.attributes["http.response.status_code"] !== undefined, true)
      // ...and the spans under it (the handler's `Effect.fn` spans, its SQL) share its trace.
      assert.isAbove(collector.spans.filter((s) => s.traceId === modelsLine.trace_id).length, 1)
      assert.ok(collector.paths.every((p) => p.startsWith("POST /v1/traces application/json")), collector.paths.join("\n"))

      // Prometheus text on the metrics port, on loopback; the API's port does not serve it.
      const scrape = () =>
        fetch(`http://127.0.0.1:${metricsPort}/metrics`).then((r) => r.text())
      const metrics = yield* waitFor("request metrics", async () => {
        const text = await scrape()
        return text.includes(`http_requests_total{method="GET",route="/v1/models",status="200"}`) ? text : undefined
      })
      const countOf = (line: string) => Number(metrics.split("\n").find((l) => l.startsWith(line + " "))?.split(" ")[1])
      assert.isAtLeast(countOf(`http_requests_total{method="GET",route="/api/health",status="200"}`), 2)
      assert.strictEqual(countOf(`http_requests_total{method="GET",route="unmatched",status="404"}`), 1)
      assert.strictEqual(
        countOf(`http_request_duration_seconds_count{method="GET",route="/v1/models",status="200"}`),
        1
      )
      assert.include(metrics, "# TYPE http_request_duration_seconds histogram")
      assert.include(metrics, "# TYPE http_requests_total counter")
      for (const name of ["sse_open_streams", "sessions_active", "session_turns_running", "session_turns_queued"]) {
        assert.include(metrics, `# TYPE ${name} gauge`, name)
      }
      yield* waitFor("process samples", async () => {
        const text = await scrape()
        return /nodejs_eventloop_delay_seconds\{quantile="p99"\} [0-9.e-]+/.test(text) &&
            /process_resident_memory_bytes [1-9]/.test(text)
          ? true
          : undefined
      })
      const onApiPort = yield* requestAt(platform.url, "GET", "/metrics")
      assert.notStrictEqual(onApiPort.status, 200)

      assert.strictEqual(yield* platform.terminate, 0, platform.output())
    }), { timeout: 240_000 })
})
