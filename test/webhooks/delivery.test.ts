import { assert, describe, layer } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { Clock, ConfigProvider, Effect, Layer, Option, TestClock, TestContext } from "effect"
import { UserId, type WebhookDeliveryId } from "../../src/platform/Ids.js"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { SecretBox } from "../../src/credentials/SecretBox.js"
import { Notifications } from "../../src/notifications/Notifications.js"
import { ToolsConfig } from "../../src/runtime/tools/Config.js"
import { WebhooksConfig } from "../../src/webhooks/Config.js"
import { Deliveries } from "../../src/webhooks/Deliveries.js"
import { WebhooksRepo } from "../../src/webhooks/Repo.js"
import { type Attempt, type AttemptResult, RESPONSE_BYTES, WebhookSender, WebhookSenderLive } from "../../src/webhooks/Sender.js"
import { Webhooks } from "../../src/webhooks/Webhooks.js"
import { insertUser, TestDatabase } from "../support/Database.js"

/**
 * Webhook delivery on the `TestClock` (issue 43 item 3; docs/webhooks.md): the retry schedule (exponential backoff
 * with jitter until the 72-hour window closes), the `webhook-id` kept across attempts, and an endpoint disabled
 * after failing for `WEBHOOK_DISABLE_AFTER`, its owner told. Attempts go to a stand-in sender that answers as each
 * test scripts it; the real sender (the outbound rule at delivery time) is tried against a local server at the end.
 */

const HOUR = 3_600_000
const BASE_MS = 5_000
const MAX_DELAY_MS = 6 * HOUR

interface Sent {
  readonly at: number
  readonly attempt: Attempt
}
const sent: Array<Sent> = []
/** What the stand-in endpoint answers next, by URL: a list of statuses, the last repeated. */
const scripts = new Map<string, Array<number>>()

const FakeSender = Layer.succeed(WebhookSender, {
  send: (attempt: Attempt) =>
    Effect.map(Clock.currentTimeMillis, (at): AttemptResult => {
      sent.push({ at, attempt })
      const script = scripts.get(attempt.url) ?? [200]
      const status = script.length > 1 ? script.shift()! : script[0]!
      return { ok: status < 300, status, latencyMs: 3, body: `status ${status}`, error: status < 300 ? null : `answered ${status}` }
    })
})

const Settings = {
  SECRETS_KEY: "test-secrets-key",
  TOOL_ALLOWED_HOSTS: "127.0.0.1",
  WEBHOOK_RETRY_BASE: "5 seconds",
  WEBHOOK_RETRY_MAX_DELAY: "6 hours",
  WEBHOOK_RETRY_WINDOW: "72 hours",
  WEBHOOK_DISABLE_AFTER: "5 days"
}

const Env = Webhooks.DefaultWithoutDependencies.pipe(
  Layer.provideMerge(Deliveries.DefaultWithoutDependencies),
  Layer.provideMerge(Layer.mergeAll(FakeSender, WebhooksRepo.Default, SecretBox.Default, Notifications.Default, WebhooksConfig.Default, ToolsConfig.Default)),
  Layer.provideMerge(TestDatabase(Settings))
)

let users = 0
const newUser = Effect.suspend(() => {
  const id = UserId.make(`usr_webhooks_${process.pid}_${++users}`)
  return Effect.as(insertUser(id), id)
})

const deliveriesOf = (endpointId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ id: WebhookDeliveryId; status: string; attempts: number; nextAttemptAt: Date; error: string | null }>`
      SELECT id, status, attempts, next_attempt_at, error FROM webhook_deliveries WHERE endpoint_id = ${endpointId} ORDER BY created_at, id`
  ).pipe(Effect.orDie)

const endpointOf = (endpointId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ status: string; disabledReason: string | null }>`SELECT status, disabled_reason FROM webhook_endpoints WHERE id = ${endpointId}`
  ).pipe(Effect.orDie, Effect.map((rows) => rows[0]!))

/** Attempts what is due, then moves the clock to the next pending attempt, until none is pending. */
const runToTheEnd = (endpointId: string) =>
  Effect.gen(function*() {
    const deliveries = yield* Deliveries
    for (let step = 0; step < 100; step++) {
      yield* deliveries.drain
      const pending = (yield* deliveriesOf(endpointId)).filter((d) => d.status === "pending")
      if (pending.length === 0) return
      yield* TestClock.setTime(Math.min(...pending.map((d) => d.nextAttemptAt.getTime())))
    }
    assert.fail("the deliveries never ended")
  })

const create = (account: UserId, path: string, events: ReadonlyArray<string> = ["run.completed"]) =>
  Effect.flatMap(Webhooks, (webhooks) => webhooks.create(account, { url: `http://127.0.0.1:9/${path}`, events }, Option.none()))

const emit = (account: UserId, key: string) =>
  Effect.flatMap(Webhooks, (webhooks) =>
    webhooks.emit({ account, type: "run.completed", data: { run_id: `run_${key}` }, idempotencyKey: key })).pipe(
      Effect.map(Option.getOrThrow)
    )

describe("webhook delivery", () => {
  layer(Env, { timeout: 60_000 })((it) => {
    it.effect("a failing endpoint is retried with exponential backoff and jitter until 72 hours have passed, the webhook-id unchanged", () =>
      Effect.gen(function*() {
        const account = yield* newUser
        const endpoint = yield* create(account, "always-500")
        const [stored] = yield* Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ secret: string }>`SELECT secret FROM webhook_endpoints WHERE id = ${endpoint.id}`).pipe(Effect.orDie)
        assert.match(stored!.secret, /^v1\./, "sealed")
        assert.notInclude(stored!.secret, endpoint.secret.slice(6))
        scripts.set(`http://127.0.0.1:9/always-500`, [500])
        const event = yield* emit(account, "schedule")
        assert.strictEqual(event.deliveries, 1)
        const start = yield* Clock.currentTimeMillis
        sent.length = 0
        yield* runToTheEnd(endpoint.id)

        const times = sent.map((s) => s.at - start)
        assert.strictEqual(times[0], 0, "the first attempt goes at once")
        assert.deepStrictEqual(new Set(sent.map((s) => s.attempt.headers["webhook-id"])), new Set([event.id]), "one webhook-id")
        assert.deepStrictEqual(new Set(sent.map((s) => s.attempt.body)), new Set([sent[0]!.attempt.body]), "the same body")
        const delays = times.slice(1).map((t, i) => t - times[i]!)
        // Every delay but the last (cut short by the window) lies in [full/2, full], full = base * 2^(n-1) capped.
        delays.slice(0, -1).forEach((delay, i) => {
          const full = Math.min(BASE_MS * 2 ** i, MAX_DELAY_MS)
          assert.isAtLeast(delay, full / 2, `retry ${i + 1}`)
          assert.isAtMost(delay, full, `retry ${i + 1}`)
        })
        assert.isTrue(delays.slice(0, -1).some((delay, i) => delay < Math.min(BASE_MS * 2 ** i, MAX_DELAY_MS)), "jittered")
        assert.isAbove(delays[5]!, delays[0]!, "the delays grow")
        assert.strictEqual(times.at(-1), 72 * HOUR, "the last attempt when the window closes, none after")
        const [delivery] = yield* deliveriesOf(endpoint.id)
        assert.strictEqual(delivery!.status, "failed")
        assert.strictEqual(delivery!.attempts, sent.length)
        // One event exhausted in 72 hours is not yet WEBHOOK_DISABLE_AFTER (5 days) of failures.
        assert.strictEqual((yield* endpointOf(endpoint.id)).status, "enabled")

        // Still failing on day 6: the endpoint is disabled, its owner told, and what it had pending dropped.
        yield* TestClock.setTime(start + 6 * 24 * HOUR)
        yield* emit(account, "schedule-day-6")
        yield* (yield* Deliveries).drain
        const disabled = yield* endpointOf(endpoint.id)
        assert.strictEqual(disabled.status, "disabled")
        assert.match(disabled.disabledReason!, /failed since/)
        const [, second] = yield* deliveriesOf(endpoint.id)
        assert.strictEqual(second!.status, "failed", "nothing stays pending for a disabled endpoint")
        assert.strictEqual(second!.error, "the endpoint was disabled")
        const notes = yield* (yield* Notifications).list(account)
        assert.deepStrictEqual(notes.map((n) => [n.kind, n.data.webhook_id]), [["webhook_disabled", endpoint.id]])
        // A disabled endpoint gets no new deliveries.
        assert.strictEqual((yield* emit(account, "schedule-day-6b")).deliveries, 0)
      }).pipe(Effect.provide(TestContext.TestContext)))

    it.effect("an endpoint is its account's alone; a private URL is refused when it is made", () =>
      Effect.gen(function*() {
        const webhooks = yield* Webhooks
        const owner = yield* newUser
        const other = yield* newUser
        const endpoint = yield* create(owner, "owned")
        yield* emit(owner, "owned")
        yield* (yield* Deliveries).drain
        const delivery = (yield* deliveriesOf(endpoint.id))[0]!
        const attempts: ReadonlyArray<Effect.Effect<unknown, { readonly _tag: string }>> = [
          webhooks.get(other, endpoint.id),
          webhooks.update(other, endpoint.id, { description: "mine" }),
          webhooks.rotateSecret(other, endpoint.id),
          webhooks.deliveries(other, endpoint.id, {}),
          webhooks.redeliver(other, endpoint.id, delivery.id),
          webhooks.remove(other, endpoint.id)
        ]
        for (const attempt of attempts) {
          const refused = yield* Effect.flip(attempt)
          assert.strictEqual(refused._tag, "NotFound")
        }
        assert.deepStrictEqual((yield* webhooks.list(other, {})).data, [])
        assert.strictEqual((yield* webhooks.get(owner, endpoint.id)).id, endpoint.id)
        const refused = yield* Effect.flip(webhooks.create(owner, { url: "http://10.0.0.7/hook", events: ["run.failed"] }, Option.none()))
        assert.strictEqual(refused._tag, "InvalidRequest")
        assert.match(refused.message, /url: 10\.0\.0\.7 resolves to a private address/)
      }).pipe(Effect.provide(TestContext.TestContext)))

    it.effect("a receiver that fails twice gets the same webhook-id three times; a success ends the failing streak", () =>
      Effect.gen(function*() {
        const account = yield* newUser
        const endpoint = yield* create(account, "flaky")
        scripts.set(`http://127.0.0.1:9/flaky`, [500, 503, 200, 500])
        const start = yield* Clock.currentTimeMillis
        const event = yield* emit(account, "flaky")
        sent.length = 0
        yield* runToTheEnd(endpoint.id)
        assert.deepStrictEqual(sent.map((s) => s.attempt.headers["webhook-id"]), [event.id, event.id, event.id])
        assert.notStrictEqual(sent[0]!.attempt.headers["webhook-signature"], undefined)
        const [delivery] = yield* deliveriesOf(endpoint.id)
        assert.strictEqual(delivery!.status, "succeeded")
        assert.strictEqual(delivery!.attempts, 3)

        // Failing again on day 6: the streak began today (the success ended the last one), so it stays enabled.
        yield* TestClock.setTime(start + 6 * 24 * HOUR)
        yield* emit(account, "flaky-day-6")
        yield* (yield* Deliveries).drain
        assert.strictEqual((yield* endpointOf(endpoint.id)).status, "enabled")
      }).pipe(Effect.provide(TestContext.TestContext)))
  })

  layer(Layer.provide(WebhookSenderLive, TestDatabase({ TOOL_ALLOWED_HOSTS: "", WEBHOOK_TIMEOUT: "5 seconds" })), { timeout: 30_000 })((it) => {
    it.effect("the sender refuses a private address at delivery time, written in the URL or resolved from a name", () =>
      Effect.gen(function*() {
        let reached = 0
        const server = createServer((req, res) => {
          reached++
          if (req.url === "/big") res.writeHead(500).end("e".repeat(5000))
          else if (req.url === "/moved") res.writeHead(307, { location: "/elsewhere" }).end()
          else if (req.url === "/silent") return
          else res.writeHead(200).end("ok")
        })
        yield* Effect.acquireRelease(
          Effect.async<void>((resume) => void server.listen(0, "127.0.0.1", () => resume(Effect.void))),
          () => Effect.sync(() => server.close())
        )
        const port = (server.address() as AddressInfo).port
        const sender = yield* WebhookSender
        const literal = yield* sender.send({ url: `http://127.0.0.1:${port}/`, headers: {}, body: "{}" })
        assert.isFalse(literal.ok)
        assert.match(literal.error!, /private address/)
        const named = yield* sender.send({ url: `http://localhost:${port}/`, headers: {}, body: "{}" })
        assert.isFalse(named.ok)
        assert.match(named.error!, /resolves to a private address/)
        assert.strictEqual(reached, 0, "nothing reached the local server")

        // Allowed by TOOL_ALLOWED_HOSTS: an answer is kept to its first 1 KB, a redirect is a failure, a silent
        // endpoint times out.
        const allowed = yield* Effect.provide(
          WebhookSender,
          WebhookSenderLive.pipe(Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["TOOL_ALLOWED_HOSTS", "127.0.0.1"], ["WEBHOOK_TIMEOUT", "300 millis"]])))))
        )
        const big = yield* allowed.send({ url: `http://127.0.0.1:${port}/big`, headers: {}, body: "{}" })
        assert.deepInclude(big, { ok: false, status: 500, body: "e".repeat(RESPONSE_BYTES), error: "answered 500" })
        const moved = yield* allowed.send({ url: `http://127.0.0.1:${port}/moved`, headers: {}, body: "{}" })
        assert.deepInclude(moved, { ok: false, status: 307, error: "redirect (307) not followed" })
        const silent = yield* allowed.send({ url: `http://127.0.0.1:${port}/silent`, headers: {}, body: "{}" })
        assert.deepInclude(silent, { ok: false, status: null, error: "timed out after 300ms" })
        assert.strictEqual(reached, 3)
      }).pipe(Effect.scoped))
  })
})
