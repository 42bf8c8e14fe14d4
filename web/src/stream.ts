import * as Sse from "@effect/experimental/Sse"
import { failureOf } from "./api.js"
/**
 * A session's events (docs/sessions.md, docs/events.md) over streamed `fetch`: SSE routes are not decoded by the
 * HttpApi client. It resumes from the last `seq` it saw (`?after=`) after a reload or a lost connection, and drops
 * anything at or below it, so nothing is missing or repeated.
 */
export interface SessionEvent {
  readonly type: string
  readonly seq: number
  readonly [key: string]: unknown
}

export interface Follow {
  readonly close: () => void
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

export const followSession = (
  sessionId: string,
  from: number,
  onEvent: (event: SessionEvent) => void,
  onState: (state: "live" | "reconnecting") => void
): Follow => {
  let lastSeq = from
  let closed = false
  let controller: AbortController | undefined
  const run = async () => {
    while (!closed) {
      controller = new AbortController()
      try {
        const response = await fetch(`/v1/sessions/${encodeURIComponent(sessionId)}/events?after=${lastSeq}`, {
          credentials: "same-origin",
          headers: { accept: "text/event-stream" },
          signal: controller.signal
        })
        if (!response.ok || response.body === null) throw new Error(`status ${response.status}`)
        onState("live")
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader()
        const parser = sessionEventParser((event) => {
          if (event.seq <= lastSeq) return
          lastSeq = event.seq
          onEvent(event)
        })
        for (;;) {
          const { done, value } = await reader.read()
          if (done) break
          parser.feed(value)
        }
      } catch {
        // Lost connection or a refused request: try again from the last seq.
      }
      if (closed) return
      onState("reconnecting")
      await new Promise((resolve) => setTimeout(resolve, 1000))
    }
  }
  void run()
  return {
    close: () => {
      closed = true
      controller?.abort()
    }
  }
}

/**
 * Sends a message or an approval answer. The answer is itself a stream of the turn; the subscription already shows
 * it, so only the status is read (a failure before the stream is a JSON error body). Leaving does not stop a turn.
 */
export const sendToSession = async (sessionId: string, body: unknown): Promise<void> => {
  const response = await fetch(`/v1/sessions/${encodeURIComponent(sessionId)}/events`, {
    method: "POST",
    credentials: "same-origin",
    headers: { "content-type": "application/json", accept: "text/event-stream" },
    body: JSON.stringify(body)
  })
  if (!response.ok) throw await failureOf(response)
  void response.body?.cancel().catch(() => undefined)
}
