import { Cause, Clock, Duration, Effect, Layer, Option, Random, Redacted } from "effect"
import { Webhook } from "standardwebhooks"
import { SecretBox } from "../credentials/SecretBox.js"
import { Notifications } from "../notifications/Notifications.js"
import { newId } from "../platform/Ids.js"
import { makeWakeup } from "../platform/Wakeup.js"
import { WebhooksConfig } from "./Config.js"
import { type ClaimRow, WebhooksRepo } from "./Repo.js"
import { type AttemptResult, WebhookSender, WebhookSenderLive } from "./Sender.js"

/** How many due deliveries a process claims at once, and sends side by side. */
const BATCH = 8

/**
 * The body of every delivery of an event, the same bytes on each attempt: Standard Webhooks' `{type, timestamp,
 * data}` with OpenAI's `{id, object, created_at}` beside them, so either kind of receiver reads it as it expects.
 */
export const payloadOf = (event: { readonly id: string; readonly type: string; readonly createdAt: Date; readonly data: unknown }) =>
  JSON.stringify({
    id: event.id,
    object: "event",
    type: event.type,
    created_at: Math.floor(event.createdAt.getTime() / 1000),
    timestamp: event.createdAt.toISOString(),
    data: event.data
  })

/**
 * The delay before retry `n` (1 = the first retry): `base · 2^(n-1)`, at most `max`, with "equal jitter" (half of
 * it fixed, half random) so endpoints that failed together do not all come back at the same instant.
 */
export const retryDelay = (n: number, base: Duration.Duration, max: Duration.Duration) =>
  Effect.map(Random.next, (random) => {
    const full = Math.min(Duration.toMillis(base) * 2 ** Math.min(n - 1, 40), Duration.toMillis(max))
    return Math.round(full / 2 + (random * full) / 2)
  })

/**
 * Delivery of webhook events (docs/webhooks.md). Due deliveries are rows the worker claims under a lease (`claim`:
 * `FOR UPDATE SKIP LOCKED`), so every process of the cluster polls and each delivery is attempted by one of them at
 * a time; a process that dies mid-attempt leaves its lease to pass and another takes the delivery over. Each attempt
 * is signed anew (Standard Webhooks: `webhook-id` is the event's id, the same on every attempt; the timestamp and
 * signature are the attempt's). A failed attempt is retried with backoff until the delivery's retry window closes;
 * an endpoint whose every attempt has failed for `WEBHOOK_DISABLE_AFTER` is disabled and its owner told.
 */
export class Deliveries extends Effect.Service<Deliveries>()("atrium/webhooks/Deliveries", {
  effect: Effect.gen(function*() {
    const config = yield* WebhooksConfig
    const repo = yield* WebhooksRepo
    const sender = yield* WebhookSender
    const box = yield* SecretBox
    const notifications = yield* Notifications
    const runner = newId("whw")
    const leaseMillis = Duration.toMillis(config.timeout) + 30_000
    const wakeup = yield* makeWakeup

    const send = (claim: ClaimRow, nowMillis: number): Effect.Effect<AttemptResult> => {
      const secret = box.open(claim.secret)
      if (Option.isNone(secret)) {
        return Effect.succeed({
          ok: false,
          status: null,
          latencyMs: 0,
          body: null,
          error: "the endpoint's signing secret cannot be read under this SECRETS_KEY; rotate it"
        })
      }
      const body = payloadOf({ id: claim.eventId, type: claim.eventType, createdAt: claim.eventCreatedAt, data: claim.data })
      const seconds = Math.floor(nowMillis / 1000)
      const signature = new Webhook(Redacted.value(secret.value)).sign(claim.eventId, new Date(seconds * 1000), body)
      return sender.send({
        url: claim.url,
        headers: {
          "content-type": "application/json",
          "user-agent": "Atrium-Webhooks/1.0",
          "webhook-id": claim.eventId,
          "webhook-timestamp": String(seconds),
          "webhook-signature": signature
        },
        body
      })
    }

    /** Turns the endpoint off (once), drops what it still had to send, and tells its owner. */
    const disable = (claim: ClaimRow, since: Date, now: Date) =>
      Effect.gen(function*() {
        const reason = `every delivery attempt has failed since ${since.toISOString()}`
        if (!(yield* repo.disable({ endpointId: claim.endpointId, reason, now }))) return
        yield* repo.dropPending({ endpointId: claim.endpointId, reason: "the endpoint was disabled", now })
        yield* Effect.logWarning("webhooks: endpoint disabled after failing").pipe(Effect.annotateLogs({ webhook_id: claim.endpointId }))
        yield* notifications.notify(
          claim.accountId,
          "webhook_disabled",
          "A webhook endpoint was disabled",
          `Deliveries to ${claim.url} have failed since ${since.toISOString()}, so the endpoint was disabled. Fix it, then turn it back on (PATCH /v1/webhooks/${claim.endpointId} with {"disabled": false}) and redeliver what it missed.`,
          { webhook_id: claim.endpointId, url: claim.url }
        )
      })

    const attempt = (claim: ClaimRow) =>
      Effect.gen(function*() {
        const started = yield* Clock.currentTimeMillis
        if (claim.endpointStatus === "disabled") {
          return yield* repo.dropPending({ endpointId: claim.endpointId, reason: "the endpoint is disabled", now: new Date(started) })
        }
        const result = yield* send(claim, started)
        const nowMillis = yield* Clock.currentTimeMillis
        const now = new Date(nowMillis)
        let next: Date | null = null
        if (!result.ok && nowMillis < claim.expiresAt.getTime()) {
          const delay = yield* retryDelay(claim.attempts + 1, config.retryBase, config.retryMaxDelay)
          // The last retry falls when the window closes, not after it.
          next = new Date(Math.min(nowMillis + delay, claim.expiresAt.getTime()))
        }
        const recorded = yield* repo.record({
          id: claim.id,
          runner,
          ok: result.ok,
          next,
          responseStatus: result.status,
          latencyMs: result.latencyMs,
          responseBody: result.body,
          error: result.error,
          now
        })
        // None: the lease was lost (another process took the delivery over); its outcome is that process's to write.
        if (Option.isNone(recorded) || result.ok) return
        const since = recorded.value.failingSince
        if (since !== null && nowMillis - since.getTime() >= Duration.toMillis(config.disableAfter)) {
          yield* disable(claim, since, now)
        }
      }).pipe(Effect.withSpan("Deliveries.attempt", { attributes: { deliveryId: claim.id, webhookId: claim.endpointId } }))

    /** Attempts every delivery due now, batch by batch, until none is left; answers how many were attempted. */
    const drain: Effect.Effect<number> = Effect.gen(function*() {
      let attempted = 0
      while (true) {
        const now = yield* Clock.currentTimeMillis
        const claims = yield* repo.claim({ runner, now: new Date(now), leaseUntil: new Date(now + leaseMillis), limit: BATCH })
        if (claims.length === 0) return attempted
        yield* Effect.forEach(claims, attempt, { concurrency: BATCH, discard: true })
        attempted += claims.length
      }
    }).pipe(Effect.withSpan("Deliveries.drain"))

    return {
      drain,
      /** Tells this process's worker that deliveries are due, so it need not wait for its next poll. */
      wake: wakeup.wake,
      nextWake: wakeup.next
    } as const
  }),
  dependencies: [WebhooksConfig.Default, WebhooksRepo.Default, WebhookSenderLive, SecretBox.Default, Notifications.Default]
}) {}

/** The worker of this process: drains due deliveries on every wake-up and every `WEBHOOK_POLL`. */
export const DeliveryWorkerLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    const deliveries = yield* Deliveries
    const { poll } = yield* WebhooksConfig
    yield* deliveries.drain.pipe(
      Effect.catchAllCause((cause) =>
        Cause.isInterruptedOnly(cause) ? Effect.failCause(cause) : Effect.logError("webhooks: the delivery loop failed", cause)
      ),
      Effect.zipRight(deliveries.nextWake(poll)),
      Effect.forever,
      Effect.forkScoped
    )
  })
).pipe(Layer.provide([Deliveries.Default, WebhooksConfig.Default]))
