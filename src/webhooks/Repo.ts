import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import { Effect, Schema } from "effect"
import { UserId, WebhookDeliveryId, WebhookEventId, WebhookId } from "../platform/Ids.js"

/** jsonb arrives as an object from node-postgres and as text from some drivers. */
const Json = Schema.Union(
  Schema.parseJson(Schema.Record({ key: Schema.String, value: Schema.Unknown })),
  Schema.Record({ key: Schema.String, value: Schema.Unknown })
)

export const EndpointRow = Schema.Struct({
  id: WebhookId,
  accountId: UserId,
  url: Schema.String,
  events: Schema.Array(Schema.String),
  description: Schema.String,
  secret: Schema.String,
  status: Schema.Literal("enabled", "disabled"),
  disabledReason: Schema.NullOr(Schema.String),
  failingSince: Schema.NullOr(Schema.DateFromSelf),
  createdAt: Schema.DateFromSelf,
  updatedAt: Schema.DateFromSelf
})
export type EndpointRow = typeof EndpointRow.Type

export const DeliveryRow = Schema.Struct({
  id: WebhookDeliveryId,
  endpointId: WebhookId,
  eventId: WebhookEventId,
  eventType: Schema.String,
  status: Schema.Literal("pending", "succeeded", "failed"),
  attempts: Schema.Number,
  nextAttemptAt: Schema.DateFromSelf,
  responseStatus: Schema.NullOr(Schema.Number),
  latencyMs: Schema.NullOr(Schema.Number),
  responseBody: Schema.NullOr(Schema.String),
  error: Schema.NullOr(Schema.String),
  lastAttemptAt: Schema.NullOr(Schema.DateFromSelf),
  manual: Schema.Boolean,
  createdAt: Schema.DateFromSelf
})
export type DeliveryRow = typeof DeliveryRow.Type

/** A delivery claimed by a worker, with what sending it needs. */
export const ClaimRow = Schema.Struct({
  id: WebhookDeliveryId,
  endpointId: WebhookId,
  attempts: Schema.Number,
  expiresAt: Schema.DateFromSelf,
  accountId: UserId,
  url: Schema.String,
  secret: Schema.String,
  endpointStatus: Schema.Literal("enabled", "disabled"),
  eventId: WebhookEventId,
  eventType: Schema.String,
  data: Json,
  eventCreatedAt: Schema.DateFromSelf
})
export type ClaimRow = typeof ClaimRow.Type

const ENDPOINT = "id, account_id, url, events, description, secret, status, disabled_reason, failing_since, created_at, updated_at"
const DELIVERY = `d.id, d.endpoint_id, d.event_id, v.type AS event_type, d.status, d.attempts, d.next_attempt_at,
  d.response_status, d.latency_ms, d.response_body, d.error, d.last_attempt_at, d.manual, d.created_at`

const Owned = Schema.Struct({ accountId: UserId, id: WebhookId })

/**
 * Webhooks' SQL. Every time comes from the caller (the Effect `Clock`), never the database's `now()`, so the retry
 * schedule is one clock's, which tests drive with the `TestClock`. SQL errors are defects here.
 */
export class WebhooksRepo extends Effect.Service<WebhooksRepo>()("atrium/webhooks/WebhooksRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const insertEndpoint = SqlSchema.findOne({
      Request: Schema.Struct({
        id: WebhookId,
        accountId: UserId,
        url: Schema.String,
        events: Schema.Array(Schema.String),
        description: Schema.String,
        secret: Schema.String,
        idempotencyKey: Schema.NullOr(Schema.String),
        requestHash: Schema.NullOr(Schema.String),
        now: Schema.DateFromSelf
      }),
      Result: EndpointRow,
      execute: (row) =>
        sql`
          INSERT INTO webhook_endpoints (id, account_id, url, events, description, secret, idempotency_key, request_hash, created_at, updated_at)
          VALUES (${row.id}, ${row.accountId}, ${row.url}, ${row.events as Array<string>}::text[], ${row.description}, ${row.secret},
            ${row.idempotencyKey}, ${row.requestHash}, ${row.now}, ${row.now})
          ON CONFLICT (account_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
          RETURNING ${sql.literal(ENDPOINT)}`
    })

    /** The endpoint a create with this key made, with what that create asked for. */
    const byIdempotencyKey = SqlSchema.findOne({
      Request: Schema.Struct({ accountId: UserId, idempotencyKey: Schema.String }),
      Result: Schema.Struct({ ...EndpointRow.fields, requestHash: Schema.NullOr(Schema.String) }),
      execute: (key) =>
        sql`
          SELECT ${sql.literal(ENDPOINT)}, request_hash FROM webhook_endpoints
          WHERE account_id = ${key.accountId} AND idempotency_key = ${key.idempotencyKey}`
    })

    const listEndpoints = SqlSchema.findAll({
      Request: UserId,
      Result: EndpointRow,
      execute: (accountId) =>
        sql`SELECT ${sql.literal(ENDPOINT)} FROM webhook_endpoints WHERE account_id = ${accountId} ORDER BY created_at DESC, id DESC LIMIT 1000`
    })

    const findEndpoint = SqlSchema.findOne({
      Request: Owned,
      Result: EndpointRow,
      execute: ({ accountId, id }) =>
        sql`SELECT ${sql.literal(ENDPOINT)} FROM webhook_endpoints WHERE id = ${id} AND account_id = ${accountId}`
    })

    const updateEndpoint = SqlSchema.findOne({
      Request: Schema.Struct({
        ...Owned.fields,
        url: Schema.NullOr(Schema.String),
        events: Schema.NullOr(Schema.Array(Schema.String)),
        description: Schema.NullOr(Schema.String),
        /** Turning on forgets the failures; turning off says the owner did it. */
        disabled: Schema.NullOr(Schema.Boolean),
        secret: Schema.NullOr(Schema.String),
        now: Schema.DateFromSelf
      }),
      Result: EndpointRow,
      execute: (u) =>
        sql`
          UPDATE webhook_endpoints SET
            url = COALESCE(${u.url}, url),
            events = COALESCE(${u.events === null ? null : u.events as Array<string>}::text[], events),
            description = COALESCE(${u.description}, description),
            secret = COALESCE(${u.secret}, secret),
            status = CASE WHEN ${u.disabled}::boolean IS NULL THEN status WHEN ${u.disabled}::boolean THEN 'disabled' ELSE 'enabled' END,
            disabled_reason = CASE WHEN ${u.disabled}::boolean IS NULL THEN disabled_reason WHEN ${u.disabled}::boolean THEN 'disabled by its owner' ELSE NULL END,
            failing_since = CASE WHEN ${u.disabled}::boolean = false THEN NULL ELSE failing_since END,
            updated_at = ${u.now}
          WHERE id = ${u.id} AND account_id = ${u.accountId}
          RETURNING ${sql.literal(ENDPOINT)}`
    })

    const removeEndpoint = SqlSchema.findAll({
      Request: Owned,
      Result: Schema.Struct({ id: WebhookId }),
      execute: ({ accountId, id }) => sql`DELETE FROM webhook_endpoints WHERE id = ${id} AND account_id = ${accountId} RETURNING id`
    })

    /** Pending deliveries of a disabled endpoint end as failed: they would never be sent. */
    const dropPending = SqlSchema.void({
      Request: Schema.Struct({ endpointId: WebhookId, reason: Schema.String, now: Schema.DateFromSelf }),
      execute: ({ endpointId, now, reason }) =>
        sql`
          UPDATE webhook_deliveries SET status = 'failed', error = ${reason}, lease_owner = NULL, lease_until = NULL, updated_at = ${now}
          WHERE endpoint_id = ${endpointId} AND status = 'pending'`
    })

    const insertEvent = SqlSchema.findAll({
      Request: Schema.Struct({
        id: WebhookEventId,
        accountId: UserId,
        type: Schema.String,
        data: Schema.String,
        idempotencyKey: Schema.String,
        now: Schema.DateFromSelf
      }),
      Result: Schema.Struct({ id: WebhookEventId }),
      execute: (e) =>
        sql`
          INSERT INTO webhook_events (id, account_id, type, data, idempotency_key, created_at)
          SELECT ${e.id}, u.id, ${e.type}, ${e.data}::jsonb, ${e.idempotencyKey}, ${e.now} FROM users u WHERE u.id = ${e.accountId}
          ON CONFLICT (account_id, idempotency_key) DO NOTHING
          RETURNING id`
    })

    const eventByKey = SqlSchema.findOne({
      Request: Schema.Struct({ accountId: UserId, idempotencyKey: Schema.String }),
      Result: Schema.Struct({ id: WebhookEventId }),
      execute: (key) =>
        sql`SELECT id FROM webhook_events WHERE account_id = ${key.accountId} AND idempotency_key = ${key.idempotencyKey}`
    })

    /** The enabled endpoints of the event's account subscribed to its type. */
    const targets = SqlSchema.findAll({
      Request: Schema.Struct({ eventId: WebhookEventId, endpointId: Schema.NullOr(WebhookId) }),
      Result: Schema.Struct({ id: WebhookId }),
      execute: ({ endpointId, eventId }) =>
        sql`
          SELECT e.id FROM webhook_events v JOIN webhook_endpoints e ON e.account_id = v.account_id
          WHERE v.id = ${eventId} AND e.status = 'enabled' AND (v.type = ANY (e.events) OR e.id = ${endpointId})
          ORDER BY e.id`
    })

    const insertDeliveries = SqlSchema.void({
      Request: Schema.Struct({
        eventId: WebhookEventId,
        ids: Schema.Array(WebhookDeliveryId),
        endpointIds: Schema.Array(WebhookId),
        now: Schema.DateFromSelf,
        expiresAt: Schema.DateFromSelf
      }),
      execute: (f) =>
        sql`
          INSERT INTO webhook_deliveries (id, endpoint_id, event_id, next_attempt_at, expires_at, created_at, updated_at)
          SELECT t.id, t.endpoint_id, ${f.eventId}, ${f.now}, ${f.expiresAt}, ${f.now}, ${f.now}
          FROM unnest(${f.ids as Array<string>}::text[], ${f.endpointIds as Array<string>}::text[]) AS t(id, endpoint_id)`
    })

    const listDeliveries = SqlSchema.findAll({
      Request: Schema.Struct({ endpointId: WebhookId, after: Schema.NullOr(WebhookDeliveryId), limit: Schema.Number }),
      Result: DeliveryRow,
      execute: ({ after, endpointId, limit }) =>
        after === null
          ? sql`
            SELECT ${sql.literal(DELIVERY)} FROM webhook_deliveries d JOIN webhook_events v ON v.id = d.event_id
            WHERE d.endpoint_id = ${endpointId} ORDER BY d.created_at DESC, d.id DESC LIMIT ${limit}`
          : sql`
            SELECT ${sql.literal(DELIVERY)} FROM webhook_deliveries d JOIN webhook_events v ON v.id = d.event_id,
              (SELECT created_at, id FROM webhook_deliveries WHERE id = ${after} AND endpoint_id = ${endpointId}) a
            WHERE d.endpoint_id = ${endpointId} AND (d.created_at, d.id) < (a.created_at, a.id)
            ORDER BY d.created_at DESC, d.id DESC LIMIT ${limit}`
    })

    const findDelivery = SqlSchema.findOne({
      Request: Schema.Struct({ endpointId: WebhookId, id: WebhookDeliveryId }),
      Result: DeliveryRow,
      execute: ({ endpointId, id }) =>
        sql`
          SELECT ${sql.literal(DELIVERY)} FROM webhook_deliveries d JOIN webhook_events v ON v.id = d.event_id
          WHERE d.id = ${id} AND d.endpoint_id = ${endpointId}`
    })

    const insertRedelivery = SqlSchema.single({
      Request: Schema.Struct({ id: WebhookDeliveryId, endpointId: WebhookId, eventId: WebhookEventId, now: Schema.DateFromSelf, expiresAt: Schema.DateFromSelf }),
      Result: DeliveryRow,
      execute: (r) =>
        sql`
          WITH made AS (
            INSERT INTO webhook_deliveries (id, endpoint_id, event_id, next_attempt_at, expires_at, manual, created_at, updated_at)
            VALUES (${r.id}, ${r.endpointId}, ${r.eventId}, ${r.now}, ${r.expiresAt}, true, ${r.now}, ${r.now})
            RETURNING *
          )
          SELECT ${sql.literal(DELIVERY)} FROM made d JOIN webhook_events v ON v.id = d.event_id`
    })

    /**
     * Claims up to `limit` due deliveries whose lease is free or has passed (a worker that died mid-attempt):
     * `FOR UPDATE SKIP LOCKED`, so the processes polling together each take different ones, and each delivery is
     * attempted by one process at a time.
     */
    const claim = SqlSchema.findAll({
      Request: Schema.Struct({ runner: Schema.String, now: Schema.DateFromSelf, leaseUntil: Schema.DateFromSelf, limit: Schema.Number }),
      Result: ClaimRow,
      execute: (c) =>
        sql`
          WITH claimed AS (
            UPDATE webhook_deliveries d SET lease_owner = ${c.runner}, lease_until = ${c.leaseUntil}, updated_at = ${c.now}
            WHERE d.id IN (
              SELECT id FROM webhook_deliveries
              WHERE status = 'pending' AND next_attempt_at <= ${c.now} AND (lease_until IS NULL OR lease_until < ${c.now})
              ORDER BY next_attempt_at, id LIMIT ${c.limit} FOR UPDATE SKIP LOCKED)
            RETURNING d.id, d.endpoint_id, d.event_id, d.attempts, d.expires_at
          )
          SELECT c.id, c.endpoint_id, c.attempts, c.expires_at, e.account_id, e.url, e.secret, e.status AS endpoint_status,
            v.id AS event_id, v.type AS event_type, v.data, v.created_at AS event_created_at
          FROM claimed c JOIN webhook_endpoints e ON e.id = c.endpoint_id JOIN webhook_events v ON v.id = c.event_id`
    })

    /**
     * An attempt's outcome, written only while the claim holds (same worker). `next` null ends the delivery
     * (`succeeded` when `ok`, else `failed`); a date schedules the next retry. The endpoint's failing streak moves
     * with it: a success ends it, a failure starts it if none is running. Answers when the streak began.
     */
    const record = SqlSchema.findOne({
      Request: Schema.Struct({
        id: WebhookDeliveryId,
        runner: Schema.String,
        ok: Schema.Boolean,
        next: Schema.NullOr(Schema.DateFromSelf),
        responseStatus: Schema.NullOr(Schema.Number),
        latencyMs: Schema.Number,
        responseBody: Schema.NullOr(Schema.String),
        error: Schema.NullOr(Schema.String),
        now: Schema.DateFromSelf
      }),
      Result: Schema.Struct({ endpointId: WebhookId, failingSince: Schema.NullOr(Schema.DateFromSelf) }),
      execute: (r) =>
        sql`
          WITH done AS (
            UPDATE webhook_deliveries SET
              attempts = attempts + 1,
              status = CASE WHEN ${r.ok} THEN 'succeeded' WHEN ${r.next}::timestamptz IS NULL THEN 'failed' ELSE 'pending' END,
              next_attempt_at = COALESCE(${r.next}::timestamptz, next_attempt_at),
              response_status = ${r.responseStatus}, latency_ms = ${r.latencyMs}, response_body = ${r.responseBody},
              error = ${r.error}, last_attempt_at = ${r.now}, lease_owner = NULL, lease_until = NULL, updated_at = ${r.now}
            WHERE id = ${r.id} AND lease_owner = ${r.runner} AND status = 'pending'
            RETURNING endpoint_id
          )
          UPDATE webhook_endpoints e SET
            failing_since = CASE WHEN ${r.ok} THEN NULL ELSE COALESCE(e.failing_since, ${r.now}) END
          FROM done WHERE e.id = done.endpoint_id
          RETURNING e.id AS endpoint_id, e.failing_since`
    })

    /** Disables an endpoint that is still enabled; true when this call did it (so its owner is told once). */
    const disable = SqlSchema.findAll({
      Request: Schema.Struct({ endpointId: WebhookId, reason: Schema.String, now: Schema.DateFromSelf }),
      Result: Schema.Struct({ id: WebhookId }),
      execute: ({ endpointId, now, reason }) =>
        sql`
          UPDATE webhook_endpoints SET status = 'disabled', disabled_reason = ${reason}, updated_at = ${now}
          WHERE id = ${endpointId} AND status = 'enabled' RETURNING id`
    })

    return {
      /** None when a create with the same Idempotency-Key made one already. */
      insertEndpoint: (row: Parameters<typeof insertEndpoint>[0]) => Effect.orDie(insertEndpoint(row)),
      byIdempotencyKey: (key: Parameters<typeof byIdempotencyKey>[0]) => Effect.orDie(byIdempotencyKey(key)),
      listEndpoints: (accountId: UserId) => Effect.orDie(listEndpoints(accountId)),
      findEndpoint: (owned: typeof Owned.Type) => Effect.orDie(findEndpoint(owned)),
      updateEndpoint: (update: Parameters<typeof updateEndpoint>[0]) => Effect.orDie(updateEndpoint(update)),
      removeEndpoint: (owned: typeof Owned.Type) => Effect.map(Effect.orDie(removeEndpoint(owned)), (rows) => rows.length > 0),
      dropPending: (request: Parameters<typeof dropPending>[0]) => Effect.orDie(dropPending(request)),
      /** The event's id: a new one, the one already emitted with this key, or none when the account does not exist. */
      insertEvent: (event: Parameters<typeof insertEvent>[0]) =>
        Effect.orDie(Effect.gen(function*() {
          const made = yield* insertEvent(event)
          if (made.length > 0) return { id: made[0]!.id, fresh: true }
          const found = yield* eventByKey(event)
          return found._tag === "Some" ? { id: found.value.id, fresh: false } : undefined
        })),
      /** The endpoints an event goes to: those subscribed to its type, and `endpointId` (named by its emitter) too. */
      targets: (eventId: WebhookEventId, endpointId: WebhookId | null = null) =>
        Effect.map(Effect.orDie(targets({ eventId, endpointId })), (rows) => rows.map((row) => row.id)),
      insertDeliveries: (request: Parameters<typeof insertDeliveries>[0]) => Effect.orDie(insertDeliveries(request)),
      listDeliveries: (request: Parameters<typeof listDeliveries>[0]) => Effect.orDie(listDeliveries(request)),
      findDelivery: (request: Parameters<typeof findDelivery>[0]) => Effect.orDie(findDelivery(request)),
      insertRedelivery: (request: Parameters<typeof insertRedelivery>[0]) => Effect.orDie(insertRedelivery(request)),
      claim: (request: Parameters<typeof claim>[0]) => Effect.orDie(claim(request)),
      record: (request: Parameters<typeof record>[0]) => Effect.orDie(record(request)),
      disable: (request: Parameters<typeof disable>[0]) => Effect.map(Effect.orDie(disable(request)), (rows) => rows.length > 0),
      withTransaction: sql.withTransaction
    } as const
  })
}) {}
