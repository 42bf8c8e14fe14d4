import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js"
import { Tool } from "@effect/ai"
import { Data, type Effect, Either, ParseResult, Schema, SchemaAST as AST } from "effect"
import type { ApiKeyId, UserId } from "../platform/Ids.js"

/** Who calls a tool: the user behind the login token or API key of the request (spec 5.4). */
export interface McpCaller {
  readonly userId: UserId
  readonly via: "login" | "api_key"
  /** The API key used, when one was: billed runs (test_expert) may want to attribute their cost to it. */
  readonly apiKeyId: ApiKeyId | undefined
}

/**
 * Why a tool did not do its work. It reaches the IDE as a tool result with `isError: true` (never a JSON-RPC error):
 * the model in the IDE reads the message and can correct itself, which it cannot do with a transport failure.
 * `type` is the platform's error type (`not_found`, `forbidden`, `invalid_request`, `unauthorized`, ...).
 */
export class ToolFailure extends Data.TaggedError("ToolFailure")<{
  readonly type: string
  readonly message: string
}> {}

/**
 * One row of the tool table. `identity: "required"` tools never run without a caller (spec 5.4, rule 10 of 4.10);
 * their `run` receives it. `input` is an Effect Schema struct, made of the HTTP contracts' own field schemas where
 * the same thing is asked over HTTP (one source of limits): published as the tool's JSON Schema (`inputSchemaOf`,
 * `additionalProperties: false`) and checked by `decodeInput` before `run` is called.
 */
export type ToolDefinition = {
  readonly name: string
  readonly description: string
  readonly input: Schema.Schema<any, any, never>
  readonly identity: "required" | "none"
  readonly run: (args: any, caller: McpCaller | undefined) => Effect.Effect<unknown, ToolFailure>
}

/** A tool that needs a caller; `args` is typed by its schema. */
export const userTool = <A, I>(
  name: string,
  description: string,
  input: Schema.Schema<A, I, never>,
  run: (args: A, caller: McpCaller) => Effect.Effect<unknown, ToolFailure>
): ToolDefinition => ({
  name,
  description,
  input,
  identity: "required",
  run: (args, caller) => run(args, caller!)
})

/** A tool anyone may call (only `browse_marketplace`, spec 4.10 rule 10). */
export const publicTool = <A, I>(
  name: string,
  description: string,
  input: Schema.Schema<A, I, never>,
  run: (args: A) => Effect.Effect<unknown, ToolFailure>
): ToolDefinition => ({ name, description, input, identity: "none", run: (args) => run(args) })

/**
 * A schema as MCP publishes it (`inputSchema`, `outputSchema`): JSON Schema of what a caller sends (the encoded
 * side: a field with a default is optional), named sub-schemas under `$defs`, as `@effect/ai` does for model tools.
 */
export const jsonSchemaOf = (schema: Schema.Schema.Any): { readonly type: "object"; readonly [key: string]: unknown } => {
  const ast = schema.ast
  // An empty struct is "any object or array" to Effect (`{}` in TypeScript); to a tool it is no parameters.
  if (AST.isTypeLiteral(ast) && ast.propertySignatures.length === 0 && ast.indexSignatures.length === 0) {
    return { type: "object", properties: {}, additionalProperties: false }
  }
  return withoutIds(Tool.getJsonSchemaFromSchemaAst(ast)) as { readonly type: "object" }
}

/**
 * Effect marks `unknown` (`{"$id": "/schemas/unknown"}`) and the like with an `$id`; an `$id` seen twice in one
 * schema makes a validator (the SDK client's Ajv) refuse the whole schema, so they go.
 */
const withoutIds = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.map(withoutIds)
  if (typeof value !== "object" || value === null) return value
  return Object.fromEntries(Object.entries(value).filter(([key]) => key !== "$id").map(([key, v]) => [key, withoutIds(v)]))
}

/** "path: problem; ..." for every issue of a failed decoding (one per path; a union's alternatives joined). */
export const describeIssues = (error: ParseResult.ParseError): string => {
  const byPath = new Map<string, Array<string>>()
  for (const issue of ParseResult.ArrayFormatter.formatErrorSync(error)) {
    const path = issue.path.length > 0 ? issue.path.join(".") : "arguments"
    byPath.set(path, [...(byPath.get(path) ?? []), issue.message])
  }
  return [...byPath].map(([path, messages]) => `${path}: ${messages.join("; or ")}`).join("; ")
}

/**
 * A tool's arguments checked against its input schema: unknown fields are refused (the published schema says
 * `additionalProperties: false`), defaults filled in. A failure is the caller's `invalid_request`, a tool result
 * naming each field at fault, so the model in the IDE can correct its call.
 */
export const decodeInput = (tool: ToolDefinition, args: unknown): Either.Either<unknown, ToolFailure> =>
  Either.mapLeft(
    Schema.decodeUnknownEither(tool.input, { onExcessProperty: "error", errors: "all" })(args ?? {}),
    (error) =>
      new ToolFailure({
        type: "invalid_request",
        message: `Input validation error: Invalid arguments for tool ${tool.name}: ${describeIssues(error)}`
      })
  )

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** JSON as text for every client, and as `structuredContent` for those that read it (objects only, per MCP). */
export const toolSuccess = (value: unknown): CallToolResult => ({
  content: [{ type: "text", text: JSON.stringify(value) }],
  ...(isRecord(value) ? { structuredContent: value } : {})
})

/** Where a tool error result carries the platform's error body (`_meta`, MCP's room for extensions). */
export const ERROR_META = "atrium/error"

/**
 * The message as text (what a model reads), and the platform's error body in `_meta["atrium/error"]`. Not as
 * `structuredContent`: every tool declares an `outputSchema`, and the SDK's client checks any `structuredContent`
 * against it, an error's too, so an error body there would make the client throw instead of showing the message.
 */
export const toolError = (type: string, message: string): CallToolResult => ({
  content: [{ type: "text", text: message }],
  isError: true,
  _meta: { [ERROR_META]: { type, message } }
})
