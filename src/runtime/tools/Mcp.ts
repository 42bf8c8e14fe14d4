import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { Effect, Option, Redacted, Schema } from "effect"
import { Credentials } from "../../credentials/Credentials.js"
import type { ExpertConfig, McpServer } from "../Expert.js"
import { ToolsConfig } from "./Config.js"
import { SafeFetch } from "./Outbound.js"
import { lenientTool, ToolFailure } from "./Tools.js"
import type { Partition } from "../../identity/Partition.js"
import type { UserId } from "../../platform/Ids.js"

/**
 * Tools from an expert's remote MCP servers (docs/tools.md), through the official SDK client over Streamable HTTP.
 * A run connects to each server once, lists its tools and offers the ones the expert listed, with the server's own
 * input schemas, as `<server>__<tool>`. Every failure of a server (unreachable, refused address, missing credential,
 * error result, timeout, malformed answer) is the call's failure (`tool_call.failed`), never the run's.
 */

export const MCP_SEPARATOR = "__"
/** Where a tool call's idempotency key travels: the request's `_meta` (MCP's place for what is not an argument). */
export const IDEMPOTENCY_META = "atrium/idempotency_key"

const ANY_OBJECT = Schema.Struct({}, Schema.Record({ key: Schema.String, value: Schema.Unknown }))


interface Connection {
  readonly server: McpServer
  readonly client: Option.Option<Client>
  /** Why there is no client: the calls fail with it. */
  readonly failure: Option.Option<ToolFailure>
  readonly schemas: ReadonlyMap<string, { readonly description: string; readonly inputSchema: unknown }>
}

/** A run's view of its remote tools. */
export interface RemoteTools {
  readonly definitions: Record<string, ReturnType<typeof lenientTool>>
  readonly policies: ReadonlyMap<string, "allow" | "ask" | "deny">
  readonly has: (name: string) => boolean
  /**
   * `key`: the call's idempotency key, the same on every try of the call (a durable run's tool step tried again after
   * a kill or an outage runs its tool again): the server may answer a key it has seen from what it did then.
   */
  readonly call: (name: string, params: unknown, key: string) => Effect.Effect<unknown, ToolFailure>
  readonly close: Effect.Effect<void>
}

const messageOf = (error: unknown) => {
  const text = error instanceof Error ? error.message : String(error)
  return text.slice(0, 1000)
}

export class McpTools extends Effect.Service<McpTools>()("atrium/runtime/tools/McpTools", {
  effect: Effect.gen(function*() {
    const credentials = yield* Credentials
    const safeFetch = yield* SafeFetch
    const { mcpTimeoutMs: timeoutMs } = yield* ToolsConfig

    /** Whose credential a server gets: none, the expert owner's (`bearer`), or the caller's end user's. */
    const tokenFor = (server: McpServer, payer: Partition, ownerId: UserId) =>
      Effect.gen(function*() {
        if (server.auth === "none") return Option.some(Option.none<Redacted.Redacted<string>>())
        const owner = server.auth === "bearer" ? { accountId: ownerId, endUserId: "" } : payer
        const secret = yield* credentials.secretFor(owner, server.url)
        return Option.map(secret, Option.some)
      })

    const connect = (server: McpServer, payer: Partition, ownerId: UserId): Effect.Effect<Connection> =>
      Effect.gen(function*() {
        const none = (failure: ToolFailure): Connection => ({ server, client: Option.none(), failure: Option.some(failure), schemas: new Map() })
        const token = yield* tokenFor(server, payer, ownerId)
        if (Option.isNone(token)) {
          return none(new ToolFailure({
            code: "credential_required",
            message: server.auth === "per_end_user"
              ? `credential_required: store your token for ${server.url} with POST /v1/credentials first.`
              : `credential_required: the expert's owner has not stored a token for ${server.url}.`
          }))
        }
        const headers: Record<string, string> = Option.match(token.value, {
          onNone: () => ({}),
          onSome: (secret) => ({ authorization: `Bearer ${Redacted.value(secret)}` })
        })
        const client = new Client({ name: "atrium", version: "0.1.0" })
        const transport = new StreamableHTTPClientTransport(new URL(server.url), {
          fetch: safeFetch,
          requestInit: { headers }
        })
        const listed = yield* Effect.tryPromise({
          try: async () => {
            await client.connect(transport, { timeout: timeoutMs })
            const tools = new Map<string, { description: string; inputSchema: unknown }>()
            let cursor: string | undefined
            for (let page = 0; page < 10; page++) {
              const result = await client.listTools(cursor === undefined ? undefined : { cursor }, { timeout: timeoutMs })
              for (const tool of result.tools) tools.set(tool.name, { description: tool.description ?? "", inputSchema: tool.inputSchema })
              cursor = result.nextCursor
              if (cursor === undefined) break
            }
            return tools
          },
          catch: (error) => new ToolFailure({ code: "mcp_unavailable", message: `The MCP server ${server.name} is not reachable: ${messageOf(error)}` })
        }).pipe(Effect.timeoutFail({
          duration: timeoutMs + 1000,
          onTimeout: () => new ToolFailure({ code: "mcp_timeout", message: `The MCP server ${server.name} did not answer in time.` })
        }), Effect.either)
        if (listed._tag === "Left") {
          yield* Effect.promise(() => client.close().catch(() => undefined))
          return none(listed.left)
        }
        return { server, client: Option.some(client), failure: Option.none(), schemas: listed.right }
      }).pipe(Effect.withSpan("McpTools.connect", { attributes: { server: server.name } }))

    /** Connects to the expert's servers (all at once) and describes their listed tools to the model. */
    const open = (config: ExpertConfig, payer: Partition, ownerId: UserId) =>
      Effect.gen(function*() {
        const servers = config.mcp_servers ?? []
        const connections = yield* Effect.forEach(servers, (server) => connect(server, payer, ownerId), { concurrency: "unbounded" })
        const definitions: Record<string, ReturnType<typeof lenientTool>> = {}
        const policies = new Map<string, "allow" | "ask" | "deny">()
        const routes = new Map<string, { connection: Connection; tool: string }>()
        for (const connection of connections) {
          for (const tool of connection.server.tools) {
            const name = `${connection.server.name}${MCP_SEPARATOR}${tool.name}`
            const schema = connection.schemas.get(tool.name)
            const parameters = schema === undefined
              ? ANY_OBJECT
              : ANY_OBJECT.annotations({ jsonSchema: schema.inputSchema as object })
            definitions[name] = lenientTool(
              name,
              schema?.description ?? `The ${tool.name} tool of the MCP server ${connection.server.name}.`,
              parameters
            )
            policies.set(name, tool.permission)
            routes.set(name, { connection, tool: tool.name })
          }
        }

        const call = (name: string, params: unknown, key: string) =>
          Effect.gen(function*() {
            const route = routes.get(name)
            if (route === undefined) return yield* new ToolFailure({ message: `Unknown tool ${name}.` })
            const { connection, tool } = route
            if (Option.isSome(connection.failure)) return yield* connection.failure.value
            if (Option.isNone(connection.client)) return yield* new ToolFailure({ message: "not connected" })
            if (connection.schemas.size > 0 && !connection.schemas.has(tool)) {
              return yield* new ToolFailure({ code: "mcp_unknown_tool", message: `The MCP server ${connection.server.name} has no tool ${tool}.` })
            }
            const client = connection.client.value
            const args = typeof params === "object" && params !== null && !Array.isArray(params) ? params as Record<string, unknown> : {}
            const result = yield* Effect.tryPromise({
              try: () => client.callTool({ name: tool, arguments: args, _meta: { [IDEMPOTENCY_META]: key } }, undefined, { timeout: timeoutMs }),
              catch: (error) => new ToolFailure({ code: "mcp_error", message: `The MCP server ${connection.server.name} failed: ${messageOf(error)}` })
            }).pipe(Effect.timeoutFail({
              duration: timeoutMs + 1000,
              onTimeout: () => new ToolFailure({ code: "mcp_timeout", message: `The MCP server ${connection.server.name} did not answer in time.` })
            }))
            const content = Array.isArray(result.content) ? result.content : []
            const text = content.filter((part: any) => part?.type === "text").map((part: any) => String(part.text)).join("\n")
            if (result.isError === true) {
              return yield* new ToolFailure({ code: "mcp_tool_error", message: text.length > 0 ? text.slice(0, 4000) : `${name} failed.` })
            }
            return result.structuredContent !== undefined ? { content, structured: result.structuredContent } : { content }
          }).pipe(Effect.withSpan("McpTools.call", { attributes: { tool: name } }))

        const close = Effect.forEach(connections, (connection) =>
          Option.match(connection.client, {
            onNone: () => Effect.void,
            onSome: (client) => Effect.promise(() => client.close().catch(() => undefined))
          }), { discard: true })

        return { definitions, policies, has: (name: string) => routes.has(name), call, close } satisfies RemoteTools
      })

    return { open } as const
  }),
  dependencies: [Credentials.Default, ToolsConfig.Default]
}) {}
