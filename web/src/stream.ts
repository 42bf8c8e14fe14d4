import { failureOf, humanize, ShownError } from "./api.js"
import { type SessionEvent, sessionEventParser } from "./sse.js"

export type { SessionEvent } from "./sse.js"
/**
 * A session's events (docs/sessions.md, docs/events.md) over streamed `fetch`: SSE routes are not decoded by the
 * HttpApi client. It resumes from the last `seq` it saw (`?after=`) after a reload or a lost connection, and drops
 * anything at or below it, so nothing is missing or repeated.
 */

export interface Follow {
  readonly close: () => void
}

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
  }).catch((failure: Error) => {
    // The request never reached the platform: said in words, not as the browser's "Failed to fetch".
    throw new ShownError(humanize("network", failure.message), 0, "network")
  })
  if (!response.ok) throw await failureOf(response)
  void response.body?.cancel().catch(() => undefined)
}
