import type * as LanguageModel from "@effect/ai/LanguageModel"
import type * as Prompt from "@effect/ai/Prompt"
import { Effect, Either } from "effect"
import { fromResponseFormat } from "../runtime/models/OutputFormat.js"
import { DELEGATE_TOOL } from "../runtime/models/Builtin.js"
import type { ClientTool, RunnableAgent } from "../runtime/Run.js"
import { InvalidRequest } from "../platform/Errors.js"
import type { ChatPayload } from "./Api.js"

/**
 * What OpenAI's request shapes mean to a run: the conversation a Chat Completions request carries, the caller's
 * function tools, and the parameters the platform cannot honour (refused, never ignored).
 */

const invalid = (param: string, message: string) => new InvalidRequest({ message: `Invalid request: ${param}: ${message}`, param })

type Message = ChatPayload["messages"][number]

/** Parameters asking for what a run cannot give: a 400 naming the parameter. */
export const refuseUnsupported = (payload: ChatPayload) =>
  Effect.gen(function*() {
    if (payload.n != null && payload.n !== 1) return yield* invalid("n", "only one choice (n: 1) is supported")
    if (payload.logprobs === true) return yield* invalid("logprobs", "log probabilities are not available")
    if (payload.modalities != null && payload.modalities.some((modality) => modality !== "text")) {
      return yield* invalid("modalities", "only text output is supported")
    }
    if (payload.audio != null) return yield* invalid("audio", "audio output is not supported")
    if (payload.functions != null || payload.function_call != null) {
      return yield* invalid(payload.functions != null ? "functions" : "function_call", "use tools and tool_choice instead")
    }
  })

/** `response_format` as the run's output format (undefined: text); a schema outside OpenAI's subset is a 400. */
export const outputFormatOf = (responseFormat: ChatPayload["response_format"]) =>
  Either.match(fromResponseFormat(responseFormat), {
    onLeft: (problem) => Effect.fail(invalid(problem.param, problem.message)),
    onRight: Effect.succeed
  })

const textOf = (message: Message, index: number) =>
  Effect.gen(function*() {
    const content = message.content
    if (content === null) return ""
    if (typeof content === "string") return content
    const texts: Array<string> = []
    for (const [part, { text, type }] of content.entries()) {
      if (type !== "text") {
        return yield* invalid(`messages[${index}].content[${part}]`, `only text parts are supported, not ${type}`)
      }
      texts.push(text ?? "")
    }
    return texts.join("")
  })

/**
 * A Chat Completions conversation as a run's history and message: the last message is the user's (the run's
 * message) or the caller's tool results (the run resumes from them).
 */
export const chatConversation = (messages: ChatPayload["messages"]) =>
  Effect.gen(function*() {
    const history: Array<Prompt.MessageEncoded> = []
    // The name of each tool call an assistant message made: a tool result must answer one.
    const called = new Map<string, string>()
    for (const [index, message] of messages.entries()) {
      const text = yield* textOf(message, index)
      switch (message.role) {
        case "system":
        case "developer":
          history.push({ role: "system", content: text })
          break
        case "user":
          history.push({ role: "user", content: [{ type: "text", text }] })
          break
        case "assistant": {
          const content: Array<any> = text.length > 0 ? [{ type: "text", text }] : []
          for (const [at, call] of (message.tool_calls ?? []).entries()) {
            let params: unknown
            try {
              params = JSON.parse(call.function.arguments.length > 0 ? call.function.arguments : "{}")
            } catch {
              return yield* invalid(`messages[${index}].tool_calls[${at}].function.arguments`, "is not JSON")
            }
            called.set(call.id, call.function.name)
            content.push({ type: "tool-call", id: call.id, name: call.function.name, params, providerExecuted: false })
          }
          if (content.length > 0) history.push({ role: "assistant", content })
          break
        }
        case "tool": {
          const id = message.tool_call_id
          if (id === undefined) return yield* invalid(`messages[${index}].tool_call_id`, "is missing")
          const name = called.get(id)
          if (name === undefined) {
            return yield* invalid(`messages[${index}].tool_call_id`, `${id} answers no tool call of an earlier assistant message`)
          }
          const part = { type: "tool-result", id, name, isFailure: false, result: text, providerExecuted: false } as const
          const previous = history[history.length - 1]
          if (previous?.role === "tool") (previous.content as Array<unknown>).push(part)
          else history.push({ role: "tool", content: [part] })
          break
        }
      }
    }
    const last = messages[messages.length - 1]!
    if (last.role === "tool") return { history, message: "", resume: true }
    if (last.role !== "user") {
      return yield* invalid("messages", "the last message must be the user's or a tool result")
    }
    const message = yield* textOf(last, messages.length - 1)
    if (message.length === 0) return yield* invalid(`messages[${messages.length - 1}].content`, "the last message is empty")
    return { history: history.slice(0, -1), message, resume: false }
  })

/** The caller's function tools and tool choice, checked against the agent's own tool names. */
export const clientToolsOf = (
  payload: Pick<ChatPayload, "tools" | "tool_choice">,
  agent: RunnableAgent
) =>
  Effect.gen(function*() {
    const taken = new Set<string>([...agent.config.tools.map((tool) => tool.name as string), DELEGATE_TOOL])
    const clientTools: Array<ClientTool> = []
    for (const [index, tool] of (payload.tools ?? []).entries()) {
      const name = tool.function.name
      if (taken.has(name)) {
        return yield* invalid(`tools[${index}].function.name`, `${name} is already a tool of ${agent.identifier} or named twice`)
      }
      taken.add(name)
      clientTools.push({
        name,
        description: tool.function.description,
        parameters: tool.function.parameters ?? { type: "object", properties: {} }
      })
    }
    const choice = payload.tool_choice
    if (choice == null) return { clientTools, toolChoice: undefined }
    if (clientTools.length === 0) return yield* invalid("tool_choice", "is only allowed when tools are given")
    if (typeof choice === "string") return { clientTools, toolChoice: choice as LanguageModel.ToolChoice<string> }
    if (!clientTools.some((tool) => tool.name === choice.function.name)) {
      return yield* invalid("tool_choice", `${choice.function.name} is not one of the tools given`)
    }
    return { clientTools, toolChoice: { tool: choice.function.name } as LanguageModel.ToolChoice<string> }
  })

/** How long a client should wait before retrying a run that failed on a transient upstream failure. */
const RETRY_AFTER_SECONDS = "2"

/**
 * The HTTP answer of a run that failed before it answered anything (docs/runs.md "Retries", with the table of what
 * each client retries). A failure that retrying cannot fix is a status every client treats as final (400, or 402
 * when money ran out; the `openai` SDK, the AI SDK and LangChain retry none of them) with `x-should-retry: false`;
 * an upstream that was rate limited or failed stays retryable (429, 502, 503, 504) with `Retry-After`.
 */
export const failedRunAnswer = (code: string): { readonly status: number; readonly headers: Record<string, string> } => {
  const retryable = (status: number) => ({ status, headers: { "retry-after": RETRY_AFTER_SECONDS } })
  switch (code) {
    case "upstream_rate_limited":
      return retryable(429)
    case "upstream_error":
      return retryable(502)
    case "upstream_unavailable":
      return retryable(503)
    case "upstream_timeout":
      return retryable(504)
    case "budget_exhausted":
      return { status: 402, headers: { "x-should-retry": "false" } }
    case "internal_error":
      return { status: 500, headers: { "x-should-retry": "false" } }
    default:
      return { status: 400, headers: { "x-should-retry": "false" } }
  }
}

/**
 * The `type` of a failed run's error, OpenAI's classes: clients read it where there is no status to read (the AI SDK
 * derives a status from it for an error inside a stream, and retries what it maps to 5xx or 429), so it must say
 * retryable exactly when the HTTP status does.
 */
const errorTypeOf = (code: string): string => {
  switch (code) {
    case "upstream_rate_limited":
      return "rate_limit_error"
    case "upstream_error":
    case "upstream_unavailable":
    case "upstream_timeout":
    case "internal_error":
      return "server_error"
    case "budget_exhausted":
      return "insufficient_quota"
    default:
      return "invalid_request_error"
  }
}

/** OpenAI's error object for a failed run: `type` (the class), `code` (the `run.failed` code), `message`, `param`. */
export const runError = (code: string, message: string) => ({ type: errorTypeOf(code), code, message, param: null })
