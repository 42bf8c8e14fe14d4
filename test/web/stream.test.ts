import { assert, describe, it } from "@effect/vitest"
import { type SessionEvent, sessionEventParser } from "../../web/src/sse.js"

/** The chat page's reader of a session's stream (web/src/stream.ts), on the library's SSE parser. */
describe("web session stream reader", () => {
  it("events split anywhere across chunks, CRLF or LF; pings, [DONE] and foreign data skipped", () => {
    const seen: Array<SessionEvent> = []
    const parser = sessionEventParser((event) => seen.push(event))
    const wire = ": ping\n\n" +
      "event: run.created\nid: 1\ndata: {\"type\":\"run.created\",\"seq\":1}\n\n" +
      "event: output.text.delta\r\nid: 2\r\ndata: {\"type\":\"output.text.delta\",\"seq\":2,\"delta\":\"h\u00e9\"}\r\n\r\n" +
      "data: not json\n\n" +
      "data: {\"type\":\"x\"}\n\n" +
      "data: [DONE]\n\n"
    // One character at a time: every boundary a network may cut at.
    for (const character of wire) assert.isUndefined(parser.feed(character))
    assert.deepStrictEqual(seen.map((event) => [event.type, event.seq]), [["run.created", 1], ["output.text.delta", 2]])
    assert.strictEqual(seen[1]!.delta, "h\u00e9")
  })

  it("an event without its closing blank line is not delivered yet", () => {
    const seen: Array<SessionEvent> = []
    const parser = sessionEventParser((event) => seen.push(event))
    parser.feed("data: {\"type\":\"run.created\",\"seq\":3}\n")
    assert.lengthOf(seen, 0)
    parser.feed("\n")
    assert.lengthOf(seen, 1)
  })
})
