import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import { Schema } from "effect"

/**
 * Errors that reach the wire. Each is a `Schema.TaggedError` carrying its HTTP status; `ErrorEnvelope` (the global
 * router middleware in `Server.ts`) turns every error response into `{"error":{"type","message"}}`, where `type` is
 * the snake_case of the tag (`InvalidRequest` -> `invalid_request`).
 */

export class InvalidRequest extends Schema.TaggedError<InvalidRequest>()(
  "InvalidRequest",
  // `param`: the request field at fault, when one is (OpenAI's clients show it; the envelope carries it).
  { message: Schema.String, param: Schema.optional(Schema.String) },
  HttpApiSchema.annotations({ status: 400 })
) {}

export class Unauthorized extends Schema.TaggedError<Unauthorized>()(
  "Unauthorized",
  { message: Schema.String },
  HttpApiSchema.annotations({ status: 401 })
) {}

export class Forbidden extends Schema.TaggedError<Forbidden>()(
  "Forbidden",
  { message: Schema.String },
  HttpApiSchema.annotations({ status: 403 })
) {}

export class NotFound extends Schema.TaggedError<NotFound>()(
  "NotFound",
  { message: Schema.String },
  HttpApiSchema.annotations({ status: 404 })
) {}

/** `retry_after` (seconds) also becomes the `Retry-After` header. */
export class RateLimited extends Schema.TaggedError<RateLimited>()(
  "RateLimited",
  { message: Schema.String, retry_after: Schema.Int },
  HttpApiSchema.annotations({ status: 429 })
) {}

export class ServiceUnavailable extends Schema.TaggedError<ServiceUnavailable>()(
  "ServiceUnavailable",
  { message: Schema.String },
  HttpApiSchema.annotations({ status: 503 })
) {}

/** `InvalidRequest` -> `invalid_request`. */
export const errorType = (tag: string): string =>
  tag.replace(/([a-z0-9])([A-Z])/g, "$1_$2").replace(/([A-Z])([A-Z][a-z])/g, "$1_$2").toLowerCase()

/** The one error body of the platform (DESIGN.md §6). */
export const errorBody = (type: string, message: string) => ({ error: { type, message } })
