import * as AiError from "@effect/ai/AiError"
import * as LanguageModel from "@effect/ai/LanguageModel"
import * as Prompt from "@effect/ai/Prompt"
import * as Response from "@effect/ai/Response"
import * as Tool from "@effect/ai/Tool"
import { toolParameters } from "./AdapterParts.js"
import type * as Toolkit from "@effect/ai/Toolkit"
import { Chunk, Effect, FiberRef, Stream } from "effect"
import { randomBase62 } from "../../platform/Ids.js"
import { instanceOf } from "./JsonSchema.js"
import { CurrentOutputFormat, type OutputFormat } from "./OutputFormat.js"

/**
 * The built-in model: deterministic and offline, for development and tests. It thinks briefly, echoes the message
 * in several increments, and obeys directives on the first line of the user message (documented in
 * docs/events.md): `/tool NAME {json}`, `/tools N NAME {json}` (N calls, one per step), `/delegate IDENTIFIER
 * message`, `/fail message`, `/slow N`, `/history`, `/say text`, `/system` (says its system prompt). It honours `tool_choice` exactly and answers a structured-output request with the deterministic
 * instance of its schema (docs/models.md). Token counts are a pure function of the text: a token is four
 * characters, rounded up.
 */

export const BUILTIN_MODEL_ID = "builtin"

/** The tool through which an agent delegates to one of its subagents (the run engine implements it). */
export const DELEGATE_TOOL = "delegate"

const SLOW_INTERVAL = "100 millis"
const MAX_SLOW_INCREMENTS = 1000

export const tokensOf = (text: string) => Math.ceil(text.length / 4)

const textOf = (message: Prompt.Message): string => {
  if (typeof message.content === "string") return message.content
  return message.content.map((part) => {
    switch (part.type) {
      case "text":
      case "reasoning":
        return part.text
      case "tool-call":
        return `${part.name} ${JSON.stringify(part.params)}`
      case "tool-result":
        return `${part.name} ${JSON.stringify(part.result)}`
      default:
        return ""
    }
  }).join("\n")
}

/** The words of a text in groups of three, each group keeping its trailing space, so the pieces join back exactly. */
const increments = (text: string): Array<string> => {
  const words = text.match(/\S+\s*/g) ?? [text]
  const pieces: Array<string> = []
  for (let i = 0; i < words.length; i += 3) pieces.push(words.slice(i, i + 3).join(""))
  return pieces.length > 0 ? pieces : [""]
}

type Part = Response.StreamPartEncoded

interface Reply {
  readonly thinking: ReadonlyArray<string>
  readonly text: ReadonlyArray<string>
  readonly toolCall?: { readonly name: string; readonly params: unknown; readonly raw: string }
  readonly delay?: boolean
  readonly fail?: string
  /** Said as it is, whatever the output format (`/say`): how tests make a model break a schema. */
  readonly verbatim?: boolean
}

const toolResultReply = (results: ReadonlyArray<Prompt.ToolResultPart>): Reply => ({
  thinking: ["Reading the tool results."],
  text: increments(
    results.map((result) =>
      result.isFailure
        ? `${result.name} did not run: ${typeof result.result === "string" ? result.result : JSON.stringify(result.result)}`
        : `${result.name} returned: ${typeof result.result === "string" ? result.result : JSON.stringify(result.result)}`
    ).join("\n")
  )
})

/** What the builtin model reasons before each answer: output tokens like any model's reasoning (an eval's estimate counts them). */
export const BUILTIN_THINKING: ReadonlyArray<string> = ["Reading the message. ", "Choosing what to do."]

const directiveReply = (message: string, earlier: number, tools: ReadonlyArray<string>, system = ""): Reply => {
  const thinking = BUILTIN_THINKING
  const directive = /^\/(\w+)(?:[ \t]+(.*))?$/s.exec(message.split("\n")[0]!.trim())
  const argument = directive?.[2]?.trim() ?? ""
  switch (directive?.[1]) {
    case "tools": {
      // The first of N calls (`repeatedCall` makes the others after each result).
      const [, , rest = ""] = /^(\d+)\s+(.*)$/s.exec(argument) ?? []
      return directiveReply(`/tool ${rest}`, earlier, tools, system)
    }
    case "fail":
      return { thinking, text: [], fail: argument.length > 0 ? argument : "the model failed as asked" }
    case "slow": {
      const count = Math.min(Math.max(Number.parseInt(argument, 10) || 1, 1), MAX_SLOW_INCREMENTS)
      return { thinking, text: Array.from({ length: count }, (_, i) => `chunk ${i + 1} `), delay: true }
    }
    case "history":
      return { thinking, text: increments(`I see ${earlier} earlier messages.`) }
    case "say":
      return { thinking, text: increments(argument), verbatim: true }
    case "system":
      // What the run put before the conversation (the expert's instructions, its memory): how tests see a turn's context.
      return { thinking, text: increments(system.length > 0 ? system : "(no system prompt)"), verbatim: true }
    case "tool": {
      const [, name = "", raw = "{}"] = /^(\S+)\s*(.*)$/s.exec(argument) ?? []
      if (!tools.includes(name)) return { thinking, text: increments(`The tool ${name} is not available to this agent.`) }
      let params: unknown
      try {
        params = JSON.parse(raw.length > 0 ? raw : "{}")
      } catch {
        params = { __invalid_arguments: raw }
      }
      return { thinking, text: increments(`Calling ${name}.`), toolCall: { name, params, raw: raw.length > 0 ? raw : "{}" } }
    }
    case "delegate": {
      const [, agent = "", task = ""] = /^(\S+)\s*(.*)$/s.exec(argument) ?? []
      if (!tools.includes(DELEGATE_TOOL)) {
        return { thinking, text: increments("This agent has no subagents to delegate to.") }
      }
      const params = { agent, message: task }
      return { thinking, text: increments(`Delegating to ${agent}.`), toolCall: { name: DELEGATE_TOOL, params, raw: JSON.stringify(params) } }
    }
    default:
      return { thinking, text: increments(`You said: ${message}`) }
  }
}

/** The most calls one `/tools N` directive makes (a run takes at most 12 model steps). */
const MAX_REPEATED_CALLS = 10

/**
 * `/tools N NAME {json}`: the same call as `/tool`, made again after each result until it was made N times (one
 * model step each), then the answer to the last result: N + 1 model steps in one run, as an agent that works through
 * several tool calls takes (how tests count what a multi-step turn costs). Undefined for any other message.
 */
const repeatedCall = (message: string, made: number, tools: ReadonlyArray<string>): Reply | undefined => {
  const directive = /^\/tools[ \t]+(\d+)[ \t]+(\S+)\s*(.*)$/s.exec(message.split("\n")[0]!.trim())
  if (directive === null) return undefined
  const times = Math.min(Math.max(Number.parseInt(directive[1]!, 10), 1), MAX_REPEATED_CALLS)
  if (made >= times) return undefined
  return directiveReply(`/tool ${directive[2]} ${directive[3] ?? ""}`, 0, tools)
}

const unformatted = (options: LanguageModel.ProviderOptions): Reply => {
  const messages = options.prompt.content
  const last = messages[messages.length - 1]
  let userIndex = messages.length - 1
  while (userIndex >= 0 && messages[userIndex]!.role !== "user") userIndex--
  if (last?.role === "tool") {
    const made = messages.slice(userIndex + 1).filter((m) => m.role === "tool").length
    const again = userIndex >= 0 ? repeatedCall(textOf(messages[userIndex]!), made, options.tools.map((tool) => tool.name)) : undefined
    if (again !== undefined) return again
    return toolResultReply(last.content.filter((part): part is Prompt.ToolResultPart => part.type === "tool-result"))
  }
  const message = userIndex >= 0 ? textOf(messages[userIndex]!) : ""
  const earlier = messages.slice(0, Math.max(userIndex, 0)).filter((m) => m.role === "user" || m.role === "assistant")
    .length
  const system = messages.filter((m) => m.role === "system").map(textOf).join("\n")
  return directiveReply(message, earlier, options.tools.map((tool) => tool.name), system)
}

/** A call of `tool` with the deterministic instance of its parameters' schema. */
const forcedCall = (tool: Tool.Any): NonNullable<Reply["toolCall"]> => {
  const params = instanceOf(toolParameters(tool))
  return { name: tool.name, params: params ?? {}, raw: JSON.stringify(params ?? {}) }
}

/**
 * `tool_choice` honoured exactly: `none` never calls a tool; `required` always calls one (the directive's when it
 * names an offered tool, else the first offered); `{tool}` always calls that tool (with the directive's arguments
 * when the directive names it, else an instance of its schema).
 */
const withToolChoice = (answer: Reply, options: LanguageModel.ProviderOptions): Reply => {
  const choice = options.toolChoice
  if (choice === "none") {
    if (answer.toolCall === undefined) return answer
    return { thinking: answer.thinking, text: increments(`Not calling ${answer.toolCall.name}: tool_choice is none.`) }
  }
  const named = typeof choice === "object" && "tool" in choice ? choice.tool : undefined
  if (choice !== "required" && named === undefined) return answer
  if (answer.toolCall !== undefined && (named === undefined || answer.toolCall.name === named)) return answer
  const tool = named === undefined ? options.tools[0] : options.tools.find((t) => t.name === named)
  if (tool === undefined || answer.fail !== undefined) return answer
  return { thinking: answer.thinking, text: increments(`Calling ${tool.name}.`), toolCall: forcedCall(tool) }
}

/** Pieces of a JSON text, a few characters each, so that a structured answer streams like any other. */
const jsonIncrements = (json: string): Array<string> => {
  const pieces: Array<string> = []
  for (let i = 0; i < json.length; i += 16) pieces.push(json.slice(i, i + 16))
  return pieces
}

/**
 * The answer in the asked form: `json_schema` is the deterministic instance of its schema, `json_object` is
 * `{"answer": <the text it would have said>}`; a step that calls a tool says nothing beside the call.
 */
const withFormat = (answer: Reply, format: OutputFormat | undefined): Reply => {
  if (format === undefined || answer.verbatim === true || answer.fail !== undefined) return answer
  if (answer.toolCall !== undefined) return { ...answer, text: [] }
  const json = format.type === "json_schema"
    ? JSON.stringify(instanceOf(format.schema))
    : JSON.stringify({ answer: answer.text.join("") })
  return { ...answer, text: jsonIncrements(json) }
}

const reply = (options: LanguageModel.ProviderOptions, format: OutputFormat | undefined): Reply =>
  withFormat(withToolChoice(unformatted(options), options), format)

const partsOf = (reply: Reply, inputTokens: number): Array<Part> => {
  const textId = `txt_${randomBase62(8)}`
  const thinkingId = `rsn_${randomBase62(8)}`
  const parts: Array<Part> = [
    { type: "reasoning-start", id: thinkingId },
    ...reply.thinking.map((delta): Part => ({ type: "reasoning-delta", id: thinkingId, delta })),
    { type: "reasoning-end", id: thinkingId }
  ]
  if (reply.text.length > 0) {
    parts.push({ type: "text-start", id: textId })
    for (const delta of reply.text) parts.push({ type: "text-delta", id: textId, delta })
    parts.push({ type: "text-end", id: textId })
  }
  let output = reply.thinking.join("") + reply.text.join("")
  if (reply.toolCall !== undefined) {
    const id = `call_${randomBase62(12)}`
    const { name, params, raw } = reply.toolCall
    parts.push({ type: "tool-params-start", id, name })
    const half = Math.ceil(raw.length / 2)
    for (const delta of [raw.slice(0, half), raw.slice(half)].filter((d) => d.length > 0)) {
      parts.push({ type: "tool-params-delta", id, delta })
    }
    parts.push({ type: "tool-params-end", id })
    parts.push({ type: "tool-call", id, name, params })
    output += raw
  }
  const outputTokens = Math.max(tokensOf(output), 1)
  parts.push({
    type: "finish",
    reason: reply.toolCall !== undefined ? "tool-calls" : "stop",
    usage: { inputTokens, outputTokens, totalTokens: inputTokens + outputTokens }
  })
  return parts
}

const streamText = (options: LanguageModel.ProviderOptions): Stream.Stream<Part, AiError.AiError> =>
  Stream.unwrap(Effect.map(FiberRef.get(CurrentOutputFormat), (format) => {
    const answer = reply(options, format)
    const inputTokens = Math.max(tokensOf(options.prompt.content.map(textOf).join("\n")), 1)
    if (answer.fail !== undefined) {
      const thinking = partsOf({ thinking: answer.thinking, text: [] }, inputTokens).filter((p) => p.type !== "finish")
      return Stream.concat(
        Stream.fromIterable(thinking),
        Stream.fail(new AiError.UnknownError({ module: "BuiltinModel", method: "streamText", description: answer.fail }))
      )
    }
    const parts = Stream.fromIterable(partsOf(answer, inputTokens))
    return answer.delay === true
      ? parts.pipe(Stream.tap((part) => part.type === "text-delta" ? Effect.sleep(SLOW_INTERVAL) : Effect.void))
      : parts
  }))

/** What a run step asks of a model (`ModelChain`): the options it gives `LanguageModel.streamText`. */
export interface StepRequest {
  readonly prompt: ReadonlyArray<Prompt.MessageEncoded>
  readonly toolkit?: Toolkit.WithHandler<any> | undefined
  readonly toolChoice?: LanguageModel.ToolChoice<string> | undefined
}

/**
 * A plain answer's parts, as `LanguageModel.streamText` would hand them on (decoded), or none when the answer is
 * not plain (a tool call, a failure, a paced answer: those go through `LanguageModel` as every provider's answers
 * do). The options are made as `LanguageModel` makes them (the prompt decoded, the tools and choice only with a
 * toolkit that has tools). A plain answer needs no stream and no decoding of parts we built ourselves: the run step
 * tells them one after the other, which costs a fraction of a stream's channels and schemas (issue 28).
 */
export const plainAnswer = (request: StepRequest): Effect.Effect<ReadonlyArray<Response.StreamPart<any>> | undefined> =>
  Effect.map(FiberRef.get(CurrentOutputFormat), (format) => {
    const tools: Array<Tool.Any> = request.toolkit === undefined ? [] : Object.values(request.toolkit.tools)
    const choice = tools.length === 0 ? "none" : request.toolChoice ?? "auto"
    const offered = typeof choice === "object" && "oneOf" in choice ? tools.filter((tool) => choice.oneOf.includes(tool.name)) : tools
    const options = {
      prompt: Prompt.make(request.prompt),
      tools: offered,
      toolChoice: choice,
      responseFormat: { type: "text" }
    } as unknown as LanguageModel.ProviderOptions
    const answer = reply(options, format)
    if (answer.toolCall !== undefined || answer.fail !== undefined || answer.delay === true) return undefined
    const inputTokens = Math.max(tokensOf(options.prompt.content.map(textOf).join("\n")), 1)
    return partsOf(answer, inputTokens).map((part): Response.StreamPart<any> => {
      const { type, ...params } = part
      return type === "finish"
        ? Response.makePart("finish", { ...(params as Omit<Response.FinishPartEncoded, "type">), usage: new Response.Usage((part as Response.FinishPartEncoded).usage) })
        // Every other part we build is already in its decoded form (plain strings and JSON).
        : Response.makePart(type, params as unknown as Parameters<typeof Response.makePart>[1]) as Response.StreamPart<any>
    })
  })

export const make: Effect.Effect<LanguageModel.Service> = LanguageModel.make({
  streamText,
  generateText: (options) =>
    streamText(options).pipe(
      Stream.runCollect,
      Effect.map((parts) => collapse(Chunk.toReadonlyArray(parts)))
    )
})

/** The parts of a whole response from its streamed parts: text and reasoning joined, tool calls and finish kept. */
const collapse = (parts: ReadonlyArray<Part>): Array<Response.PartEncoded> => {
  const text = parts.flatMap((p) => p.type === "text-delta" ? [p.delta] : []).join("")
  const reasoning = parts.flatMap((p) => p.type === "reasoning-delta" ? [p.delta] : []).join("")
  const result: Array<Response.PartEncoded> = []
  if (reasoning.length > 0) result.push({ type: "reasoning", text: reasoning })
  if (text.length > 0) result.push({ type: "text", text })
  for (const part of parts) {
    if (part.type === "tool-call" || part.type === "finish") result.push(part)
  }
  return result
}

