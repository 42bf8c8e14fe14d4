import * as Response from "@effect/ai/Response"
import * as Tool from "@effect/ai/Tool"

/**
 * What every provider adapter (Bedrock, Gemini, Chat Completions, the builtin model) builds the same way: a tool's
 * description and parameters' JSON Schema to send, and the encoded stream parts that open and close a text or reasoning
 * block.
 */

/**
 * `Tool.getDescription` and `Tool.getJsonSchema` are typed for one tool's exact `Tool<Name, Config>`, while a model
 * call's options hold `Tool.Any`; both read only the fields below, so these take `Tool.Any` without a cast.
 */
export const toolDescription = (tool: Tool.Any): string | undefined =>
  tool.description ?? Tool.getDescriptionFromSchemaAst(tool.parametersSchema.ast)

export const toolParameters = (tool: Tool.Any) => Tool.getJsonSchemaFromSchemaAst(tool.parametersSchema.ast)

export type BlockKind = "text" | "reasoning"

export const blockStart = (kind: BlockKind, id: string): Response.StreamPartEncoded =>
  kind === "text" ? { type: "text-start", id } : { type: "reasoning-start", id }

export const blockDelta = (kind: BlockKind, id: string, delta: string): Response.StreamPartEncoded =>
  kind === "text" ? { type: "text-delta", id, delta } : { type: "reasoning-delta", id, delta }

export const blockEnd = (kind: BlockKind, id: string): Response.StreamPartEncoded =>
  kind === "text" ? { type: "text-end", id } : { type: "reasoning-end", id }
