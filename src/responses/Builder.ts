import type * as Prompt from "@effect/ai/Prompt"
import { newId } from "../platform/Ids.js"
import { storableValue } from "../platform/Storable.js"
import type { InternalEvent } from "../runtime/Events.js"
import { FILE_SEARCH } from "../runtime/tools/FileSearch.js"
import { runError } from "../runs/OpenAi.js"
import type { ResponseId } from "./Api.js"
import { annotationsOf, type Cited, completeSearch, searchCallItem, type SearchCallItem } from "./FileSearch.js"

/** One event of a Responses stream, as the official SDKs parse it. */
export type Frame = { readonly type: string; readonly [key: string]: unknown }

/** The part of an item id after its prefix: a call's id keeps its run's suffix under OpenAI's `fc_` prefix. */
export const suffix = (id: string) => id.slice(id.indexOf("_") + 1)

/** OpenAI's usage; `cached` is the part of the input the upstream read from its prompt cache (its own figure). */
const usageOf = (usage: { input_tokens: number; output_tokens: number }, cached: number) => ({
  input_tokens: usage.input_tokens,
  input_tokens_details: { cached_tokens: cached },
  output_tokens: usage.output_tokens,
  output_tokens_details: { reasoning_tokens: 0 },
  total_tokens: usage.input_tokens + usage.output_tokens
})

/**
 * Folds a run's events into OpenAI's response object and tells each step as the Responses stream events the
 * official SDKs parse (`response.output_item.added`, `response.output_text.delta`, ...).
 */
export class ResponseBuilder {
  private sequence = 0
  private readonly output: Array<Record<string, any>> = []
  private open: { kind: "message"; item: Record<string, any>; text: string } | { kind: "call"; item: Record<string, any>; toolCallId: string } | undefined
  status: "queued" | "in_progress" | "completed" | "failed" | "cancelled" | "incomplete"
  private incomplete: { reason: string } | null = null
  private usage: ReturnType<typeof usageOf> | null = null
  /** Cached input tokens of the run's model calls, as each `usage.token` told them. */
  private cachedTokens = 0
  private error: { code: string; message: string } | null = null
  /** The assistant's part of the conversation, for a conversation kept with the response. */
  text = ""
  readonly toolCalls: Array<{ id: string; name: string; params: unknown }> = []
  /** `file_search` calls in progress, by tool call, and the passages the searches offered, by citation marker. */
  private readonly searches = new Map<string, { item: SearchCallItem; outputIndex: number }>()
  private readonly cited = new Map<string, Cited>()

  constructor(
    readonly base: {
      readonly id: ResponseId
      readonly model: string
      readonly createdAt: number
      readonly previousResponseId: ResponseId | null
      readonly conversation: string | null
      readonly clientTools: ReadonlySet<string>
      readonly extra: Record<string, unknown>
      /** The request has `file_search` tools; `includeResults`: `include` asks for `file_search_call.results`. */
      readonly fileSearch?: { readonly includeResults: boolean } | undefined
      /**
       * A background response (docs/runs.md): folded again from its run's log by every reader, on any runner, so its
       * item ids are made from the response's id and the item's place (the same on every fold), it starts `queued`,
       * and a stopped run ends `cancelled` or `incomplete` rather than failed.
       */
      readonly background?: boolean | undefined
    }
  ) {
    this.status = base.background === true ? "queued" : "in_progress"
  }

  /** A new output item's id: random, or for a background response the same on every fold of its log. */
  private itemId(prefix: string): string {
    return this.base.background === true ? `${prefix}_${suffix(this.base.id)}_${this.output.length}` : newId(prefix)
  }

  /** The response as it is now, a copy: a frame that carries it may be encoded after later events were folded. */
  snapshot(): Record<string, unknown> {
    const output = this.open === undefined ? this.output : [...this.output, this.open.item]
    return structuredClone({
      id: this.base.id,
      object: "response",
      created_at: this.base.createdAt,
      status: this.status,
      model: this.base.model,
      output,
      output_text: output.flatMap((item) => item.type === "message" ? item.content.map((part: any) => part.text) : []).join(""),
      usage: this.usage,
      error: this.error,
      incomplete_details: this.incomplete,
      previous_response_id: this.base.previousResponseId,
      conversation: this.base.conversation === null ? null : { id: this.base.conversation },
      ...this.base.extra
    })
  }

  private frame(type: string, payload: Record<string, unknown>): Frame {
    return { type, sequence_number: this.sequence++, ...payload }
  }

  start(): Array<Frame> {
    if (this.base.background === true) return [this.frame("response.created", { response: this.snapshot() })]
    return [this.frame("response.created", { response: this.snapshot() }), this.frame("response.in_progress", { response: this.snapshot() })]
  }

  /** A background response's run has started (its log's first event): `response.in_progress`, once. */
  private started(): Array<Frame> {
    if (this.status !== "queued") return []
    this.status = "in_progress"
    return [this.frame("response.in_progress", { response: this.snapshot() })]
  }

  private close(): Array<Frame> {
    const open = this.open
    if (open === undefined) return []
    this.open = undefined
    const outputIndex = this.output.length
    if (open.kind === "message") {
      const annotations = annotationsOf(open.text, this.cited)
      const part = { type: "output_text", text: open.text, annotations }
      const item: Record<string, any> = { ...open.item, status: "completed", content: [part] }
      this.output.push(item)
      return [
        ...annotations.map((annotation, annotationIndex) =>
          this.frame("response.output_text.annotation.added", { item_id: item.id, output_index: outputIndex, content_index: 0, annotation_index: annotationIndex, annotation })
        ),
        this.frame("response.output_text.done", { item_id: item.id, output_index: outputIndex, content_index: 0, text: open.text, logprobs: [] }),
        this.frame("response.content_part.done", { item_id: item.id, output_index: outputIndex, content_index: 0, part }),
        this.frame("response.output_item.done", { output_index: outputIndex, item })
      ]
    }
    const item: Record<string, any> = { ...open.item, status: "completed" }
    this.output.push(item)
    let params: unknown = {}
    try {
      params = storableValue(JSON.parse(item.arguments.length > 0 ? item.arguments : "{}"))
    } catch {
      params = { __invalid_arguments: item.arguments }
    }
    this.toolCalls.push({ id: item.call_id, name: item.name, params })
    return [
      this.frame("response.function_call_arguments.done", { item_id: item.id, output_index: outputIndex, name: item.name, arguments: item.arguments }),
      this.frame("response.output_item.done", { output_index: outputIndex, item })
    ]
  }

  private addText(delta: string): Array<Frame> {
    const frames: Array<Frame> = []
    if (this.open?.kind !== "message") {
      frames.push(...this.close())
      const item = { id: this.itemId("msg"), type: "message", status: "in_progress", role: "assistant", content: [] as Array<unknown> }
      this.open = { kind: "message", item, text: "" }
      const outputIndex = this.output.length
      frames.push(this.frame("response.output_item.added", { output_index: outputIndex, item: { ...item } }))
      frames.push(this.frame("response.content_part.added", {
        item_id: item.id,
        output_index: outputIndex,
        content_index: 0,
        part: { type: "output_text", text: "", annotations: [] }
      }))
    }
    const open = this.open as { kind: "message"; item: Record<string, any>; text: string }
    open.text += delta
    this.text += delta
    open.item.content = [{ type: "output_text", text: open.text, annotations: [] }]
    frames.push(this.frame("response.output_text.delta", { item_id: open.item.id, output_index: this.output.length, content_index: 0, delta, logprobs: [] }))
    return frames
  }

  on(event: InternalEvent): Array<Frame> {
    const started = this.started()
    if (started.length === 0) return this.told(event)
    return [...started, ...this.told(event)]
  }

  private told(event: InternalEvent): Array<Frame> {
    switch (event.type) {
      case "text":
        return this.addText(event.delta)
      case "token_usage":
        this.cachedTokens += event.cached_input_tokens ?? 0
        return []
      case "trial_exhausted":
        return this.addText(`Your ${event.trials_used} free trial turns of ${event.agent} are used up. Unlock it for ${event.price} credits to go on.`)
      case "tool_call": {
        if (event.name === FILE_SEARCH && this.base.fileSearch !== undefined) return this.onSearch(event.tool_call_id, event.status)
        if (event.status !== "pending" || !this.base.clientTools.has(event.name)) return []
        if (this.open?.kind === "call" && this.open.toolCallId === event.tool_call_id) return []
        const frames = this.close()
        const args = event.arguments === undefined ? "" : JSON.stringify(event.arguments)
        const item = { id: `fc_${suffix(event.tool_call_id)}`, type: "function_call", status: "in_progress", call_id: event.tool_call_id, name: event.name, arguments: args }
        this.open = { kind: "call", item, toolCallId: event.tool_call_id }
        frames.push(this.frame("response.output_item.added", { output_index: this.output.length, item: { ...item, arguments: "" } }))
        if (args.length > 0) {
          frames.push(this.frame("response.function_call_arguments.delta", { item_id: item.id, output_index: this.output.length, delta: args }))
        }
        return frames
      }
      case "tool_call_chunk": {
        if (this.open?.kind !== "call" || this.open.toolCallId !== event.tool_call_id) return []
        this.open.item.arguments += event.delta
        return [this.frame("response.function_call_arguments.delta", { item_id: this.open.item.id, output_index: this.output.length, delta: event.delta })]
      }
      case "tool_call_result": {
        const search = this.searches.get(event.tool_call_id)
        if (search === undefined) return []
        this.searches.delete(event.tool_call_id)
        for (const [marker, cited] of completeSearch(search.item, event.output, this.base.fileSearch?.includeResults ?? false)) this.cited.set(marker, cited)
        return [
          this.frame("response.file_search_call.completed", { item_id: search.item.id, output_index: search.outputIndex }),
          this.frame("response.output_item.done", { output_index: search.outputIndex, item: { ...search.item } })
        ]
      }
      case "complete": {
        const frames = this.close()
        this.status = "completed"
        this.usage = usageOf(event.usage, this.cachedTokens)
        frames.push(this.frame("response.completed", { response: this.snapshot() }))
        return frames
      }
      case "error": {
        const frames = this.close()
        // A background run stopped by its caller or its deadline (Background.ts's last event): no error of the run.
        if (this.base.background === true && (event.code === "cancelled" || event.code === "max_duration")) {
          this.status = event.code === "cancelled" ? "cancelled" : "incomplete"
          if (event.code === "max_duration") this.incomplete = { reason: "max_duration" }
          frames.push(this.frame(event.code === "cancelled" ? "response.failed" : "response.incomplete", { response: this.snapshot() }))
          return frames
        }
        this.status = "failed"
        const error = runError(event.code, event.message)
        this.error = error
        // OpenAI's way: the failure is told in the stream. First an `error` event carrying `error` both flat and
        // nested: the `openai` SDK raises any event with an `error` field (so LangChain, which ignores
        // `response.failed`, sees the failure), and the AI SDK reads its `type` to decide it is final, which it must
        // see before `response.failed` (whose fixed type it would take for a retryable 500). Then `response.failed`
        // with the response, for clients that read the stream themselves. A turn the caller cancelled is no error.
        if (event.code !== "interrupted") frames.push(this.frame("error", { code: error.code, message: error.message, param: null, error }))
        frames.push(this.frame("response.failed", { response: this.snapshot() }))
        return frames
      }
      default:
        return []
    }
  }

  /** A `file_search` call as OpenAI's `file_search_call` item: added when it runs, done with its result. */
  private onSearch(toolCallId: string, status: string): Array<Frame> {
    if (status === "running") {
      const frames = this.close()
      const item = searchCallItem(this.itemId("fs"))
      const outputIndex = this.output.length
      this.output.push(item)
      this.searches.set(toolCallId, { item, outputIndex })
      frames.push(this.frame("response.output_item.added", { output_index: outputIndex, item: { ...item } }))
      frames.push(this.frame("response.file_search_call.in_progress", { item_id: item.id, output_index: outputIndex }))
      frames.push(this.frame("response.file_search_call.searching", { item_id: item.id, output_index: outputIndex }))
      return frames
    }
    const search = this.searches.get(toolCallId)
    if (status !== "failed" || search === undefined) return []
    this.searches.delete(toolCallId)
    search.item.status = "failed"
    return [this.frame("response.output_item.done", { output_index: search.outputIndex, item: { ...search.item } })]
  }

  /** The conversation after this response, for one kept with the response. */
  messagesAfter(history: ReadonlyArray<Prompt.MessageEncoded>, message: string, resume: boolean): Array<Prompt.MessageEncoded> {
    const assistant: Array<any> = []
    if (this.text.length > 0) assistant.push({ type: "text", text: this.text })
    for (const call of this.toolCalls) assistant.push({ type: "tool-call", id: call.id, name: call.name, params: call.params, providerExecuted: false })
    return [
      ...history,
      ...(resume ? [] : [{ role: "user" as const, content: [{ type: "text" as const, text: message }] }]),
      ...(assistant.length > 0 ? [{ role: "assistant" as const, content: assistant }] : [])
    ]
  }
}
