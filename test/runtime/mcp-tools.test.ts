import { createServer, type IncomingMessage, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { assert, describe, layer } from "@effect/vitest"
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js"
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js"
import { Effect } from "effect"
import { z } from "zod"
import { IDEMPOTENCY_META } from "../../src/runtime/tools/Mcp.js"
import { isPrivateAddress } from "../../src/runtime/tools/Outbound.js"
import { createApiKey, request } from "../support/Client.js"
import { names, type ParsedStream } from "../support/Sse.js"
import { TestServer } from "../support/TestServer.js"
import { agentWith, answer, ENV, LIVE, newUser, only, openRun, runAgent } from "../runs/runs-support.js"

/**
 * Remote MCP servers as an expert's tools (issue 19 items 3-5, 7): a local MCP server from the official SDK on a
 * random port, reached through the engine's SDK client; per-end-user credentials; refused private addresses.
 */

/** What the local server saw: the Authorization header of each tool call, by tool, and the call's idempotency key. */
const seen: Array<{ tool: string; authorization: string | undefined; key?: unknown }> = []

const mcpServerFor = (incoming: IncomingMessage) => {
  const server = new McpServer({ name: "local-test", version: "1.0.0" })
  const authorization = incoming.headers.authorization
  server.registerTool("echo", { description: "Echoes text", inputSchema: { text: z.string() } }, async ({ text }, extra) => {
    seen.push({ tool: "echo", authorization, key: extra._meta?.[IDEMPOTENCY_META] })
    return { content: [{ type: "text", text: `echo: ${text}` }] }
  })
  server.registerTool("add", { description: "Adds two numbers", inputSchema: { a: z.number(), b: z.number() } }, async ({ a, b }) => {
    seen.push({ tool: "add", authorization })
    return { content: [{ type: "text", text: String(a + b) }] }
  })
  server.registerTool("erase", { description: "Erases everything", inputSchema: {} }, async () => {
    seen.push({ tool: "erase", authorization })
    return { content: [{ type: "text", text: "erased" }] }
  })
  server.registerTool("whoami", { description: "Who is calling", inputSchema: {} }, async () => {
    seen.push({ tool: "whoami", authorization })
    return { content: [{ type: "text", text: authorization ?? "nobody" }] }
  })
  server.registerTool("broken", { description: "Always fails", inputSchema: {} }, async () => ({
    isError: true,
    content: [{ type: "text", text: "the backend is down" }]
  }))
  return server
}

/** The SDK's server, stateless (a server and transport per request), plus a route that redirects to metadata. */
const startMcpServer = Effect.acquireRelease(
  Effect.async<Server>((resume) => {
    const http = createServer((req, res) => {
      if (req.url === "/redirect") {
        res.writeHead(307, { location: "http://169.254.169.254/mcp" }).end()
        return
      }
      const chunks: Array<Buffer> = []
      req.on("data", (chunk) => chunks.push(chunk))
      req.on("end", async () => {
        const body = chunks.length > 0 ? JSON.parse(Buffer.concat(chunks).toString("utf8")) : undefined
        const server = mcpServerFor(req)
        const transport = new StreamableHTTPServerTransport({ enableJsonResponse: true })
        res.on("close", () => void transport.close().then(() => server.close()))
        await server.connect(transport)
        await transport.handleRequest(req, res, body)
      })
    })
    http.listen(0, "127.0.0.1", () => resume(Effect.succeed(http)))
  }),
  (http) => Effect.promise(() => new Promise<void>((resolve) => http.close(() => resolve())))
)

const urlOf = (http: Server, path = "/mcp") => `http://127.0.0.1:${(http.address() as AddressInfo).port}${path}`

const toolCall = (stream: ParsedStream) => {
  const end = stream.events[stream.events.length - 1]!
  assert.strictEqual(end.event, "run.completed", names(stream).join(", "))
  const find = (name: string) => stream.events.find((e) => e.event === name)?.data
  return {
    result: find("tool_call.result")?.output as any,
    failed: find("tool_call.failed") as Record<string, any>,
    denied: find("tool_call.denied") as Record<string, any>
  }
}

const MCP_ENV = { ...ENV, TOOL_ALLOWED_HOSTS: "127.0.0.1", SECRETS_KEY: "test-secrets-key", MCP_TOOL_TIMEOUT_MS: "5000" } as const

describe("remote MCP tools", () => {
  layer(TestServer.layer(MCP_ENV), { ...LIVE, timeout: 120_000 })((it) => {
    it.effect("allow, ask and deny tools of a local MCP server; per-end-user credentials reach the right user only", () =>
      Effect.gen(function*() {
        const http = yield* startMcpServer
        const user = yield* newUser
        const key = yield* createApiKey(user.token)
        const agent = yield* agentWith(user.token, {}, {
          mcp_servers: [{
            name: "local",
            url: urlOf(http),
            auth: "per_end_user",
            tools: [
              { name: "echo", permission: "allow" },
              { name: "add", permission: "ask" },
              { name: "erase", permission: "deny" },
              { name: "whoami", permission: "allow" },
              { name: "broken", permission: "allow" }
            ]
          }]
        })
        const alice = { token: key.key, endUser: "alice" }
        const bob = { token: key.key, endUser: "bob" }

        const stored = yield* request("POST", "/v1/credentials", {
          token: key.key,
          headers: { "x-end-user-id": "alice" },
          body: { server_url: urlOf(http), token: "alice-secret-token-1234" }
        })
        assert.strictEqual(stored.status, 201, stored.text)
        assert.strictEqual(stored.body.hint, "****1234")
        assert.notInclude(stored.text, "alice-secret-token")
        const listed = yield* request("GET", "/v1/credentials", { token: key.key, headers: { "x-end-user-id": "alice" } })
        assert.strictEqual(listed.body.data.length, 1)
        assert.notInclude(listed.text, "alice-secret-token")
        const bobs = yield* request("GET", "/v1/credentials", { token: key.key, headers: { "x-end-user-id": "bob" } })
        assert.deepStrictEqual(bobs.body.data, [])

        seen.length = 0
        const echoed = yield* runAgent(alice, agent, `/tool local__echo ${JSON.stringify({ text: "hi" })}`)
        const echo = toolCall(echoed)
        assert.deepStrictEqual(echo.result.content, [{ type: "text", text: "echo: hi" }])
        // The call carries its idempotency key, the run and the call's place in it (step 1, call 0): the same on every
        // try of it.
        const runId = echoed.events.find((e) => e.event === "run.created")?.data.run_id
        assert.match(String(runId), /^run_/)
        assert.strictEqual(seen[0]?.key, `${runId}:1/0`)
        const who = toolCall(yield* runAgent(alice, agent, "/tool local__whoami {}"))
        assert.strictEqual(who.result.content[0].text, "Bearer alice-secret-token-1234")

        const bobWho = toolCall(yield* runAgent(bob, agent, "/tool local__whoami {}"))
        assert.strictEqual(bobWho.failed.code, "credential_required")
        assert.isTrue(seen.every((call) => call.authorization === "Bearer alice-secret-token-1234"), "bob's call never reached the server")

        const denied = toolCall(yield* runAgent(alice, agent, "/tool local__erase {}"))
        assert.strictEqual(denied.denied.reason, "denied by the agent's tool policy")
        assert.isFalse(seen.some((call) => call.tool === "erase"))

        const broken = toolCall(yield* runAgent(alice, agent, "/tool local__broken {}"))
        assert.strictEqual(broken.failed.code, "mcp_tool_error")
        assert.match(broken.failed.error, /the backend is down/)

        const live = yield* openRun(alice, agent, `/tool local__add ${JSON.stringify({ a: 2, b: 3 })}`)
        const asked = yield* live.until("approval.required")
        const required = only(asked, "approval.required")
        assert.strictEqual(required.name, "local__add")
        assert.isFalse(seen.some((call) => call.tool === "add"), "an ask tool waits for the approval")
        const approved = yield* answer(alice, required.approval_id, { decision: "approve" })
        assert.strictEqual(approved.status, 200, approved.text)
        const added = toolCall(yield* live.rest)
        assert.strictEqual(added.result.content[0].text, "5")

        // An id of another kind is no credential of theirs (404), and removes nothing.
        const wrongKind = yield* request("DELETE", `/v1/credentials/run_${stored.body.id.slice("cred_".length)}`, { token: key.key, headers: { "x-end-user-id": "alice" } })
        assert.strictEqual(wrongKind.status, 404, wrongKind.text)
        const removed = yield* request("DELETE", `/v1/credentials/${stored.body.id}`, { token: key.key, headers: { "x-end-user-id": "alice" } })
        assert.strictEqual(removed.status, 200, removed.text)
        const gone = toolCall(yield* runAgent(alice, agent, "/tool local__whoami {}"))
        assert.strictEqual(gone.failed.code, "credential_required")
      }).pipe(Effect.scoped))

    it.effect("private, link-local and metadata addresses are refused, redirects included", () =>
      Effect.gen(function*() {
        const http = yield* startMcpServer
        const user = yield* newUser
        const agent = yield* agentWith(user.token, {}, {
          mcp_servers: [
            { name: "metadata", url: "http://169.254.169.254/mcp", auth: "none", tools: [{ name: "echo", permission: "allow" }] },
            { name: "private", url: "http://10.1.2.3:8080/mcp", auth: "none", tools: [{ name: "echo", permission: "allow" }] },
            { name: "bounce", url: urlOf(http, "/redirect"), auth: "none", tools: [{ name: "echo", permission: "allow" }] }
          ]
        })
        const as = { token: user.token }
        for (const server of ["metadata", "private", "bounce"]) {
          const outcome = toolCall(yield* runAgent(as, agent, `/tool ${server}__echo ${JSON.stringify({ text: "x" })}`))
          assert.strictEqual(outcome.failed.code, "mcp_unavailable", server)
          assert.match(outcome.failed.error, /private address/, server)
        }
        assert.isTrue(isPrivateAddress("::ffff:127.0.0.1"))
        assert.isTrue(isPrivateAddress("fd00:ec2::254"))
        assert.isFalse(isPrivateAddress("93.184.216.34"))
      }).pipe(Effect.scoped))

    it.effect("mcp_servers is checked: a bad URL or a duplicate name is a 400 naming the field", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const bad = yield* request("POST", "/v1/agents", {
          token: user.token,
          body: { name: "x", mcp_servers: [{ name: "a", url: "ftp://x", auth: "none", tools: [] }] }
        })
        assert.strictEqual(bad.status, 400, bad.text)
        assert.match(bad.body.error.message, /mcp_servers/)
        const twice = yield* request("POST", "/v1/agents", {
          token: user.token,
          body: {
            name: "x",
            mcp_servers: [
              { name: "a", url: "https://example.com/mcp", auth: "none", tools: [] },
              { name: "a", url: "https://example.com/mcp2", auth: "none", tools: [] }
            ]
          }
        })
        assert.strictEqual(twice.status, 400, twice.text)
        assert.match(twice.body.error.message, /mcp_servers/)
      }))

    it.effect("the owner reads an expert's mcp_servers back as saved (what the studio edits)", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const servers = [{ name: "search", url: "https://example.com/mcp", auth: "per_end_user", tools: [{ name: "lookup", permission: "ask" }] }]
        const created = yield* request("POST", "/v1/agents", { token: user.token, body: { name: "Remote", mcp_servers: servers } })
        assert.strictEqual(created.status, 201, created.text)
        assert.deepStrictEqual(created.body.mcp_servers, servers)
        const read = yield* request("GET", `/v1/agents/${created.body.identifier}`, { token: user.token })
        assert.deepStrictEqual(read.body.mcp_servers, servers)
        const cleared = yield* request("PATCH", `/v1/agents/${created.body.identifier}`, { token: user.token, body: { mcp_servers: [] } })
        assert.strictEqual(cleared.status, 200, cleared.text)
        assert.deepStrictEqual(cleared.body.mcp_servers, [])
      }))
  })
})
