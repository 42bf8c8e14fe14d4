import { createHash, randomBytes } from "node:crypto"
import { Clock, Duration, Effect, Option, Redacted } from "effect"
import { SecretBox } from "../credentials/SecretBox.js"
import { IdempotencyConflict, InvalidRequest, NotFound, ServiceUnavailable } from "../platform/Errors.js"
import { DEFAULT_LIMIT, type ListParams, pageOf } from "../platform/http/Lists.js"
import { type UserId, WebhookDeliveryId, WebhookEventId, WebhookId } from "../platform/Ids.js"
import { ToolsConfig } from "../runtime/tools/Config.js"
import { checkUrl, makeHostAddresses, OutboundRefused } from "../runtime/tools/Outbound.js"
import { WebhooksConfig } from "./Config.js"
import { Deliveries } from "./Deliveries.js"
import type { EventType } from "./Domain.js"
import { type DeliveryRow, type EndpointRow, WebhooksRepo } from "./Repo.js"

/** What `emit` is given: one event of an account, emitted once per `idempotencyKey`. */
export interface EmitInput {
  readonly account: UserId
  readonly type: EventType
  readonly data: Record<string, unknown>
  /** Who emits what, e.g. `run:<id>:completed`: a second emit with the same key is the first one's event. */
  readonly idempotencyKey: string
  /** An endpoint of the account's that gets the event whether or not it subscribes to its type (a schedule's own). */
  readonly endpoint?: WebhookId | undefined
}

/** A new signing secret in Standard Webhooks' form: `whsec_` and 24 random bytes in base64. */
const newSecret = () => Redacted.make(`whsec_${randomBytes(24).toString("base64")}`)

const endpointView = (row: EndpointRow) => ({
  id: row.id,
  object: "webhook_endpoint" as const,
  url: row.url,
  events: row.events,
  description: row.description,
  status: row.status,
  disabled_reason: row.disabledReason,
  created_at: row.createdAt.toISOString(),
  updated_at: row.updatedAt.toISOString()
})

const deliveryView = (row: DeliveryRow) => ({
  id: row.id,
  object: "webhook_delivery" as const,
  webhook_id: row.endpointId,
  event_id: row.eventId,
  event_type: row.eventType,
  status: row.status,
  attempts: row.attempts,
  response_status: row.responseStatus,
  latency_ms: row.latencyMs,
  response_body: row.responseBody,
  error: row.error,
  last_attempt_at: row.lastAttemptAt?.toISOString() ?? null,
  next_attempt_at: row.status === "pending" ? row.nextAttemptAt.toISOString() : null,
  redelivery: row.manual,
  created_at: row.createdAt.toISOString()
})

/**
 * Webhook endpoints and events (docs/webhooks.md). Endpoints belong to an account; another account's is "not
 * found". The signing secret is sealed under `SECRETS_KEY` and shown only in the answer that made it.
 */
export class Webhooks extends Effect.Service<Webhooks>()("atrium/webhooks/Webhooks", {
  effect: Effect.gen(function*() {
    const repo = yield* WebhooksRepo
    const box = yield* SecretBox
    const deliveries = yield* Deliveries
    const config = yield* WebhooksConfig
    const { allowedHosts } = yield* ToolsConfig
    const own = makeHostAddresses()
    const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis))

    const notFound = (id: WebhookId) => new NotFound({ message: `No webhook endpoint ${id}.` })

    /** The outbound rule at the door (checked again at every attempt, on the addresses connected to). */
    const checkTarget = (url: string) =>
      Effect.tryPromise({
        try: () => checkUrl(new URL(url), allowedHosts, own()),
        catch: (error) =>
          new InvalidRequest({
            message: `Invalid request: url: ${
              error instanceof OutboundRefused
                ? error.message
                : `its host could not be resolved (${error instanceof Error && "code" in error ? String(error.code) : "unknown"})`
            }`,
            param: "url"
          })
      })

    const seal = (secret: Redacted.Redacted<string>) =>
      Option.match(box.seal(secret), {
        onNone: () => Effect.fail(new ServiceUnavailable({ message: "Webhooks need SECRETS_KEY: set it on every process of this deployment." })),
        onSome: Effect.succeed
      })

    const owned = (accountId: UserId, id: WebhookId) =>
      Effect.flatMap(repo.findEndpoint({ accountId, id }), Option.match({ onNone: () => Effect.fail(notFound(id)), onSome: Effect.succeed }))

    /**
     * A create with an `Idempotency-Key` answers, when retried with the same key and body, the endpoint the first
     * one made, its secret included (unsealed again: the caller never saw the first answer); with another body, 409.
     * The platform's generic key store is not used here because it would keep that answer, secret and all, in clear.
     */
    const create = Effect.fn("Webhooks.create")(function*(
      accountId: UserId,
      input: { readonly url: string; readonly events: ReadonlyArray<string>; readonly description?: string | undefined },
      idempotencyKey: Option.Option<string>
    ) {
      const events = [...new Set(input.events)]
      const description = input.description ?? ""
      const requestHash = createHash("sha256").update(JSON.stringify([input.url, events, description])).digest("base64url")
      const replay = Effect.gen(function*() {
        if (Option.isNone(idempotencyKey)) return Option.none()
        const found = yield* repo.byIdempotencyKey({ accountId, idempotencyKey: idempotencyKey.value })
        if (Option.isNone(found)) return Option.none()
        if (found.value.requestHash !== requestHash) {
          return yield* new IdempotencyConflict({ message: "This Idempotency-Key was used with another request body.", final: true })
        }
        const secret = box.open(found.value.secret)
        if (Option.isNone(secret)) {
          return yield* new ServiceUnavailable({ message: "The endpoint's secret cannot be read under this SECRETS_KEY; rotate it." })
        }
        return Option.some({ ...endpointView(found.value), secret: Redacted.value(secret.value) })
      })
      const earlier = yield* replay
      if (Option.isSome(earlier)) return earlier.value
      yield* checkTarget(input.url)
      const secret = newSecret()
      const row = yield* repo.insertEndpoint({
        id: WebhookId.random(),
        accountId,
        url: input.url,
        events,
        description,
        secret: yield* seal(secret),
        idempotencyKey: Option.getOrNull(idempotencyKey),
        requestHash: Option.isSome(idempotencyKey) ? requestHash : null,
        now: yield* now
      })
      if (Option.isSome(row)) return { ...endpointView(row.value), secret: Redacted.value(secret) }
      // A create with the same key won the race: answer as its retry.
      const raced = yield* replay
      if (Option.isNone(raced)) return yield* Effect.dieMessage("webhooks: an idempotent create found no endpoint")
      return raced.value
    })

    const list = Effect.fn("Webhooks.list")(function*(accountId: UserId, params: ListParams) {
      return yield* pageOf((yield* repo.listEndpoints(accountId)).map(endpointView), params, (endpoint) => endpoint.id)
    })

    const get = Effect.fn("Webhooks.get")(function*(accountId: UserId, id: WebhookId) {
      return endpointView(yield* owned(accountId, id))
    })

    const update = Effect.fn("Webhooks.update")(function*(
      accountId: UserId,
      id: WebhookId,
      patch: {
        readonly url?: string | undefined
        readonly events?: ReadonlyArray<string> | undefined
        readonly description?: string | undefined
        readonly disabled?: boolean | undefined
      }
    ) {
      yield* owned(accountId, id)
      if (patch.url !== undefined) yield* checkTarget(patch.url)
      const at = yield* now
      const row = yield* repo.updateEndpoint({
        accountId,
        id,
        url: patch.url ?? null,
        events: patch.events === undefined ? null : [...new Set(patch.events)],
        description: patch.description ?? null,
        disabled: patch.disabled ?? null,
        secret: null,
        now: at
      })
      if (Option.isNone(row)) return yield* notFound(id)
      if (patch.disabled === true) yield* repo.dropPending({ endpointId: id, reason: "the endpoint was disabled by its owner", now: at })
      return endpointView(row.value)
    })

    const remove = Effect.fn("Webhooks.remove")(function*(accountId: UserId, id: WebhookId) {
      if (!(yield* repo.removeEndpoint({ accountId, id }))) return yield* notFound(id)
    })

    const rotateSecret = Effect.fn("Webhooks.rotateSecret")(function*(accountId: UserId, id: WebhookId) {
      yield* owned(accountId, id)
      const secret = newSecret()
      const row = yield* repo.updateEndpoint({
        accountId,
        id,
        url: null,
        events: null,
        description: null,
        disabled: null,
        secret: yield* seal(secret),
        now: yield* now
      })
      if (Option.isNone(row)) return yield* notFound(id)
      return { ...endpointView(row.value), secret: Redacted.value(secret) }
    })

    const listDeliveries = Effect.fn("Webhooks.deliveries")(function*(accountId: UserId, id: WebhookId, params: ListParams) {
      yield* owned(accountId, id)
      const limit = params.limit ?? DEFAULT_LIMIT
      if (params.after !== undefined && Option.isNone(yield* repo.findDelivery({ endpointId: id, id: WebhookDeliveryId.unchecked.make(params.after) }))) {
        return yield* new NotFound({ message: `after: ${params.after} is not in this list.` })
      }
      const rows = yield* repo.listDeliveries({ endpointId: id, after: params.after === undefined ? null : WebhookDeliveryId.unchecked.make(params.after), limit: limit + 1 })
      return { data: rows.slice(0, limit).map(deliveryView), has_more: rows.length > limit }
    })

    const redeliver = Effect.fn("Webhooks.redeliver")(function*(accountId: UserId, id: WebhookId, deliveryId: WebhookDeliveryId) {
      yield* owned(accountId, id)
      const original = yield* repo.findDelivery({ endpointId: id, id: deliveryId })
      if (Option.isNone(original)) return yield* new NotFound({ message: `No delivery ${deliveryId} of webhook endpoint ${id}.` })
      const at = yield* now
      const row = yield* repo.insertRedelivery({
        id: WebhookDeliveryId.random(),
        endpointId: id,
        eventId: original.value.eventId,
        now: at,
        expiresAt: new Date(at.getTime() + Duration.toMillis(config.retryWindow))
      })
      yield* deliveries.wake
      return deliveryView(row)
    })

    /**
     * Records one event of `account` and schedules its delivery to each of the account's enabled endpoints that
     * subscribe to its type, in one transaction; the deliveries then go out from whichever process claims them.
     * Emitting again with the same key changes nothing and answers the first event. None when the account does not
     * exist.
     */
    const emit = Effect.fn("Webhooks.emit")(function*(input: EmitInput) {
      const at = yield* now
      const made = yield* repo.withTransaction(Effect.gen(function*() {
        const event = yield* repo.insertEvent({
          id: WebhookEventId.random(),
          accountId: input.account,
          type: input.type,
          data: JSON.stringify(input.data),
          idempotencyKey: input.idempotencyKey,
          now: at
        })
        if (event === undefined) return undefined
        if (!event.fresh) return { id: event.id, deliveries: 0 }
        const endpointIds = yield* repo.targets(event.id, input.endpoint ?? null)
        if (endpointIds.length > 0) {
          yield* repo.insertDeliveries({
            eventId: event.id,
            ids: endpointIds.map(() => WebhookDeliveryId.random()),
            endpointIds,
            now: at,
            expiresAt: new Date(at.getTime() + Duration.toMillis(config.retryWindow))
          })
        }
        return { id: event.id, deliveries: endpointIds.length }
      })).pipe(Effect.orDie)
      if (made !== undefined && made.deliveries > 0) yield* deliveries.wake
      return Option.fromNullable(made)
    })

    return { create, list, get, update, remove, rotateSecret, deliveries: listDeliveries, redeliver, emit } as const
  }),
  dependencies: [WebhooksRepo.Default, SecretBox.Default, Deliveries.Default, WebhooksConfig.Default, ToolsConfig.Default]
}) {}
