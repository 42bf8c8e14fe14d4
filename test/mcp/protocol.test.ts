import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as Http from "node:http"
import { TestServer } from "../support/TestServer.js"
import { connect, ENV, LIVE, newUser } from "./mcp-support.js"

/**
 * Issue 30 item 6 (part): the tool server to the protocol's rules that the SDK leaves to a server: titles and
 * annotations on every tool, `listChanged` not advertised (nothing notifies), an unknown tool and a bogus cursor
 * are JSON-RPC -32602, and Host/Origin are checked against DNS rebinding (403).
 */

const rpc = (body: unknown, headers: Record<string, string> = {}) =>
  Effect.flatMap(TestServer, (server) =>
    Effect.promise(async () => {
      const reply = await fetch(`${server.url}/mcp`, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers },
        body: JSON.stringify(body)
      })
      return { status: reply.status, body: await reply.json() as any }
    }))

const initialize = {
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } }
}

describe("MCP protocol rules", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.scoped("titles and annotations; no listChanged; unknown tool and cursor are -32602", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const client = yield* connect({ bearer: user.token })
        assert.isFalse(client.getServerCapabilities()?.tools?.listChanged ?? false)
        const { tools } = yield* Effect.promise(() => client.listTools())
        assert.isAtLeast(tools.length, 22)
        for (const tool of tools) {
          assert.isString(tool.title, tool.name)
          assert.isBoolean(tool.annotations?.readOnlyHint, tool.name)
          // Every tool declares the shape of its structuredContent (the client checks each result against it).
          assert.strictEqual(tool.outputSchema?.type, "object", tool.name)
        }
        const browse = tools.find((tool) => tool.name === "browse_marketplace")!
        assert.deepInclude(browse.annotations as object, { readOnlyHint: true, destructiveHint: false })
        const update = tools.find((tool) => tool.name === "update_expert")!
        assert.deepInclude(update.annotations as object, { readOnlyHint: false, destructiveHint: true, idempotentHint: true })

        const unknown = yield* rpc({ jsonrpc: "2.0", id: 7, method: "tools/call", params: { name: "rm_rf", arguments: {} } }, {
          authorization: `Bearer ${user.token}`
        })
        assert.strictEqual(unknown.body.error.code, -32602)
        assert.strictEqual(unknown.body.id, 7)
        const cursor = yield* rpc({ jsonrpc: "2.0", id: 8, method: "tools/list", params: { cursor: "bogus" } })
        assert.strictEqual(cursor.body.error.code, -32602)
      }))

    it.effect("Host and Origin: another site's are refused with 403", () =>
      Effect.gen(function*() {
        const evilOrigin = yield* rpc(initialize, { origin: "https://evil.example" })
        assert.strictEqual(evilOrigin.status, 403)
        // fetch will not send another Host; node:http does, as a rebinding browser's request would carry it.
        const server = yield* TestServer
        const evilHost = yield* Effect.async<number>((resume) => {
          const target = new URL(`${server.url}/mcp`)
          const body = JSON.stringify(initialize)
          const sent = Http.request({
            host: target.hostname,
            port: target.port,
            path: target.pathname,
            method: "POST",
            headers: { host: "evil.example", "content-type": "application/json", accept: "application/json, text/event-stream" }
          }, (reply) => {
            reply.resume()
            resume(Effect.succeed(reply.statusCode ?? 0))
          })
          sent.end(body)
        })
        assert.strictEqual(evilHost, 403)
        const fine = yield* rpc(initialize, { origin: "http://localhost:3000" })
        assert.strictEqual(fine.status, 200, JSON.stringify(fine.body))
      }))
    it.scoped("resources (the caller's experts), a template whose identifier completes, prompts, logging/setLevel", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const client = yield* connect({ bearer: user.token })
        const created = yield* Effect.promise(() =>
          client.callTool({ name: "create_expert", arguments: { name: "Resource probe", description: "d", category: "other" } })
        )
        const identifier = (created.structuredContent as { identifier: string }).identifier
        const before = yield* Effect.promise(() => client.listResources())
        assert.deepStrictEqual(before.resources.map((r) => r.uri), [`atrium://experts/${identifier}`, `atrium://experts/${identifier}/runs`])
        const read = yield* Effect.promise(() => client.readResource({ uri: `atrium://experts/${identifier}` }))
        assert.strictEqual(JSON.parse((read.contents[0] as { text: string }).text).identifier, identifier)
        const { resourceTemplates } = yield* Effect.promise(() => client.listResourceTemplates())
        assert.deepStrictEqual(resourceTemplates.map((t) => t.uriTemplate), [
          "atrium://experts/{identifier}",
          "atrium://experts/{identifier}/versions/{version}",
          "atrium://experts/{identifier}/runs"
        ])

        // Its versions (one per publish) and its last runs, as JSON resources.
        yield* Effect.promise(() => client.callTool({ name: "publish_expert", arguments: { identifier } }))
        yield* Effect.promise(() => client.callTool({ name: "test_expert", arguments: { identifier, message: "/fail broke" } }))
        yield* Effect.promise(() => client.callTool({ name: "test_expert", arguments: { identifier, message: "hello" } }))
        const { resources } = yield* Effect.promise(() => client.listResources())
        const version = `atrium://experts/${identifier}/versions/1`
        assert.deepStrictEqual(resources.map((r) => r.uri), [`atrium://experts/${identifier}`, version, `atrium://experts/${identifier}/runs`])
        const readJson = (uri: string) =>
          Effect.map(Effect.promise(() => client.readResource({ uri })), (result) => {
            assert.strictEqual(result.contents[0]!.mimeType, "application/json")
            return JSON.parse((result.contents[0] as { text: string }).text)
          })
        const v1 = yield* readJson(version)
        assert.deepInclude(v1, { identifier, version: 1, published: false, name: "Resource probe", category: "other" })
        assert.strictEqual(v1.submission.status, "pending")
        assert.notProperty(v1, "instructions", "prompt layers stay out of the tools (rule 2)")
        const runs = yield* readJson(`atrium://experts/${identifier}/runs`)
        assert.deepStrictEqual(runs.data.map((r: any) => [r.status, r.error_code, r.by_you]), [["completed", null, true], ["failed", "model_error", true]])
        assert.isFalse(runs.has_more)
        const missing = yield* Effect.promise(() => client.readResource({ uri: `atrium://experts/${identifier}/versions/9` }).then(() => undefined, (e: unknown) => e))
        assert.instanceOf(missing, Error)
        const versionCompletion = yield* Effect.promise(() =>
          client.complete({
            ref: { type: "ref/resource", uri: "atrium://experts/{identifier}/versions/{version}" },
            argument: { name: "version", value: "" },
            context: { arguments: { identifier } }
          })
        )
        assert.deepStrictEqual(versionCompletion.completion.values, ["1"])
        // Another user reads none of it.
        const other = yield* newUser
        const stranger = yield* connect({ bearer: other.token })
        assert.deepStrictEqual((yield* Effect.promise(() => stranger.listResources())).resources, [])
        const refused = yield* Effect.promise(() => stranger.readResource({ uri: `atrium://experts/${identifier}/runs` }).then(() => undefined, (e: unknown) => e))
        assert.instanceOf(refused, Error)
        const completion = yield* Effect.promise(() =>
          client.complete({
            ref: { type: "ref/resource", uri: "atrium://experts/{identifier}" },
            argument: { name: "identifier", value: identifier.slice(0, 3) }
          })
        )
        assert.include(completion.completion.values, identifier)
        const { prompts } = yield* Effect.promise(() => client.listPrompts())
        assert.sameMembers(prompts.map((p) => p.name), ["create_expert_from_description", "improve_expert_from_runs"])
        const prompt = yield* Effect.promise(() => client.getPrompt({ name: "improve_expert_from_runs", arguments: { identifier } }))
        assert.include(JSON.stringify(prompt.messages), identifier)
        yield* Effect.promise(() => client.setLoggingLevel("warning"))
      }))
  })
})
