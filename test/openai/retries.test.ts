import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import OpenAI from "openai"
import { request } from "../support/Client.js"
import { TestServer } from "../support/TestServer.js"
import { agentWith, apiKeyOf, ENV, LIVE, newUser } from "../runs/runs-support.js"
import { openAiClient } from "./support.js"

/**
 * Issue 30 item 3: a client that times out and retries sends the same `Idempotency-Key`; the retry attaches to the
 * run the first request started instead of starting another turn. The `openai` SDK (6.49, and 7.57) sends no key of
 * its own (its `idempotencyHeader` is unset), but a key given in a request's options goes with every retry of it.
 */

const userMessages = (messages: ReadonlyArray<any>, text: string) =>
  messages.filter((m) => m.role === "user" && JSON.stringify(m.content).includes(text)).length

describe("safe retries", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("a timed-out responses.create retried by the openai SDK leaves one turn", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const apiKey = yield* apiKeyOf(user)
        const server = yield* TestServer
        const { client } = yield* openAiClient(apiKey)
        const first = yield* Effect.promise(() => client.responses.create({ model: agent, input: "hello" }))
        const session = first.conversation!.id

        // 30 increments of 100 ms: the run takes 3 s, so the first attempt (1 s) surely times out and is retried.
        const keys: Array<string> = []
        const impatient = new OpenAI({
          apiKey,
          baseURL: `${server.url}/v1`,
          timeout: 1000,
          maxRetries: 2,
          defaultHeaders: { "X-End-User-Id": "u1" },
          fetch: (input: any, init?: any) => {
            keys.push(new Headers(init?.headers).get("idempotency-key") ?? "")
            return fetch(input, init)
          }
        })
        const body = { model: agent, input: "/slow 30", previous_response_id: first.id }
        const outcome = yield* Effect.promise(() =>
          impatient.responses.create(body, { headers: { "Idempotency-Key": `slow-${first.id}` } }).then((r) => r, (e: unknown) => e)
        )
        assert.isAtLeast(keys.length, 2, "the SDK retried")
        assert.strictEqual(new Set(keys).size, 1, "every attempt carries the same key")
        assert.match(keys[0]!, /.+/)

        // The same key once more, patiently: it reads the same response to its end.
        const finished = yield* Effect.promise(() => client.responses.create(body, { headers: { "Idempotency-Key": keys[0]! } }))
        assert.strictEqual(finished.status, "completed")
        assert.strictEqual(finished.output_text, Array.from({ length: 30 }, (_, i) => `chunk ${i + 1} `).join(""))
        if (!(outcome instanceof Error)) assert.strictEqual((outcome as OpenAI.Responses.Response).id, finished.id)

        const view = yield* request("GET", `/v1/sessions/${session}`, { token: apiKey, headers: { "x-end-user-id": "u1" } })
        assert.strictEqual(view.status, 200, view.text)
        assert.strictEqual(userMessages(view.body.messages, "/slow 30"), 1, JSON.stringify(view.body.messages).slice(0, 500))

        // Streamed, a retry reads the stream from its start; another payload with the key is a 409.
        const key = "stream-retry-1"
        const read = (input: string) =>
          Effect.promise(async () => {
            const types: Array<string> = []
            let text = ""
            const stream = await client.responses.create({ model: agent, input, stream: true }, { headers: { "Idempotency-Key": key }, maxRetries: 2 })
            for await (const event of stream) {
              types.push(event.type)
              if (event.type === "response.output_text.delta") text += event.delta
            }
            return { types, text }
          })
        // Concurrent: the second attaches live, or (a 409 while the first is still starting) retries and attaches.
        const [a, b] = yield* Effect.all([read("/slow 5"), read("/slow 5")], { concurrency: 2 })
        assert.deepStrictEqual(a, b)
        assert.strictEqual(a.text, "chunk 1 chunk 2 chunk 3 chunk 4 chunk 5 ")
        const conflict = yield* Effect.promise(() =>
          client.responses.create({ model: agent, input: "other" }, { headers: { "Idempotency-Key": key }, maxRetries: 0 }).then(
            () => undefined,
            (e: unknown) => e
          )
        )
        assert.instanceOf(conflict, OpenAI.ConflictError)
      }))
    it.effect("POST /v1/agents/run: requests with one Idempotency-Key share one run, streamed or not", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const run = (key: string, stream: boolean) =>
          request("POST", "/v1/agents/run", {
            token: user.token,
            headers: { "idempotency-key": key },
            body: { agent, message: "/slow 5", stream }
          })
        const [a, b] = yield* Effect.all([run("run-once", false), run("run-once", false)], { concurrency: 2 })
        const answers = [a, b].filter((reply) => reply.status === 200)
        assert.isAtLeast(answers.length, 1, `${a.status} ${b.status}`)
        const c = yield* run("run-once", false)
        assert.strictEqual(c.status, 200)
        for (const reply of answers) assert.strictEqual(reply.body.id, c.body.id)
        assert.strictEqual(c.body.output, "chunk 1 chunk 2 chunk 3 chunk 4 chunk 5 ")

        const first = yield* run("stream-once", true)
        const again = yield* run("stream-once", true)
        assert.strictEqual(first.text, again.text)
        assert.match(first.text, /run\.completed/)
        const other = yield* request("POST", "/v1/agents/run", {
          token: user.token,
          headers: { "idempotency-key": "stream-once" },
          body: { agent, message: "something else" }
        })
        assert.strictEqual(other.status, 409)
      }))
  })
})
