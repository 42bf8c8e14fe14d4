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

/** Parses `text/event-stream` blocks; comments (`: ping`) and `[DONE]` are skipped. */
export const parseBlocks = (buffer: string): { events: Array<SessionEvent>; rest: string } => {
  const events: Array<SessionEvent> = []
  const blocks = buffer.split("\n\n")
  const rest = blocks.pop() ?? ""
  for (const block of blocks) {
    const data = block.split("\n").filter((line) => line.startsWith("data:")).map((line) => line.slice(5).trimStart()).join("\n")
    if (data === "" || data === "[DONE]") continue
    try {
      const event = JSON.parse(data) as SessionEvent
      if (typeof event.seq === "number") events.push(event)
    } catch {
      // A line that is not JSON is not an event of ours.
    }
  }
  return { events, rest }
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
        let buffer = ""
        for (;;) {
          const { done, value } = await reader.read()
          if (done) break
          buffer = (buffer + value).replace(/\r\n/g, "\n")
          const parsed = parseBlocks(buffer)
          buffer = parsed.rest
          for (const event of parsed.events) {
            if (event.seq <= lastSeq) continue
            lastSeq = event.seq
            onEvent(event)
          }
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
