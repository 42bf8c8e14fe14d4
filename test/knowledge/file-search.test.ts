import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import OpenAI, { toFile } from "openai"
import { createAgent } from "../agents/agents-support.js"
import { call, LIVE, newAccount, serverWith } from "../files/support.js"
import { rejection } from "../openai/support.js"
import { assertCompleted, resultOf, runAgent, toolDirective } from "../runs/runs-support.js"
import { TestServer } from "../support/TestServer.js"
import { clientOf, MANUAL, untilIngested, uploadText } from "./support.js"

/**
 * Issue 32 items 3 and 4: an expert with a knowledge base answers from it through `file_search`, whose results
 * carry citations (file, chunk, character range); the Responses API's `file_search` tool through the official
 * `openai` SDK, with `file_search_call` items and `file_citation` annotations; OpenAI's one-step upload
 * (`files.create`, multipart) beside the two-step one.
 */
describe("knowledge: file_search", () => {
  layer(serverWith({ KNOWLEDGE_INGEST_POLL: "1 second" }), LIVE)((it) => {
    it.effect("an expert answers from its owner's manual with a citation", () =>
      Effect.gen(function*() {
        const owner = yield* newAccount
        const server = yield* TestServer
        // The owner's own (account-wide) knowledge base, made with their login token, as the studio does.
        const studio = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: owner.token, maxRetries: 0 })
        const file = yield* uploadText(owner.asLogin, MANUAL)
        const store = yield* Effect.promise(() => studio.vectorStores.create({ name: "Kettle manual", file_ids: [file.id] }))
        assert.strictEqual((yield* untilIngested(studio, store.id, file.id)).status, "completed")

        const agent = yield* createAgent(owner.token, { name: "Kettle helper", instructions: "Answer from the manual.", knowledge_bases: [store.id] })
        assert.deepStrictEqual(agent.knowledge_bases, [store.id])
        const stream = yield* runAgent({ token: owner.token }, agent.identifier, toolDirective("file_search", { query: "how long is the warranty" }))
        assertCompleted(stream)
        const output = resultOf(stream) as { query: string; results: Array<Record<string, any>> }
        assert.strictEqual(output.query, "how long is the warranty")
        const top = output.results[0]!
        assert.strictEqual(top.file_id, file.id)
        assert.strictEqual(top.filename, "manual.md")
        assert.strictEqual(top.vector_store_id, store.id)
        assert.strictEqual(top.marker, "【1†manual.md】")
        assert.include(top.text, "two years")
        assert.strictEqual(MANUAL.slice(top.start_char, top.end_char), top.text)
        assert.isNumber(top.chunk_index)
        // The answer (the builtin model reads the results back) cites the passage by its marker.
        const answer = stream.events.filter((e) => e.event === "output.text.delta").map((e) => e.data.delta).join("")
        assert.include(answer, "【1†manual.md】")

        // Someone else cannot attach this knowledge base to their expert.
        const stranger = yield* newAccount
        const refused = yield* call(stranger.asLogin, "POST", "/v1/agents", { name: "Thief", knowledge_bases: [store.id] })
        assert.strictEqual(refused.status, 400, refused.text)
        assert.include(refused.body.error.message, "knowledge_bases")
      }))

    it.effect("responses.create with file_search returns file_search_call and file_citation (openai SDK)", () =>
      Effect.gen(function*() {
        const account = yield* newAccount
        const client = yield* clientOf(account.key, "u1")
        // OpenAI's one-step upload: multipart on POST /v1/files.
        const uploaded = yield* Effect.promise(async () =>
          client.files.create({ file: await toFile(Buffer.from(MANUAL), "manual.md", { type: "text/markdown" }), purpose: "assistants" }))
        assert.match(uploaded.id, /^file_/)
        assert.strictEqual(uploaded.object, "file")
        assert.strictEqual(uploaded.bytes, Buffer.byteLength(MANUAL))
        assert.strictEqual(uploaded.filename, "manual.md")
        assert.strictEqual(uploaded.purpose, "assistants")
        // It is a file like any other: the two-step flow's record and download.
        const record = yield* call(account.asEndUser("u1"), "GET", `/v1/files/${uploaded.id}`)
        assert.strictEqual(record.status, 200, record.text)
        assert.strictEqual(record.body.content_type, "text/markdown")
        assert.strictEqual(new TextDecoder().decode(new Uint8Array(yield* Effect.promise(() => fetch(record.body.download_url).then((r) => r.arrayBuffer())))), MANUAL)

        // Multipart is taken with a bearer credential only: a cookie-authenticated form post stays refused (CSRF).
        const server = yield* TestServer
        const form = new FormData()
        form.set("purpose", "assistants")
        form.set("file", new Blob([MANUAL], { type: "text/markdown" }), "manual.md")
        const withCookie = yield* Effect.promise(() =>
          fetch(`${server.url}/v1/files`, { method: "POST", headers: { cookie: `token=${account.token}` }, body: form }).then((r) => r.status))
        assert.strictEqual(withCookie, 415)

        const store = yield* Effect.promise(() => client.vectorStores.create({ name: "Manual", file_ids: [uploaded.id] }))
        assert.strictEqual((yield* untilIngested(client, store.id, uploaded.id)).status, "completed")

        const response = yield* Effect.promise(() =>
          client.responses.create({
            model: "builtin",
            input: toolDirective("file_search", { query: "warranty years" }),
            tools: [{ type: "file_search", vector_store_ids: [store.id] }],
            include: ["file_search_call.results"]
          }))
        assert.strictEqual(response.status, "completed")
        const search = response.output.find((item) => item.type === "file_search_call") as OpenAI.Responses.ResponseFileSearchToolCall
        assert.isDefined(search)
        assert.strictEqual(search.status, "completed")
        assert.deepStrictEqual(search.queries, ["warranty years"])
        assert.strictEqual(search.results![0]!.file_id, uploaded.id)
        assert.include(search.results![0]!.text, "two years")
        const messages = response.output.filter((item) => item.type === "message") as Array<OpenAI.Responses.ResponseOutputMessage>
        const annotations = messages.flatMap((m) => m.content.flatMap((part) => part.type === "output_text" ? part.annotations : []))
        const citation = annotations.find((a) => a.type === "file_citation") as OpenAI.Responses.ResponseOutputText.FileCitation
        assert.isDefined(citation, JSON.stringify(response.output))
        assert.strictEqual(citation.file_id, uploaded.id)
        assert.strictEqual(citation.filename, "manual.md")
        const text = messages[messages.length - 1]!.content.map((part) => part.type === "output_text" ? part.text : "").join("")
        assert.strictEqual(text.slice(citation.index, citation.index + "【1†manual.md】".length), "【1†manual.md】")

        // Streamed, the SDK sees the same items and the annotation as its own events.
        const events: Array<string> = []
        const streamed = yield* Effect.promise(async () => {
          const stream = client.responses.stream({
            model: "builtin",
            input: toolDirective("file_search", { query: "descale" }),
            tools: [{ type: "file_search", vector_store_ids: [store.id] }]
          })
          for await (const event of stream) events.push(event.type)
          return stream.finalResponse()
        })
        assert.include(events, "response.file_search_call.completed")
        assert.include(events, "response.output_text.annotation.added")
        assert.isNull((streamed.output.find((item) => item.type === "file_search_call") as any).results, "results only when included")

        // A store of someone else is refused before anything runs.
        const stranger = yield* newAccount
        const other = yield* clientOf(stranger.key, "u1")
        const refused = yield* rejection(() =>
          other.responses.create({ model: "builtin", input: "hi", tools: [{ type: "file_search", vector_store_ids: [store.id] }] }))
        assert.strictEqual((refused as any).status, 400)
        assert.include((refused as any).error.message, store.id)
      }))
  })
})
