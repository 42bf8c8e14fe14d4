import * as Sse from "@effect/experimental/Sse"

/** One event of a session's stream (docs/sessions.md, docs/events.md). */
export interface SessionEvent {
  readonly type: string
  readonly seq: number
  readonly [key: string]: unknown
}

/**
 * A `text/event-stream` reader of a session's events: `@effect/experimental`'s SSE parser (the one the server's
 * model clients and the typed client use), fed text as it arrives; comments (`: ping`), `[DONE]` and anything that
 * is not one of our events are skipped.
 */
export const sessionEventParser = (onEvent: (event: SessionEvent) => void): Sse.Parser =>
  Sse.makeParser((event) => {
    if (event._tag !== "Event" || event.data === "[DONE]") return
    try {
      const parsed = JSON.parse(event.data) as SessionEvent
      if (typeof parsed?.seq === "number") onEvent(parsed)
    } catch {
      // A line that is not JSON is not an event of ours.
    }
  })

