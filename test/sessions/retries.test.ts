import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { request } from "../support/Client.js"
import { names, openStream, parseStream, textOf } from "../support/Sse.js"
import { TestServer } from "../support/TestServer.js"
import { agentWith, ENV, LIVE, newUser } from "../runs/runs-support.js"

/**
 * Issue 30: `Idempotency-Key` on `POST /v1/sessions/:id/events`. A client that times out and retries with the same
 * key reads the turn its first request sent (from its first event), instead of sending the message again. The key
 * names the turn in PostgreSQL and the retry reads the session's log, so it works on whichever runner it lands.
 */

const SLOW_30 = Array.from({ length: 30 }, (_, i) => `chunk ${i + 1} `).join("")

/** A message POSTed with an `Idempotency-Key`, read whole; a request cut by its timeout answers status 0. */
const postWithKey = (url: string, token: string, key: string, body: unknown, timeoutMs: number) =>
  Effect.promise(async () => {
    try {
      const response = await fetch(url, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${token}`, "idempotency-key": key },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(timeoutMs)
      })
      return { status: response.status, replayed: response.headers.get("idempotent-replayed"), text: await response.text() }
    } catch (error) {
      return { status: 0, replayed: null, text: String(error) }
    }
  })

describe("session turns: safe retries", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("a timed-out retry leaves one turn", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const server = yield* TestServer
        const created = yield* request("POST", "/v1/sessions", { token: user.token, body: { agent } })
        assert.strictEqual(created.status, 201, created.text)
        const session = created.body.id as string
        const path = `/v1/sessions/${session}/events`
        const body = { type: "message", message: "/slow 30" }

        // A client with a 1 s timeout and two retries, as the `openai` SDK makes them: each attempt is cut off (the
        // turn takes 3 s) and the next one carries the same key.
        const attempt = (key: string, timeoutMs: number) => postWithKey(server.url + path, user.token, key, body, timeoutMs)
        const cut = []
        for (let i = 0; i < 3; i++) cut.push(yield* attempt("slow-turn-1", 1000))
        assert.deepStrictEqual(cut.map((a) => a.status), [0, 0, 0], "every attempt timed out")

        // A patient retry with the key reads the same turn from its start to its end.
        const patient = yield* attempt("slow-turn-1", 60_000)
        assert.strictEqual(patient.status, 200, patient.text)
        assert.strictEqual(patient.replayed, "true")
        const stream = parseStream(patient.text)
        assert.strictEqual(names(stream)[0], "run.created")
        assert.strictEqual(names(stream).at(-1), "run.completed")
        assert.strictEqual(textOf(stream), SLOW_30)
        const seqs = stream.events.map((e) => e.data.seq)
        assert.deepStrictEqual(seqs, Array.from({ length: seqs.length }, (_, i) => seqs[0] + i), "the whole turn, in order")

        const view = yield* request("GET", `/v1/sessions/${session}`, { token: user.token })
        assert.strictEqual(view.status, 200, view.text)
        const asked = view.body.messages.filter((m: any) => m.role === "user" && m.content === "/slow 30")
        assert.strictEqual(asked.length, 1, JSON.stringify(view.body.messages).slice(0, 400))

        // Once finished, the key replays the same turn (the same events, the same seqs).
        const again = yield* openStream(path, { token: user.token, body, headers: { "idempotency-key": "slow-turn-1" } })
        assert.strictEqual(again.headers.get("idempotent-replayed"), "true")
        const replayed = yield* again.rest
        assert.deepStrictEqual(replayed.events.map((e) => e.data.seq), seqs)
        assert.strictEqual(textOf(replayed), SLOW_30)

        // The same key with another message is refused; another key sends a new turn.
        const conflict = yield* request("POST", path, {
          token: user.token,
          headers: { "idempotency-key": "slow-turn-1" },
          body: { type: "message", message: "something else" }
        })
        assert.strictEqual(conflict.status, 409, conflict.text)
        assert.strictEqual(conflict.body.error.type, "idempotency_conflict")
        // Final: retrying the same key with this body can never succeed, so the SDKs must not retry it.
        assert.strictEqual(conflict.headers.get("x-should-retry"), "false")
        const bad = yield* request("POST", path, { token: user.token, headers: { "idempotency-key": "" }, body })
        assert.strictEqual(bad.status, 400, bad.text)

        const next = yield* openStream(path, { token: user.token, body: { type: "message", message: "hello" }, headers: { "idempotency-key": "k2" } })
        assert.strictEqual(next.headers.get("idempotent-replayed"), null)
        assert.strictEqual(textOf(yield* next.rest), "You said: hello")
        const after = yield* request("GET", `/v1/sessions/${session}`, { token: user.token })
        assert.strictEqual(after.body.messages.filter((m: any) => m.role === "user").length, 2)
      }))

    it.effect("concurrent requests with one key share one turn; keys are the session's and the caller's", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const other = yield* newUser
        const agent = yield* agentWith(user.token)
        const create = (token: string) =>
          Effect.map(request("POST", "/v1/sessions", { token, body: { agent } }), (reply) => reply.body.id as string)
        const session = yield* create(user.token)
        const second = yield* create(user.token)
        const send = (id: string, key: string) =>
          Effect.flatMap(
            openStream(`/v1/sessions/${id}/events`, {
              token: user.token,
              body: { type: "message", message: "/slow 5" },
              headers: { "idempotency-key": key }
            }),
            (stream) => stream.rest
          )
        const [a, b] = yield* Effect.all([send(session, "together"), send(session, "together")], { concurrency: 2 })
        assert.deepStrictEqual(a.events.map((e) => e.data.seq), b.events.map((e) => e.data.seq))
        assert.strictEqual(textOf(a), "chunk 1 chunk 2 chunk 3 chunk 4 chunk 5 ")
        // The same key on another session is another turn.
        const elsewhere = yield* send(second, "together")
        assert.strictEqual(textOf(elsewhere), "chunk 1 chunk 2 chunk 3 chunk 4 chunk 5 ")
        const turns = yield* request("GET", `/v1/sessions/${session}`, { token: user.token })
        assert.strictEqual(turns.body.messages.filter((m: any) => m.role === "user").length, 1)
        // Someone else's request with the key reaches nothing of this session: 404 as always.
        const stranger = yield* request("POST", `/v1/sessions/${session}/events`, {
          token: other.token,
          headers: { "idempotency-key": "together" },
          body: { type: "message", message: "/slow 5" }
        })
        assert.strictEqual(stranger.status, 404, stranger.text)
      }))

    it.effect("a finished turn whose frames pass the socket's buffer is replayed to its end", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const server = yield* TestServer
        const created = yield* request("POST", "/v1/sessions", { token: user.token, body: { agent } })
        const path = `/v1/sessions/${created.body.id}/events`
        // Echoed three words a frame: some 200 KB of frames, replayed from the log and ended in one go. The end corks
        // the socket so that [DONE] and the response's end leave in one write; a last piece past the socket's
        // high-water mark once paused the pipe for good, and the replay never ended.
        const body = { type: "message", message: Array.from({ length: 4_000 }, (_, i) => `w${i}`).join(" ") }
        const send = postWithKey(server.url + path, user.token, "long-turn", body, 30_000)
        const first = yield* send
        assert.isTrue(first.text.trimEnd().endsWith("data: [DONE]"), first.text.slice(-300))
        const again = yield* send
        assert.strictEqual(again.replayed, "true")
        assert.isAbove(again.text.length, 64 * 1024)
        assert.isTrue(again.text.trimEnd().endsWith("data: [DONE]"), again.text.slice(-300))
        assert.strictEqual(textOf(parseStream(again.text)), textOf(parseStream(first.text)))
      }))
  })
})
