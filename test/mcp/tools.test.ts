import { assert, describe, it as plain, layer } from "@effect/vitest"
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js"
import { ConfigProvider, Effect, Exit } from "effect"
import { McpConfig } from "../../src/mcp/Config.js"
import { request } from "../support/Client.js"
import { TestServer } from "../support/TestServer.js"
import { call, connect, ENV, failed, LIVE, newUser } from "./mcp-support.js"

/**
 * The tool server's surface (spec 4.10): the spec's 22 tools, named and parameterised as its table says, and the
 * 6 knowledge tools (docs/knowledge.md) and 5 run and schedule tools (docs/mcp.md) beside them, over stateless
 * Streamable HTTP at MCP_PATH.
 */

/** Spec 4.10, row by row: each tool's parameters, `true` for required. */
const SPEC: Record<string, Record<string, boolean>> = {
  get_creator_profile: {},
  apply_creator: { displayName: true, bio: true, accountType: true, email: true },
  create_expert: { name: true, description: true, category: true },
  // `model` and `fallback_models` beyond the spec's row: issue 31 exposes the per-expert model here.
  update_expert: { identifier: true, name: false, description: false, category: false, model: false, fallback_models: false },
  get_expert_detail: { identifier: true },
  list_my_experts: {},
  install_skill: { identifier: true, skillName: true },
  list_expert_skills: { identifier: true },
  list_marketplace_skills: { keyword: false },
  set_billing: { identifier: true, billingType: true, price: false, freeTrialPerUser: false, allowTrial: false },
  publish_expert: { identifier: true },
  get_submission_status: { identifier: true },
  start_distillation: { topic: true, materials: true },
  continue_distillation: { sessionId: true, message: true },
  test_expert: { identifier: true, message: true },
  open_expert_chat: { identifier: true },
  open_platform_page: { page: true },
  list_evolution_suggestions: { identifier: true },
  accept_evolution: { suggestionId: true },
  get_evolution_stats: { identifier: true },
  get_earnings: {},
  browse_marketplace: { keyword: false, category: false, page: false, pageSize: false }
}

/** Beyond the spec's table: knowledge bases (issue 32 item 6). */
const KNOWLEDGE: Record<string, Record<string, boolean>> = {
  list_knowledge_bases: {},
  create_knowledge_base: { name: true },
  add_knowledge_text: { knowledgeBaseId: true, filename: true, text: true },
  knowledge_status: { knowledgeBaseId: true },
  search_knowledge: { knowledgeBaseId: true, query: true, maxResults: false },
  attach_knowledge: { identifier: true, knowledgeBaseIds: true }
}
/** Beyond it too: runs and schedules (issue 43 item 5). */
const RUNS: Record<string, Record<string, boolean>> = {
  list_runs: { identifier: false, status: false, limit: false },
  get_run: { runId: true },
  cancel_run: { runId: true },
  create_schedule: { identifier: true, cron: true, timezone: false, input: true, missed: false },
  list_schedules: {}
}
/** And memory, the creator's side (issue 47 item 3). */
const MEMORY: Record<string, Record<string, boolean>> = {
  configure_memory: { identifier: true, enabled: false, blocks: false }
}
/** And evaluations (issue 46 item 3). */
const EVALS: Record<string, Record<string, boolean>> = {
  run_eval: { dataset: true, agent: true, version: false, graders: true, concurrency: false },
  get_eval_results: { id: true, limit: false, after: false },
  cancel_eval: { id: true }
}
const ALL = { ...SPEC, ...KNOWLEDGE, ...RUNS, ...MEMORY, ...EVALS }
const TOOL_COUNT = 37

describe("mcp tools", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.scoped("tools/list is the spec's table (22 tools), the knowledge, run and memory tools, name for name and parameter for parameter", () =>
      Effect.gen(function*() {
        const client = yield* connect()
        const { tools } = yield* Effect.promise(() => client.listTools())
        assert.strictEqual(Object.keys(SPEC).length, 22)
        assert.sameMembers(tools.map((t) => t.name), Object.keys(ALL))
        assert.strictEqual(tools.length, TOOL_COUNT)
        for (const tool of tools) {
          const expected = ALL[tool.name]!
          assert.strictEqual(tool.inputSchema.type, "object", tool.name)
          assert.sameMembers(Object.keys(tool.inputSchema.properties ?? {}), Object.keys(expected), tool.name)
          assert.sameMembers(
            tool.inputSchema.required ?? [],
            Object.entries(expected).filter(([, required]) => required).map(([name]) => name),
            tool.name
          )
          assert.strictEqual((tool.inputSchema as any).additionalProperties, false, tool.name)
          assert.isString(tool.description, tool.name)
          assert.isAbove(tool.description!.length, 10, tool.name)
        }
        const byName = Object.fromEntries(tools.map((t) => [t.name, t.inputSchema as any]))
        assert.sameMembers(byName.set_billing.properties.billingType.enum, ["METERED", "ONE_TIME"])
        assert.strictEqual(byName.set_billing.properties.freeTrialPerUser.default, 3)
        assert.strictEqual(byName.set_billing.properties.allowTrial.default, true)
        assert.sameMembers(byName.open_platform_page.properties.page.enum, ["studio", "chat", "marketplace", "earnings"])
        assert.strictEqual(byName.start_distillation.properties.materials.type, "array")
        assert.sameMembers(
          Object.keys(byName.start_distillation.properties.materials.items.properties),
          ["filename", "content"]
        )
        assert.sameMembers(byName.apply_creator.properties.accountType.enum, ["individual", "organization"])
      }))

    it.scoped("tools/list needs no identity, and a bad token does not hide it", () =>
      Effect.gen(function*() {
        const anonymous = yield* connect()
        assert.strictEqual((yield* Effect.promise(() => anonymous.listTools())).tools.length, TOOL_COUNT)
        const junk = yield* connect({ bearer: "not-a-token" })
        assert.strictEqual((yield* Effect.promise(() => junk.listTools())).tools.length, TOOL_COUNT)
      }))

    it.scoped("stateless: no session id; GET and DELETE are 405 with a JSON-RPC error", () =>
      Effect.gen(function*() {
        const initialize = {
          jsonrpc: "2.0",
          id: 1,
          method: "initialize",
          params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } }
        }
        const headers = { accept: "application/json, text/event-stream" }
        const reply = yield* request("POST", "/mcp", { body: initialize, headers })
        assert.strictEqual(reply.status, 200, reply.text)
        assert.isNull(reply.headers.get("mcp-session-id"))
        assert.strictEqual(reply.body.result.serverInfo.name, "atrium")
        assert.isObject(reply.body.result.capabilities.tools)

        // Without a session, a request that is not `initialize` is answered on its own.
        const list = yield* request("POST", "/mcp", { body: { jsonrpc: "2.0", id: 2, method: "tools/list" }, headers })
        assert.strictEqual(list.status, 200, list.text)
        assert.strictEqual(list.body.result.tools.length, TOOL_COUNT)

        for (const method of ["GET", "DELETE"]) {
          const refused = yield* request(method, "/mcp", { headers: { accept: "text/event-stream" } })
          assert.strictEqual(refused.status, 405, refused.text)
          assert.strictEqual(refused.headers.get("allow"), "POST")
          assert.strictEqual(refused.body.jsonrpc, "2.0")
          assert.strictEqual(refused.body.error.code, -32000)
          assert.isNull(refused.body.id)
        }
      }))

    it.scoped("through the platform's middleware: bad JSON is a JSON-RPC parse error, a huge body 413", () =>
      Effect.gen(function*() {
        const headers = { accept: "application/json, text/event-stream" }
        const bad = yield* request("POST", "/mcp", { raw: "{not json", headers })
        assert.strictEqual(bad.status, 400, bad.text)
        assert.strictEqual(bad.body.jsonrpc, "2.0")
        assert.strictEqual(bad.body.error.code, -32700)

        const huge = yield* request("POST", "/mcp", { raw: JSON.stringify({ pad: "x".repeat(2 * 1024 * 1024) }), headers })
        assert.strictEqual(huge.status, 413, huge.text)
        assert.strictEqual(huge.body.error.type, "payload_too_large")

        // A body without a length (chunked) is read by the middleware under the same limit, then answered as usual.
        const server = yield* TestServer
        const chunked = (text: string) =>
          Effect.promise(async () => {
            const body = new ReadableStream({
              start(controller) {
                controller.enqueue(new TextEncoder().encode(text))
                controller.close()
              }
            })
            const response = await fetch(`${server.url}/mcp`, {
              method: "POST",
              headers: { ...headers, "content-type": "application/json" },
              body,
              duplex: "half"
            } as RequestInit)
            return { status: response.status, text: await response.text() }
          })
        const listed = yield* chunked(JSON.stringify({ jsonrpc: "2.0", id: 7, method: "tools/list" }))
        assert.strictEqual(listed.status, 200, listed.text)
        assert.strictEqual(JSON.parse(listed.text).result.tools.length, TOOL_COUNT)
        const tooBig = yield* chunked(JSON.stringify({ pad: "x".repeat(2 * 1024 * 1024) }))
        assert.strictEqual(tooBig.status, 413, tooBig.text)
      }))

    it.scoped("bad arguments are tool errors; an unknown tool is JSON-RPC invalid params (issue 30)", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const client = yield* connect({ bearer: user.token })
        const unknown = yield* Effect.promise(() => client.callTool({ name: "no_such_tool", arguments: {} }).then(() => undefined, (e: unknown) => e))
        assert.strictEqual((unknown as { code?: number }).code, -32602)
        failed(yield* call(client, "create_expert", { name: "x", description: "d", category: "astrology" }), "category")
        failed(yield* call(client, "create_expert", { description: "no name", category: "other" }), "name")
      }))

    it.scoped("the tools' limits are the HTTP contracts': the same value is refused on both, as invalid_request naming the field", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const client = yield* connect({ bearer: user.token })
        const auth = { authorization: `Bearer ${user.token}` }
        const typeOf = (result: CallToolResult) => (result._meta?.["atrium/error"] as { type?: string } | undefined)?.type
        // An agent's name: 100 characters at most (agents/Agent.ts AgentFields), over HTTP and as a tool.
        const long = "n".repeat(101)
        const http = yield* request("POST", "/v1/agents", { body: { name: long, description: "d", category: "other" }, headers: auth })
        assert.strictEqual(http.status, 400, http.text)
        const tool = yield* call(client, "create_expert", { name: long, description: "d", category: "other" })
        assert.include(failed(tool, "name"), "at most 100")
        assert.strictEqual(typeOf(tool), "invalid_request")
        // 100 is fine on both.
        const fine = yield* call(client, "create_expert", { name: "n".repeat(100), description: "d", category: "other" })
        assert.notStrictEqual(fine.isError, true, JSON.stringify(fine))
        // A creator's email (market/Api.ts CreatorApplication): the contract's own message.
        const email = yield* call(client, "apply_creator", { displayName: "D", bio: "", accountType: "individual", email: "nope" })
        assert.include(failed(email, "email"), "email must be an email address")
        // An unknown field and a wrong type, each named.
        const extra = yield* call(client, "browse_marketplace", { pageSize: 101, colour: "red" })
        const text = failed(extra)
        assert.include(text, "pageSize")
        assert.include(text, "colour")
        assert.strictEqual(typeOf(extra), "invalid_request")
      }))
  })

  layer(TestServer.layer({ ...ENV, MCP_PATH: "/tools/mcp" }), LIVE)((it) => {
    it.scoped("MCP_PATH moves the server", () =>
      Effect.gen(function*() {
        const client = yield* connect(undefined, "/tools/mcp")
        assert.strictEqual((yield* Effect.promise(() => client.listTools())).tools.length, TOOL_COUNT)
        const old = yield* request("POST", "/mcp", {
          body: { jsonrpc: "2.0", id: 1, method: "tools/list" },
          headers: { accept: "application/json, text/event-stream" }
        })
        assert.strictEqual(old.status, 404, old.text)
      }))
  })

  plain.effect("MCP_PATH must be a mountable path; the URL follows PUBLIC_URL", () =>
    Effect.gen(function*() {
      const read = (env: Record<string, string>) =>
        McpConfig.pipe(
          Effect.provide(McpConfig.Default),
          Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))),
          Effect.exit
        )
      const fine = yield* read({ PUBLIC_URL: "https://atrium.example/", MCP_PATH: "/tools/mcp" })
      assert.isTrue(Exit.isSuccess(fine))
      if (Exit.isSuccess(fine)) {
        assert.strictEqual(fine.value.path, "/tools/mcp")
        assert.strictEqual(fine.value.url, "https://atrium.example/tools/mcp")
      }
      const byDefault = yield* read({ PORT: "9000" })
      assert.isTrue(Exit.isSuccess(byDefault) && byDefault.value.url === "http://localhost:9000/mcp")
      for (const bad of ["mcp", "/mcp/", "/", "/m cp", "/mcp?x=1", "//mcp"]) {
        assert.isTrue(Exit.isFailure(yield* read({ MCP_PATH: bad })), bad)
      }
    }))
})
