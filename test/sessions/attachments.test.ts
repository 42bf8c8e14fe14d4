import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { request } from "../support/Client.js"
import { streamOf, textOf } from "../support/Sse.js"
import { TestServer } from "../support/TestServer.js"
import { agentWith, assertError, ENV, LIVE, newUser } from "../runs/runs-support.js"

/**
 * Attachments (issue 48, docs/sessions.md "Attachments"): a text file the user attaches is written to the session's
 * workspace under `attachments/`, where the expert's `read_file` reads it; bad input and another person's session
 * change nothing.
 */

const createSession = (token: string, agent: string) =>
  Effect.gen(function*() {
    const reply = yield* request("POST", "/v1/sessions", { token, body: { agent } })
    assert.strictEqual(reply.status, 201, reply.text)
    return reply.body.id as string
  })

const filesOf = (token: string, session: string) =>
  Effect.map(request("GET", `/v1/sessions/${session}/files?limit=100`, { token }), (reply) =>
    (reply.body.data as Array<{ path: string }>).map((file) => file.path))

describe("sessions: attachments", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("an attached file is in the workspace and the expert reads it; the same name replaces it", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token, { read_file: "allow" })
        const session = yield* createSession(user.token, agent)
        const attached = yield* request("POST", `/v1/sessions/${session}/files`, {
          token: user.token,
          body: { name: "notes-1.txt", content: "the quick brown fox, née 狐" }
        })
        assert.strictEqual(attached.status, 201, attached.text)
        assert.deepInclude(attached.body, { path: "attachments/notes-1.txt" })
        assert.deepStrictEqual(yield* filesOf(user.token, session), ["attachments/notes-1.txt"])
        const answer = textOf(yield* streamOf(`/v1/sessions/${session}/events`, {
          token: user.token,
          body: { type: "message", message: `/tool read_file {"path": "attachments/notes-1.txt"}` }
        }))
        assert.include(answer, "the quick brown fox, née 狐")

        const again = yield* request("POST", `/v1/sessions/${session}/files`, { token: user.token, body: { name: "notes-1.txt", content: "v2" } })
        assert.strictEqual(again.status, 201, again.text)
        const content = yield* request("GET", `/v1/sessions/${session}/files/content?path=${encodeURIComponent("attachments/notes-1.txt")}`, { token: user.token })
        assert.strictEqual(content.text, "v2")
        assert.deepStrictEqual(yield* filesOf(user.token, session), ["attachments/notes-1.txt"])
      }))

    it.effect("bad names, oversized files and another person's session are refused in words, and nothing is written", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const other = yield* newUser
        const agent = yield* agentWith(user.token)
        const session = yield* createSession(user.token, agent)
        const attach = (token: string, body: unknown, id = session) => request("POST", `/v1/sessions/${id}/files`, { token, body })
        for (const name of ["../escape.txt", "a/b.txt", "with space.txt", ".hidden", "", "x".repeat(101), "semi;colon"]) {
          assertError(yield* attach(user.token, { name, content: "x" }), 400, "invalid_request")
        }
        // 100,000 bytes of UTF-8 at most: 50,001 two-byte letters are 100,002 bytes.
        assertError(yield* attach(user.token, { name: "big.txt", content: "é".repeat(50_001) }), 400, "invalid_request")
        assert.strictEqual((yield* attach(user.token, { name: "fits.txt", content: "é".repeat(50_000) })).status, 201)
        // Another person: the session is not theirs, a 404 that writes nothing.
        const theirs = yield* attach(other.token, { name: "planted.txt", content: "x" })
        assertError(theirs, 404, "not_found")
        assert.notInclude(theirs.text, "fits.txt")
        assert.deepStrictEqual(yield* filesOf(user.token, session), ["attachments/fits.txt"])
      }))

    it.effect("a session keeps at most 50 attachments; attaching again under a kept name still works", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const session = yield* createSession(user.token, agent)
        yield* Effect.forEach(Array.from({ length: 50 }, (_, i) => i), (i) =>
          Effect.map(request("POST", `/v1/sessions/${session}/files`, { token: user.token, body: { name: `f${i}.txt`, content: "x" } }), (reply) =>
            assert.strictEqual(reply.status, 201, reply.text)), { concurrency: 1 })
        const refused = yield* request("POST", `/v1/sessions/${session}/files`, { token: user.token, body: { name: "one-more.txt", content: "x" } })
        assertError(refused, 400, "invalid_request")
        assert.include(refused.body.error.message, "50 attachments")
        assert.strictEqual((yield* filesOf(user.token, session)).length, 50)
        const replaced = yield* request("POST", `/v1/sessions/${session}/files`, { token: user.token, body: { name: "f7.txt", content: "y" } })
        assert.strictEqual(replaced.status, 201, replaced.text)
      }))
  })
})
