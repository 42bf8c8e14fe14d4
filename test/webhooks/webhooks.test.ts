import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { createServer, type IncomingHttpHeaders } from "node:http"
import type { AddressInfo } from "node:net"
import OpenAI from "openai"
import { Webhook } from "standardwebhooks"
import { requestAt } from "../support/Client.js"
import { launchPlatform } from "../support/Process.js"
import { INTERNAL_TOKEN, JWT_SECRET, makeMigratedStorage } from "../support/TestServer.js"
import { pollUntil } from "../support/Poll.js"

/**
 * Webhooks on the compiled build (issue 43 item 3; docs/webhooks.md): `dist/main.js` as a process, a receiver on
 * 127.0.0.1 (allowed by `TOOL_ALLOWED_HOSTS`, as the MCP tool tests allow theirs), events emitted through
 * `/internal/webhooks/emit`. A delivery verifies with `standardwebhooks` and with the `openai` SDK; the receiver
 * fails twice and sees one webhook-id; a redirect is not followed; a private URL is refused; another account sees
 * nothing; the secret is shown once and never printed.
 */

const ALICE = "+15550004301"
const BOB = "+15550004302"
const CODE = "123456"
const SECRETS_KEY = "webhooks-test-secrets-key-0123456789"

interface Received {
  readonly path: string
  readonly headers: IncomingHttpHeaders
  readonly body: string
}

const userIdOf = (token: string) => JSON.parse(Buffer.from(token.split(".")[1]!, "base64url").toString("utf8")).userId as string

/** Polled: deliveries go out from the platform's worker, in its own time. */
const eventually = <A>(what: string, check: Effect.Effect<A | undefined>) =>
  Effect.map(pollUntil(check, (found) => found !== undefined, what), (found) => found!)

describe("webhooks on the compiled build", () => {
  it.scopedLive("signed deliveries, retried under one webhook-id, never redirected, owned by one account", () =>
    Effect.gen(function*() {
      const received: Array<Received> = []
      let flakyFailures = 2
      const receiver = createServer((req, res) => {
        let body = ""
        req.on("data", (chunk) => (body += chunk))
        req.on("end", () => {
          received.push({ path: req.url ?? "", headers: req.headers, body })
          if (req.url === "/flaky" && flakyFailures > 0) {
            flakyFailures--
            res.writeHead(500, { "content-type": "text/plain" }).end("not yet: " + "x".repeat(5000))
          } else if (req.url === "/moved") {
            res.writeHead(302, { location: "/target" }).end()
          } else {
            res.writeHead(200, { "content-type": "text/plain" }).end("thanks")
          }
        })
      })
      yield* Effect.acquireRelease(
        Effect.async<void>((resume) => void receiver.listen(0, "127.0.0.1", () => resume(Effect.void))),
        () => Effect.sync(() => (receiver.closeAllConnections(), receiver.close()))
      )
      const hook = (path: string) => `http://127.0.0.1:${(receiver.address() as AddressInfo).port}${path}`

      const storage = yield* makeMigratedStorage
      const platform = yield* launchPlatform({
        ...storage.env,
        JWT_SECRET,
        INTERNAL_TOKEN,
        SECRETS_KEY,
        SMS_TEST_OTP: `${ALICE}=${CODE},${BOB}=${CODE}`,
        TOOL_ALLOWED_HOSTS: "127.0.0.1",
        WEBHOOK_RETRY_BASE: "200 millis",
        WEBHOOK_POLL: "200 millis",
        LOG_LEVEL: "Debug"
      })
      const call = (method: string, path: string, options: Parameters<typeof requestAt>[3] = {}) =>
        requestAt(platform.url, method, path, options)
      const login = (phone: string) =>
        Effect.map(call("POST", "/api/auth/login", { body: { phone, code: CODE } }), (reply) => reply.body.token as string)
      const alice = yield* login(ALICE)
      const bob = yield* login(BOB)
      const answers: Array<string> = []
      const as = (token: string) => (method: string, path: string, body?: unknown, headers?: Record<string, string>) =>
        Effect.tap(call(method, path, { token, ...(body === undefined ? {} : { body }), ...(headers === undefined ? {} : { headers }) }), (reply) =>
          Effect.sync(() => answers.push(reply.text)))
      const a = as(alice)
      const b = as(bob)

      // The outbound rule at the door, and the event list checked by name.
      for (const url of ["http://10.1.2.3/hook", "http://169.254.169.254/latest", "http://[::ffff:127.0.0.2]:8080/x"]) {
        const refused = yield* a("POST", "/v1/webhooks", { url, events: ["run.completed"] })
        assert.strictEqual(refused.status, 400, `${url}: ${refused.text}`)
        assert.match(refused.body.error.message, /url: .*private address/)
      }
      const badEvent = yield* a("POST", "/v1/webhooks", { url: hook("/x"), events: ["run.completed", "run.exploded"] })
      assert.strictEqual(badEvent.status, 400, badEvent.text)
      assert.include(badEvent.body.error.message, `unknown event "run.exploded"`)

      // Created once: the secret is in this answer (and a retry of it), nowhere else.
      const created = yield* a("POST", "/v1/webhooks", { url: hook("/flaky"), events: ["run.completed", "run.failed"], description: "flaky" }, { "idempotency-key": "create-flaky" })
      assert.strictEqual(created.status, 201, created.text)
      assert.match(created.body.id, /^whk_/)
      const secret = created.body.secret as string
      assert.match(secret, /^whsec_/)
      const retried = yield* a("POST", "/v1/webhooks", { url: hook("/flaky"), events: ["run.completed", "run.failed"], description: "flaky" }, { "idempotency-key": "create-flaky" })
      assert.strictEqual(retried.status, 201, retried.text)
      assert.strictEqual(retried.body.id, created.body.id, "a retried create is the same endpoint")
      const conflict = yield* a("POST", "/v1/webhooks", { url: hook("/other"), events: ["run.completed"] }, { "idempotency-key": "create-flaky" })
      assert.strictEqual(conflict.status, 409, conflict.text)
      const moved = yield* a("POST", "/v1/webhooks", { url: hook("/moved"), events: ["run.completed"] })
      assert.strictEqual(moved.status, 201, moved.text)
      const endpoint = created.body.id as string
      const afterCreate = answers.length

      const emit = (type: string, key: string) =>
        call("POST", "/internal/webhooks/emit", {
          headers: { authorization: `Bearer ${INTERNAL_TOKEN}` },
          body: { account: userIdOf(alice), type, data: { id: `run_${key}`, status: "completed" }, idempotency_key: key }
        })
      const emitted = yield* emit("run.completed", "run-1")
      assert.strictEqual(emitted.status, 200, emitted.text)
      assert.match(emitted.body.id, /^evt_/)
      assert.strictEqual(emitted.body.deliveries, 2)
      const eventId = emitted.body.id as string

      // The receiver fails twice, then takes the third attempt: the same webhook-id each time.
      const flaky = yield* eventually("three attempts at /flaky", Effect.sync(() => {
        const seen = received.filter((r) => r.path === "/flaky")
        return seen.length >= 3 ? seen : undefined
      }))
      assert.deepStrictEqual(flaky.map((r) => r.headers["webhook-id"]), [eventId, eventId, eventId])
      const last = flaky[2]!
      const headers = {
        "webhook-id": String(last.headers["webhook-id"]),
        "webhook-timestamp": String(last.headers["webhook-timestamp"]),
        "webhook-signature": String(last.headers["webhook-signature"])
      }
      assert.match(headers["webhook-signature"], /^v1,[A-Za-z0-9+/]+=*$/)
      const verified = new Webhook(secret).verify(last.body, headers) as Record<string, any>
      assert.strictEqual(verified.type, "run.completed")
      assert.deepStrictEqual(verified.data, { id: "run_run-1", status: "completed" })
      const unwrapped: any = yield* Effect.promise(() => new OpenAI({ apiKey: "unused" }).webhooks.unwrap(last.body, headers, secret))
      assert.strictEqual(unwrapped.id, eventId)
      assert.strictEqual(unwrapped.type, "run.completed")
      assert.strictEqual(unwrapped.data.id, "run_run-1")
      assert.throws(() => new Webhook(`whsec_${Buffer.from("another secret").toString("base64")}`).verify(last.body, headers))

      // The delivery log: three attempts, the last answer's status and first bytes (bounded).
      const log = yield* eventually("the delivery to succeed", Effect.map(a("GET", `/v1/webhooks/${endpoint}/deliveries`), (reply) =>
        reply.body.data?.[0]?.status === "succeeded" ? reply.body : undefined))
      const delivery = log.data[0]
      assert.match(delivery.id, /^whd_/)
      assert.deepInclude(delivery, { event_id: eventId, event_type: "run.completed", attempts: 3, response_status: 200, response_body: "thanks", error: null })
      assert.isAtLeast(delivery.latency_ms, 0)

      // A 302 is a failed attempt, not followed.
      const redirectLog = yield* eventually("a failed attempt at /moved", Effect.map(a("GET", `/v1/webhooks/${moved.body.id}/deliveries`), (reply) =>
        reply.body.data?.[0]?.attempts >= 1 ? reply.body.data[0] : undefined))
      assert.strictEqual(redirectLog.response_status, 302)
      assert.strictEqual(redirectLog.status, "pending", "it will be retried")
      assert.match(redirectLog.error, /redirect \(302\) not followed/)
      assert.isFalse(received.some((r) => r.path === "/target"), "the redirect was not followed")
      assert.strictEqual((yield* a("DELETE", `/v1/webhooks/${moved.body.id}`)).status, 200)

      // Another account sees nothing and can redeliver nothing.
      for (const [method, path] of [["GET", `/v1/webhooks/${endpoint}`], ["PATCH", `/v1/webhooks/${endpoint}`], ["DELETE", `/v1/webhooks/${endpoint}`], ["POST", `/v1/webhooks/${endpoint}/rotate_secret`], ["GET", `/v1/webhooks/${endpoint}/deliveries`], ["POST", `/v1/webhooks/${endpoint}/deliveries/${delivery.id}/redeliver`]] as const) {
        const reply = yield* b(method, path, method === "PATCH" ? { description: "mine now" } : undefined)
        assert.strictEqual(reply.status, 404, `${method} ${path}: ${reply.text}`)
      }
      assert.deepStrictEqual((yield* b("GET", "/v1/webhooks")).body.data, [])

      // Read, listed and changed: never the secret.
      const got = yield* a("GET", `/v1/webhooks/${endpoint}`)
      assert.strictEqual(got.status, 200, got.text)
      assert.notProperty(got.body, "secret")
      const listed = yield* a("GET", "/v1/webhooks")
      assert.sameMembers(listed.body.data.map((w: any) => w.id), [endpoint])
      const patched = yield* a("PATCH", `/v1/webhooks/${endpoint}`, { description: "still flaky", events: ["run.completed"] })
      assert.strictEqual(patched.status, 200, patched.text)
      assert.deepInclude(patched.body, { description: "still flaky", events: ["run.completed"], status: "enabled" })
      const toPrivate = yield* a("PATCH", `/v1/webhooks/${endpoint}`, { url: "http://192.168.1.1/hook" })
      assert.strictEqual(toPrivate.status, 400, toPrivate.text)

      // A new secret, shown once; a redelivery is signed with it and keeps the event's webhook-id.
      const rotated = yield* a("POST", `/v1/webhooks/${endpoint}/rotate_secret`)
      assert.strictEqual(rotated.status, 200, rotated.text)
      const newSecret = rotated.body.secret as string
      assert.notStrictEqual(newSecret, secret)
      const before = received.length
      const redelivered = yield* a("POST", `/v1/webhooks/${endpoint}/deliveries/${delivery.id}/redeliver`)
      assert.strictEqual(redelivered.status, 202, redelivered.text)
      assert.isTrue(redelivered.body.redelivery)
      const again = yield* eventually("the redelivery", Effect.sync(() => received.length > before ? received[before] : undefined))
      const againHeaders = {
        "webhook-id": String(again.headers["webhook-id"]),
        "webhook-timestamp": String(again.headers["webhook-timestamp"]),
        "webhook-signature": String(again.headers["webhook-signature"])
      }
      assert.strictEqual(againHeaders["webhook-id"], eventId)
      assert.doesNotThrow(() => new Webhook(newSecret).verify(again.body, againHeaders))
      assert.throws(() => new Webhook(secret).verify(again.body, againHeaders))

      // What did not leak: neither secret in any later answer, nor either one (nor SECRETS_KEY) in the output.
      const later = answers.slice(afterCreate).filter((text) => text !== rotated.text)
      for (const text of later) {
        assert.notInclude(text, secret.slice(6))
        assert.notInclude(text, newSecret.slice(6))
      }
      const output = platform.output()
      assert.include(output, "/v1/webhooks", "the access log was read")
      for (const leaked of [secret.slice(6), newSecret.slice(6), SECRETS_KEY]) assert.notInclude(output, leaked)
    }), { timeout: 180_000 })
})
