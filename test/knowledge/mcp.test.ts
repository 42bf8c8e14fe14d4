import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { createAgent } from "../agents/agents-support.js"
import { call, connect, ENV, LIVE, newUser, ok } from "../mcp/mcp-support.js"
import { pollUntil } from "../support/Poll.js"
import { TestServer } from "../support/TestServer.js"
import { MANUAL } from "./support.js"

/** Issue 32 item 6: knowledge bases through the MCP tool server (the official MCP client), from text to an expert. */
describe("knowledge: MCP tools", () => {
  layer(TestServer.layer({ ...ENV, KNOWLEDGE_INGEST_POLL: "1 second" }), LIVE)((it) => {
    it.scoped("create, add text, wait, search, attach to an expert; another user sees none of it", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const client = yield* connect({ bearer: user.token })
        const store = ok(yield* call(client, "create_knowledge_base", { name: "Manual" }))
        assert.match(store.id, /^vs_/)
        const added = ok(yield* call(client, "add_knowledge_text", { knowledgeBaseId: store.id, filename: "manual.md", text: MANUAL }))
        assert.strictEqual(added.status, "in_progress")
        // Polled: ingestion runs in the background and is seen only through knowledge_status.
        const status: any = yield* pollUntil(
          Effect.map(call(client, "knowledge_status", { knowledgeBaseId: store.id }), ok),
          (status: any) => status.files[0].status !== "in_progress",
          "the manual ingested",
          { every: 50, within: 20_000 }
        )
        assert.strictEqual(status.files[0].status, "completed", JSON.stringify(status))
        const found = ok(yield* call(client, "search_knowledge", { knowledgeBaseId: store.id, query: "warranty" }))
        assert.include(found.data[0].content[0].text, "two years")
        const listed = ok(yield* call(client, "list_knowledge_bases"))
        assert.deepStrictEqual(listed.knowledge_bases.map((s: any) => s.id), [store.id])

        const agent = yield* createAgent(user.token, { name: "Manual expert" })
        const attached = ok(yield* call(client, "attach_knowledge", { identifier: agent.identifier, knowledgeBaseIds: [store.id] }))
        assert.deepStrictEqual(attached.knowledge_bases, [store.id])

        const other = yield* newUser
        const stranger = yield* connect({ bearer: other.token })
        const refused = yield* call(stranger, "search_knowledge", { knowledgeBaseId: store.id, query: "warranty" })
        assert.isTrue(refused.isError)
        assert.strictEqual((refused._meta as any)["atrium/error"].type, "not_found")
        assert.deepStrictEqual(ok(yield* call(stranger, "list_knowledge_bases")).knowledge_bases, [])
      }))
  })
})
