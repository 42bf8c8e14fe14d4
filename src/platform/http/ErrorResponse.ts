import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect, Schema } from "effect"
import { type AnyWireError, errorBody, wireClassOf } from "../Errors.js"

/**
 * A wire error answered outside HttpApi (the edge's guards, the idempotency and attach checks): written by its own
 * schema as HttpApi writes it (the envelope, with OpenAI's fields on their routes; `Retry-After` through
 * `ErrorHeaders`), with its status and any header of its own.
 */
export const wireErrorResponse = (error: AnyWireError, headers?: Record<string, string>) => {
  const schema = wireClassOf(error)
  return Effect.map(
    Effect.orDie(Schema.encode(schema)(error)),
    (body) => HttpServerResponse.unsafeJson(body, { status: schema.status, ...(headers ? { headers } : {}) })
  )
}

/** An error answer of a route outside the API (pages, file storage): the same body, from its parts. */
export const errorResponse = (status: number, type: string, message: string, headers?: Record<string, string>) =>
  HttpServerResponse.unsafeJson(errorBody(type, message), { status, ...(headers ? { headers } : {}) })
