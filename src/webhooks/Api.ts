import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { PlatformAuthentication } from "../identity/Domain.js"
import { IdempotencyConflict, InvalidRequest, NotFound, ServiceUnavailable } from "../platform/Errors.js"
import { IdempotencyKey } from "../platform/http/Headers.js"
import { ListParams } from "../platform/http/Lists.js"
import { WebhookDeliveryId, WebhookId } from "../platform/Ids.js"
import { CreateWebhook, DeliveryView, EmitEvent, EVENT_TYPES, UpdateWebhook, WebhookView, WebhookWithSecret } from "./Domain.js"

const IdPath = Schema.Struct({ id: WebhookId.unchecked })

/**
 * Webhook endpoints of the caller's account (docs/webhooks.md): each subscribed event is POSTed to the endpoint,
 * signed per Standard Webhooks, and retried for up to 72 hours. Another account's endpoint is a 404.
 */
export class WebhooksApi extends HttpApiGroup.make("webhooks")
  .add(
    HttpApiEndpoint.post("create", "/v1/webhooks")
      .setPayload(CreateWebhook)
      .setHeaders(Schema.Struct({
        "idempotency-key": Schema.optionalWith(IdempotencyKey, { exact: true }).annotations({
          description: "A retry with the same key and body answers the endpoint the first request made (its secret too); another body, 409."
        })
      }))
      .addSuccess(WebhookWithSecret, { status: 201 })
      .addError(ServiceUnavailable)
      .addError(IdempotencyConflict)
      .annotate(
        OpenApi.Description,
        "Add an endpoint. The answer carries its signing secret (whsec_…), shown this once. The URL must reach a " +
          "public address (TOOL_ALLOWED_HOSTS names the exceptions). Events: " + EVENT_TYPES.join(", ") + "."
      )
  )
  .add(
    HttpApiEndpoint.get("list", "/v1/webhooks")
      .setUrlParams(ListParams)
      .addSuccess(Schema.Struct({ data: Schema.Array(WebhookView), has_more: Schema.Boolean }))
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.get("get", "/v1/webhooks/:id")
      .setPath(IdPath)
      .addSuccess(WebhookView)
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.patch("update", "/v1/webhooks/:id")
      .setPath(IdPath)
      .setPayload(UpdateWebhook)
      .addSuccess(WebhookView)
      .addError(NotFound)
      .annotate(OpenApi.Description, "Change the URL, the events or the description; `disabled: false` turns a disabled endpoint back on.")
  )
  .add(
    HttpApiEndpoint.del("delete", "/v1/webhooks/:id")
      .setPath(IdPath)
      .addSuccess(Schema.Struct({ id: Schema.String, object: Schema.Literal("webhook_endpoint"), deleted: Schema.Literal(true) }))
      .addError(NotFound)
      .annotate(OpenApi.Description, "Remove an endpoint; its pending deliveries are dropped.")
  )
  .add(
    HttpApiEndpoint.post("rotateSecret", "/v1/webhooks/:id/rotate_secret")
      .setPath(IdPath)
      .addSuccess(WebhookWithSecret)
      .addError(NotFound)
      .addError(ServiceUnavailable)
      .annotate(OpenApi.Description, "A new signing secret, shown this once; deliveries from now on are signed with it.")
  )
  .add(
    HttpApiEndpoint.get("deliveries", "/v1/webhooks/:id/deliveries")
      .setPath(IdPath)
      .setUrlParams(ListParams)
      .addSuccess(Schema.Struct({ data: Schema.Array(DeliveryView), has_more: Schema.Boolean }))
      .addError(NotFound)
      .annotate(OpenApi.Description, "The delivery log, newest first: attempts, status, the last attempt's latency, status and first bytes.")
  )
  .add(
    HttpApiEndpoint.post("redeliver", "/v1/webhooks/:id/deliveries/:delivery_id/redeliver")
      .setPath(Schema.Struct({ id: WebhookId.unchecked, delivery_id: WebhookDeliveryId.unchecked }))
      .addSuccess(DeliveryView, { status: 202 })
      .addError(NotFound)
      .annotate(OpenApi.Description, "Send a delivery's event again, as a new delivery with the same webhook-id.")
  )
  .middleware(PlatformAuthentication)
  .addError(InvalidRequest)
  .annotate(OpenApi.Title, "Webhooks")
  .annotate(OpenApi.Description, "Signed, retried event deliveries to your endpoints (Standard Webhooks).")
{}

/** Emitting an event by hand, for operators and tests (the platform emits them itself); private network only. */
export class InternalWebhooksApi extends HttpApiGroup.make("internalWebhooks")
  .add(
    HttpApiEndpoint.post("emit", "/internal/webhooks/emit")
      .setPayload(EmitEvent)
      .addSuccess(Schema.Struct({ id: Schema.String, deliveries: Schema.Int }))
      .addError(NotFound)
  )
  .addError(InvalidRequest)
  .annotate(OpenApi.Title, "Internal webhooks")
  .annotate(OpenApi.Description, "Emitting a webhook event by hand; private network only, with the operator's bearer.")
{}
