import { assert } from "@effect/vitest"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js"
import { Effect } from "effect"
import { TestServer } from "../support/TestServer.js"

/**
 * The tool server through the official MCP client (`Client` + `StreamableHTTPClientTransport`), against the real
 * server of the test file. Credentials go in `requestInit.headers`, as an IDE configures them.
 */

export { ENV, LIVE, newUser, type User } from "../agents/agents-support.js"

export type Credentials =
  | { readonly bearer: string }
  | { readonly cookie: string }
  | { readonly headers: Record<string, string> }
  | undefined

const headersOf = (credentials: Credentials): Record<string, string> => {
  if (credentials === undefined) return {}
  if ("bearer" in credentials) return { authorization: `Bearer ${credentials.bearer}` }
  if ("cookie" in credentials) return { cookie: `token=${credentials.cookie}` }
  return credentials.headers
}

/** A connected client (initialize done), closed with the scope. */
export const connect = (credentials?: Credentials, path = "/mcp") =>
  Effect.gen(function*() {
    const server = yield* TestServer
    return yield* Effect.acquireRelease(
      Effect.promise(async () => {
        const client = new Client({ name: "atrium-test", version: "1.0.0" })
        const transport = new StreamableHTTPClientTransport(new URL(server.url + path), {
          requestInit: { headers: headersOf(credentials) }
        })
        await client.connect(transport)
        // As an IDE does: the client keeps each tool's outputSchema and checks every result's structuredContent
        // against it (a mismatch throws), so every tool call of the MCP tests checks the declared shapes.
        await client.listTools()
        return client
      }),
      (client) => Effect.promise(() => client.close())
    )
  })

/** One tool call, as the IDE makes it; the result whatever it is. */
export const call = (client: Client, name: string, args: Record<string, unknown> = {}) =>
  Effect.promise(() => client.callTool({ name, arguments: args }) as Promise<CallToolResult>)

/** A successful result: its JSON text parsed, checked to equal the structured content when that is an object. */
export const ok = (result: CallToolResult): any => {
  assert.notStrictEqual(result.isError, true, JSON.stringify(result))
  assert.strictEqual(result.content.length, 1, JSON.stringify(result))
  const item = result.content[0]!
  assert.strictEqual(item.type, "text")
  const value = JSON.parse((item as { text: string }).text)
  if (typeof value === "object" && value !== null && !Array.isArray(value)) {
    assert.deepStrictEqual(result.structuredContent, value)
  }
  return value
}

/** A tool error result (`isError: true`) whose text contains `includes`; returns the text. */
export const failed = (result: CallToolResult, includes?: string): string => {
  assert.strictEqual(result.isError, true, JSON.stringify(result))
  const text = (result.content[0] as { text: string }).text
  assert.isString(text)
  if (includes !== undefined) assert.include(text, includes)
  return text
}

/** The calling, and an ok result in one step. */
export const callOk = (client: Client, name: string, args: Record<string, unknown> = {}) =>
  Effect.map(call(client, name, args), ok)

/** Rows of a count query (`count(*)::int AS n`). */
export const count = (table: string) =>
  Effect.flatMap(TestServer, (server) =>
    Effect.map(server.query(`SELECT count(*)::int AS n FROM ${table}`), (rows) => Number(rows[0]!.n)))
