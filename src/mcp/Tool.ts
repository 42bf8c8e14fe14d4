import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js"
import { Data, type Effect } from "effect"
import type { z } from "zod"
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
 * their `run` receives it. `input` is a strict zod object: the SDK publishes it as the tool's JSON Schema
 * (`additionalProperties: false`) and validates arguments with it before `run` is called.
 */
export type ToolDefinition = {
  readonly name: string
  readonly description: string
  readonly input: z.ZodObject
  readonly identity: "required" | "none"
  readonly run: (args: any, caller: McpCaller | undefined) => Effect.Effect<unknown, ToolFailure>
}

/** A tool that needs a caller; `args` is typed by its schema. */
export const userTool = <S extends z.ZodObject>(
  name: string,
  description: string,
  input: S,
  run: (args: z.output<S>, caller: McpCaller) => Effect.Effect<unknown, ToolFailure>
): ToolDefinition => ({
  name,
  description,
  input,
  identity: "required",
  run: (args, caller) => run(args, caller!)
})

/** A tool anyone may call (only `browse_marketplace`, spec 4.10 rule 10). */
export const publicTool = <S extends z.ZodObject>(
  name: string,
  description: string,
  input: S,
  run: (args: z.output<S>) => Effect.Effect<unknown, ToolFailure>
): ToolDefinition => ({ name, description, input, identity: "none", run: (args) => run(args) })

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
