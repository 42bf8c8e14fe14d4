import { Schema } from "effect"

/**
 * The request headers a route reads, as contract schemas (`HttpApiEndpoint.setHeaders`): HttpApi decodes them before
 * the handler runs, so a bad value is the same `invalid_request` envelope as a bad body field, named by its header
 * (lower-case, as Node gives header names). `X-End-User-Id` is not here: it partitions every end-user route and is
 * read once, by the authentication middleware (identity/Authentication.ts), before any route decodes.
 */

/** What an `Idempotency-Key` may be: visible ASCII, as Stripe and OpenAI take it. The edge's gate checks it too. */
export const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/

export const IdempotencyKey = Schema.String.pipe(
  Schema.pattern(IDEMPOTENCY_KEY, { message: () => "1-255 visible ASCII characters." })
)

/**
 * `Last-Event-ID`, the `seq` of the last event a client received (what EventSource sends when it reconnects), as a
 * number; empty (what EventSource sends before it has seen an id) is no header.
 */
export const LastEventId = Schema.transform(
  Schema.String.pipe(Schema.pattern(/^(\d{1,15})?$/, { message: () => "the seq of the last event received (up to 15 digits)." })),
  Schema.UndefinedOr(Schema.Number),
  { strict: true, decode: (text) => text === "" ? undefined : Number(text), encode: (seq) => seq === undefined ? "" : String(seq) }
)

/** The headers of a route that starts a run: a retry with the same key attaches to the run the first request started. */
export const RunStartHeaders = Schema.Struct({
  "idempotency-key": Schema.optionalWith(IdempotencyKey, { exact: true }).annotations({
    description: "A retry with the same key attaches to the run (or session turn) the first request started (docs/runs.md, Safe retries)."
  })
})

/** The headers of an event stream a client may resume. */
export const ResumeHeaders = Schema.Struct({
  "last-event-id": Schema.optionalWith(LastEventId, { exact: true }).annotations({
    description: "The seq of the last event received (what EventSource sends when it reconnects); `after` wins when both are given."
  })
})
