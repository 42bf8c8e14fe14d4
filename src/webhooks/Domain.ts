import { Schema } from "effect"
import { UserId } from "../platform/Ids.js"

/**
 * Webhooks' contract (docs/webhooks.md): the event types an endpoint can subscribe to, and what the routes answer.
 */

/**
 * The events the platform sends: a run's terminal states, an approval waiting, a schedule's failed firing, and
 * OpenAI's names for a Responses run's terminal states.
 */
export const EVENT_TYPES = [
  "run.completed",
  "run.failed",
  "run.cancelled",
  "run.incomplete",
  "approval.required",
  "schedule.failed",
  "response.completed",
  "response.failed",
  "response.cancelled",
  "response.incomplete"
] as const
export type EventType = (typeof EVENT_TYPES)[number]

export const isEventType = (type: string): type is EventType => (EVENT_TYPES as ReadonlyArray<string>).includes(type)

/** One event type, refused with its own name when it is not one of `EVENT_TYPES`. */
export const EventTypeName = Schema.String.pipe(
  Schema.filter(isEventType, {
    message: (issue) => `unknown event "${String(issue.actual).slice(0, 100)}": use one of ${EVENT_TYPES.join(", ")}`
  })
)

/** An endpoint's URL: http(s), at most 2,000 characters, without credentials in it (they would be logged and shown). */
export const WebhookUrl = Schema.String.pipe(
  Schema.filter((url) => {
    if (url.length > 2000) return "must be at most 2000 characters"
    try {
      const parsed = new URL(url)
      if (parsed.protocol !== "https:" && parsed.protocol !== "http:") return "must be an http(s) URL"
      if (parsed.username !== "" || parsed.password !== "") return "must not carry a user name or password"
      return true
    } catch {
      return "must be an http(s) URL"
    }
  })
)

export const EventList = Schema.Array(EventTypeName).pipe(Schema.minItems(1), Schema.maxItems(EVENT_TYPES.length))

const Description = Schema.String.pipe(Schema.maxLength(500))

export const CreateWebhook = Schema.Struct({
  url: WebhookUrl,
  events: EventList,
  description: Schema.optional(Description)
})

export const UpdateWebhook = Schema.Struct({
  url: Schema.optional(WebhookUrl),
  events: Schema.optional(EventList),
  description: Schema.optional(Description),
  /** `false` turns a disabled endpoint back on (and forgets its failures); `true` stops its deliveries. */
  disabled: Schema.optional(Schema.Boolean)
})

export const WebhookView = Schema.Struct({
  id: Schema.String,
  object: Schema.Literal("webhook_endpoint"),
  url: Schema.String,
  events: Schema.Array(Schema.String),
  description: Schema.String,
  status: Schema.Literal("enabled", "disabled"),
  /** Why it is disabled: by its owner, or after failing for WEBHOOK_DISABLE_AFTER; null while enabled. */
  disabled_reason: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  updated_at: Schema.String
})

/** The endpoint with its signing secret: the answer of a create and of `rotate_secret` only, never again. */
export const WebhookWithSecret = Schema.Struct({
  ...WebhookView.fields,
  secret: Schema.String.annotations({ description: "whsec_…: shown once; verify deliveries with it (Standard Webhooks)." })
})

export const DeliveryView = Schema.Struct({
  id: Schema.String,
  object: Schema.Literal("webhook_delivery"),
  webhook_id: Schema.String,
  /** The event's id: the `webhook-id` header of every attempt. */
  event_id: Schema.String,
  event_type: Schema.String,
  status: Schema.Literal("pending", "succeeded", "failed"),
  /** Attempts made so far. */
  attempts: Schema.Int,
  /** The last attempt: its answer's status (null for a timeout or a connection error), latency and first bytes. */
  response_status: Schema.NullOr(Schema.Int),
  latency_ms: Schema.NullOr(Schema.Int),
  response_body: Schema.NullOr(Schema.String),
  error: Schema.NullOr(Schema.String),
  last_attempt_at: Schema.NullOr(Schema.String),
  next_attempt_at: Schema.NullOr(Schema.String),
  redelivery: Schema.Boolean,
  created_at: Schema.String
})

export const EmitEvent = Schema.Struct({
  account: UserId.unchecked.pipe(Schema.minLength(1), Schema.maxLength(200)),
  type: EventTypeName,
  data: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
  idempotency_key: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(255))
})
