import { assert, describe, layer } from "@effect/vitest"
import { McpError } from "@modelcontextprotocol/sdk/types.js"
import { Effect } from "effect"
import { createAgent } from "../agents/agents-support.js"
import { TestServer } from "../support/TestServer.js"
import { connect, ENV, LIVE, newUser } from "./mcp-support.js"

/**
 * Issue 44 gap 3, through the official MCP client: reading an unknown resource is invalid params (-32602), not an
 * internal error; its message carries the SDK's `MCP error -32602:` prefix once; reading the caller's things without
 * a credential is HTTP 401 with `WWW-Authenticate`.
 */

const rejection = (promise: () => Promise<unknown>) =>
  Effect.promise(() => promise().then(() => assert.fail("expected a rejection"), (error: unknown) => error))

describe("MCP errors", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.scoped("an unknown resource is -32602 with one prefix; another's expert too", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const other = yield* newUser
        const theirs = yield* createAgent(other.token, { name: "Theirs" })
        const client = yield* connect({ bearer: user.token })
        for (const uri of ["atrium://experts/no-such-expert", `atrium://experts/${theirs.identifier}/runs`, "atrium://nothing/here"]) {
          const error = yield* rejection(() => client.readResource({ uri }))
          assert.instanceOf(error, McpError, uri)
          assert.strictEqual((error as McpError).code, -32602, uri)
          assert.strictEqual((error as McpError).message.match(/MCP error/g)?.length, 1, (error as McpError).message)
        }
      }))

    it.scoped("resources/list without a credential is HTTP 401 with WWW-Authenticate", () =>
      Effect.gen(function*() {
        const anonymous = yield* connect()
        const error = yield* rejection(() => anonymous.listResources())
        assert.strictEqual((error as any).code, 401, String(error))
        const server = yield* TestServer
        const raw = yield* Effect.promise(() =>
          fetch(`${server.url}/mcp`, {
            method: "POST",
            headers: { "content-type": "application/json", accept: "application/json, text/event-stream", authorization: "Bearer sk_wrong-key-0123456789" },
            body: JSON.stringify({ jsonrpc: "2.0", id: 7, method: "resources/list", params: {} })
          }).then(async (response) => ({ status: response.status, header: response.headers.get("www-authenticate"), body: (await response.json()) as { id: unknown } }))
        )
        assert.strictEqual(raw.status, 401)
        assert.strictEqual(raw.header, "Bearer realm=\"atrium\"")
        assert.strictEqual(raw.body.id, 7)
        // What needs no identity still works without one.
        assert.isAbove((yield* Effect.promise(() => anonymous.listTools())).tools.length, 20)
      }))
  })
})
