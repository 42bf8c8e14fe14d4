import type * as Prompt from "@effect/ai/Prompt"
import type { SessionRow } from "./Rows.js"

/** Sessions and their history as clients read them (spec 4.2). */

/** A session as the API shows it. */
export const sessionView = (session: SessionRow) => ({
  id: session.id,
  agent: session.agentIdentifier,
  status: session.status,
  end_user_id: session.endUserId === "" ? null : session.endUserId,
  environment_id: session.environmentId,
  title: session.title,
  metadata: session.metadata,
  created_at: session.createdAt.toISOString(),
  updated_at: session.updatedAt.toISOString()
})

const textOf = (content: Prompt.MessageEncoded["content"]) =>
  typeof content === "string"
    ? content
    : (content as ReadonlyArray<{ type: string; text?: string }>).flatMap((part) => part.type === "text" ? [part.text ?? ""] : []).join("")

/** The start of the last message with text (the answer, or the question of a turn that has none), one line. */
export const preview = (messages: ReadonlyArray<Prompt.MessageEncoded>): string | null => {
  for (const message of [...messages].reverse()) {
    if (message.role !== "user" && message.role !== "assistant") continue
    const text = textOf(message.content).replace(/\s+/g, " ").trim()
    if (text !== "") return text.length > 140 ? `${text.slice(0, 139)}…` : text
  }
  return null
}

/** A history message as a client reads it: the text, and the tool calls and results where there are any. */
export const messageView = (turn: number) => (message: Prompt.MessageEncoded) => {
  const parts = typeof message.content === "string" ? [] : (message.content as ReadonlyArray<any>)
  const toolCalls = parts.filter((part) => part.type === "tool-call").map((part) => ({ id: part.id, name: part.name, arguments: part.params }))
  const toolResults = parts.filter((part) => part.type === "tool-result").map((part) => ({
    id: part.id,
    name: part.name,
    is_error: part.isFailure === true,
    output: part.result
  }))
  return {
    turn,
    role: message.role,
    content: textOf(message.content),
    ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
    ...(toolResults.length > 0 ? { tool_results: toolResults } : {})
  }
}
