import type * as LanguageModel from "@effect/ai/LanguageModel"
import type * as Prompt from "@effect/ai/Prompt"
import type * as Response from "@effect/ai/Response"
import type * as Toolkit from "@effect/ai/Toolkit"
import { Clock, Duration, Effect, FiberRef, Option, Stream } from "effect"
import { makeStorableDeltas, storableValue } from "../platform/Storable.js"
import { ProviderHealth, retryable } from "./models/Health.js"
import type { ResolvedModel } from "./models/Models.js"
import { CurrentChainWait, type Emit, MAX_CHAIN_WAIT_MS, StepResting } from "./Run.js"
import { type ModelCallFailed, modelCallFailed, UpstreamUnavailable } from "./RunStop.js"
import { tokensOf } from "./models/Builtin.js"
import { annotateSpan, Attr, contentCaptured, contentOf, genAiSpan, Operation } from "./Tracing.js"

/** What a step's model call answered. */
export interface ModelCall {
  readonly text: string
  readonly reasoning: string
  readonly signature: string | undefined
  readonly inputTokens: number
  readonly outputTokens: number
  readonly cachedInputTokens: number
  readonly toolCalls: ReadonlyArray<{ id: string; name: string; params: unknown; options?: { google: { thoughtSignature: string } } }>
  /** Why the model stopped (`stop`, `tool-calls`, `length`...), as its stream said; absent when it did not. */
  readonly finishReason?: string | undefined
}

/** A call's answer as the assistant's message of the conversation, in the form the next call sends back. */
export const assistantContent = (call: ModelCall): Array<any> => {
  const assistant: Array<any> = []
  // Anthropic wants a step's signed thinking back before its tool calls when thinking is on.
  if (call.signature !== undefined && call.reasoning.length > 0) {
    assistant.push({ type: "reasoning", text: call.reasoning, options: { anthropic: { type: "thinking", signature: call.signature } } })
  }
  if (call.text.length > 0) assistant.push({ type: "text", text: call.text })
  for (const toolCall of call.toolCalls) {
    assistant.push({
      type: "tool-call",
      id: toolCall.id,
      name: toolCall.name,
      params: toolCall.params,
      ...(toolCall.options === undefined ? {} : { options: toolCall.options })
    })
  }
  return assistant
}

/**
 * A run step's model call: streamed into the run's events, and through the expert's chain of models when a
 * provider fails or rests (docs/models.md).
 */
export class ModelChain extends Effect.Service<ModelChain>()("atrium/runtime/ModelChain", {
  effect: Effect.gen(function*() {
    const health = yield* ProviderHealth

    /** One model call, streamed: text, thinking and tool-call arguments are emitted as they arrive. */
    const callModel = (
      { model, plain }: ResolvedModel,
      conversation: ReadonlyArray<Prompt.MessageEncoded>,
      toolkit: Toolkit.WithHandler<any> | undefined,
      emit: Emit,
      toolChoice?: LanguageModel.ToolChoice<string> | undefined
    ) =>
      Effect.gen(function*() {
        let text = ""
        let thinking = ""
        let inputTokens = 0
        let outputTokens = 0
        let cachedInputTokens = 0
        let signature: string | undefined
        let finishReason: string | undefined
        let thinkingOpen = false
        const announced = new Set<string>()
        const toolCalls: Array<{ id: string; name: string; params: unknown; options?: { google: { thoughtSignature: string } } }> = []
        // What the model says is stored (the session's log, a durable step's record): made storable as it arrives.
        const textDeltas = makeStorableDeltas()
        const thinkingDeltas = makeStorableDeltas()
        const argumentDeltas = new Map<string, ReturnType<typeof makeStorableDeltas>>()
        /**
         * A character held back (the first half of a pair) is told once its block ends, before what comes next: any
         * part but the block's own deltas ends it (a call's arguments end with the call), and so does the stream.
         */
        const heldBefore = (next: Response.StreamPart<any>["type"] | "end", toolCallId?: string): Effect.Effect<void> => {
          const held: Array<Effect.Effect<void>> = []
          if (next !== "reasoning-delta") {
            const rest = thinkingDeltas.rest()
            thinking += rest
            if (rest.length > 0) held.push(emit({ type: "reasoning", delta: rest }))
          }
          if (next !== "text-delta") {
            const rest = textDeltas.rest()
            text += rest
            if (rest.length > 0) held.push(emit({ type: "text", delta: rest }))
          }
          for (const [id, deltas] of argumentDeltas) {
            if (next !== "end" && !(next === "tool-call" && id === toolCallId)) continue
            argumentDeltas.delete(id)
            const rest = deltas.rest()
            if (rest.length > 0) held.push(emit({ type: "tool_call_chunk", tool_call_id: id, delta: rest }))
          }
          return held.length === 0 ? Effect.void : Effect.all(held, { discard: true })
        }
        const told = (part: Response.StreamPart<any>): Effect.Effect<void, unknown> =>
          Effect.suspend(() => {
            const held = heldBefore(part.type, part.type === "tool-call" ? part.id : undefined)
            return Effect.zipRight(held, tell(part))
          })
        const tell = (part: Response.StreamPart<any>): Effect.Effect<void, unknown> => {
          switch (part.type) {
            case "reasoning-start":
              if (thinkingOpen) return Effect.void
              thinkingOpen = true
              return emit({ type: "thinking_status", status: "started" })
            case "reasoning-delta":
              {
                const signed = (part.metadata as { anthropic?: { signature?: unknown } } | undefined)?.anthropic?.signature
                if (typeof signed === "string") signature = signed
              }
              {
                const delta = thinkingDeltas.next(part.delta)
                thinking += delta
                return delta.length === 0 ? Effect.void : emit({ type: "reasoning", delta })
              }
            case "reasoning-end":
              if (!thinkingOpen) return Effect.void
              thinkingOpen = false
              return emit({ type: "thinking_status", status: "finished" })
            case "text-delta": {
              const delta = textDeltas.next(part.delta)
              text += delta
              return delta.length === 0 ? Effect.void : emit({ type: "text", delta })
            }
            case "tool-params-start":
              announced.add(part.id)
              return emit({ type: "tool_call", tool_call_id: part.id, name: part.name, status: "pending" })
            case "tool-params-delta":
              {
                const deltas = argumentDeltas.get(part.id) ?? makeStorableDeltas()
                argumentDeltas.set(part.id, deltas)
                const delta = deltas.next(part.delta)
                return delta.length === 0 ? Effect.void : emit({ type: "tool_call_chunk", tool_call_id: part.id, delta })
              }
            case "tool-call": {
              const params = storableValue(part.params)
              {
                // Gemini signs a call made while thinking; the signature must go back with the call.
                const signed = (part.metadata as { google?: { thoughtSignature?: unknown } } | undefined)?.google?.thoughtSignature
                toolCalls.push({
                  id: part.id,
                  name: part.name,
                  params,
                  ...(typeof signed === "string" ? { options: { google: { thoughtSignature: signed } } } : {})
                })
              }
              if (announced.has(part.id)) return Effect.void
              return emit({ type: "tool_call", tool_call_id: part.id, name: part.name, status: "pending", arguments: params })
            }
            case "finish":
              finishReason = part.reason
              inputTokens = part.usage.inputTokens ?? inputTokens
              outputTokens = part.usage.outputTokens ?? outputTokens
              cachedInputTokens = part.usage.cachedInputTokens ?? cachedInputTokens
              return Effect.void
            case "error":
              return Effect.fail(part.error)
            default:
              return Effect.void
          }
        }
        const options = {
          prompt: conversation,
          ...(toolkit === undefined ? {} : { toolkit, disableToolCallResolution: true as const }),
          ...(toolkit === undefined || toolChoice === undefined ? {} : {
            // The toolkit's names are only known as strings here; the choice names tools of that same toolkit.
            toolChoice: toolChoice as LanguageModel.ToolChoice<never>
          })
        }
        const parts = plain === undefined ? undefined : yield* plain(options)
        yield* (parts === undefined
          ? Stream.runForEach(model.streamText(options), told)
          : Effect.forEach(parts, told, { discard: true })).pipe(Effect.mapError(modelCallFailed))
        // A stream that ended inside a surrogate pair: what was held back is told, as a replacement character.
        yield* heldBefore("end")
        if (thinkingOpen) yield* emit({ type: "thinking_status", status: "finished" })
        // A provider that reports no usage is billed by the same estimate the builtin model uses.
        if (inputTokens === 0) inputTokens = tokensOf(JSON.stringify(conversation))
        if (outputTokens === 0) outputTokens = tokensOf(text + thinking + JSON.stringify(toolCalls.map((c) => c.params)))
        return { text, reasoning: thinking, signature, inputTokens, outputTokens, cachedInputTokens, toolCalls, finishReason }
      })

    /**
     * One step's model call through the expert's chain (docs/models.md): the first model whose provider's breaker
     * admits it; a retryable failure before anything of the step was streamed moves to the next model, told as
     * `run.model_fallback`. Once the step has streamed output a failure ends the run, since a client cannot take
     * back text it was shown. When every provider of the chain rests for a short while (a `Retry-After`, an open
     * breaker), the step waits for the first of them, once.
     */
    const callChain = <E = never>(
      chain: ReadonlyArray<ResolvedModel>,
      conversation: ReadonlyArray<Prompt.MessageEncoded>,
      toolkit: Toolkit.WithHandler<any> | undefined,
      emit: Emit,
      toolChoice?: LanguageModel.ToolChoice<string> | undefined,
      /**
       * What the step does with the answer before the call's span ends (its charge): the span of a model call says
       * what that call was charged. Its failure ends the step (no fallback: the model did answer).
       */
      onAnswer: (call: ModelCall, model: ResolvedModel) => Effect.Effect<void, E> = () => Effect.void
    ) =>
      Effect.gen(function*() {
        let last: ModelCallFailed | undefined
        let previous: ResolvedModel | undefined
        // A durable step's second attempt, after its workflow waited (`StepResting`), does not wait again.
        const wait = yield* FiberRef.get(CurrentChainWait)
        let waited = wait === "waited"
        const tried = new Set<string>()
        /** Models already told as skipped in this step (once each, whichever pass skipped them). */
        const toldSkipped = new Set<string>()
        // Each pass tries every model once; a second pass only after waiting out a short rest (bounded loop).
        while (true) {
          let next: ResolvedModel | undefined
          const skipped: Array<ResolvedModel> = []
          for (const candidate of chain) {
            if (tried.has(candidate.entry.id)) continue
            if (candidate.entry.kind === "builtin" || (yield* health.admit(candidate.entry.provider))) {
              next = candidate
              break
            }
            skipped.push(candidate)
          }
          if (next === undefined) {
            const waits = (yield* Effect.forEach(chain, (m) => health.waitFor(m.entry.provider))).filter((ms) => ms > 0)
            const soonest = waits.length === 0 ? Infinity : Math.min(...waits)
            if (waited || soonest > MAX_CHAIN_WAIT_MS) break
            waited = true
            tried.clear()
            // A background run's step does not sleep: its workflow waits on a DurableClock and tries the step again.
            if (wait === "defer") return yield* new StepResting({ until: (yield* Clock.currentTimeMillis) + soonest })
            yield* Effect.sleep(Duration.millis(soonest))
            continue
          }
          if (previous !== undefined && last !== undefined) {
            const rest = Option.flatMap(retryable(last.error, yield* Clock.currentTimeMillis), (r) => r.retryAfter)
            yield* emit({
              type: "model_fallback",
              from: previous.entry.id,
              to: next.entry.id,
              reason: "failed",
              code: last.code,
              message: last.message,
              ...(Option.isSome(rest) ? { retry_after_ms: Duration.toMillis(rest.value) } : {})
            })
            previous = undefined
          }
          // Every model passed over because its provider rests is told too, with why (issue 44 gap 9).
          for (const model of skipped) {
            if (toldSkipped.has(model.entry.id)) continue
            toldSkipped.add(model.entry.id)
            const state = yield* health.state(model.entry.provider)
            const wait = yield* health.waitFor(model.entry.provider)
            const open = state !== "closed"
            yield* emit({
              type: "model_fallback",
              from: model.entry.id,
              to: next.entry.id,
              reason: open ? "breaker_open" : "resting",
              code: "upstream_unavailable",
              message: open
                ? `Skipped: the circuit breaker of provider ${model.entry.provider} is open after repeated failures.`
                : `Skipped: provider ${model.entry.provider} asked to be left alone for a while (Retry-After).`,
              ...(wait > 0 ? { retry_after_ms: wait } : {})
            })
          }
          tried.add(next.entry.id)
          let streamed = false
          const model = next
          // One `chat {model}` span per attempt (docs/traces.md): a failed attempt's span says why, the answering
          // one what it used and, through `onAnswer`, what it was charged.
          const outcome = yield* Effect.gen(function*() {
            const outcome = yield* Effect.either(
              callModel(model, conversation, toolkit, (event) => {
                streamed = true
                return emit(event)
              }, toolChoice)
            )
            if (outcome._tag === "Left") {
              yield* annotateSpan({ [Attr.errorType]: outcome.left.code })
              return outcome
            }
            const call = outcome.right
            yield* annotateSpan({
              [Attr.responseModel]: model.entry.model,
              [Attr.inputTokens]: call.inputTokens,
              [Attr.outputTokens]: call.outputTokens,
              [Attr.cachedTokens]: call.cachedInputTokens,
              ...(call.finishReason === undefined ? {} : { [Attr.finishReasons]: [call.finishReason] }),
              ...(yield* contentCaptured)
                ? {
                  [Attr.inputMessages]: contentOf(conversation),
                  [Attr.outputMessages]: contentOf(assistantContent(call))
                }
                : {}
            })
            yield* onAnswer(call, model)
            return outcome
          }).pipe(genAiSpan(`chat ${model.entry.id}`, {
            kind: "client",
            attributes: {
              [Attr.operation]: Operation.chat,
              [Attr.provider]: model.entry.provider,
              [Attr.requestModel]: model.entry.model
            }
          }))
          if (outcome._tag === "Right") {
            if (next.entry.kind !== "builtin") yield* health.succeeded(next.entry.provider)
            return { call: outcome.right, model: next }
          }
          const failure = outcome.left
          const again = retryable(failure.error, yield* Clock.currentTimeMillis)
          if (Option.isNone(again)) {
            // Not the provider's health (a request it refuses, a model's own failure): nothing counts, and a probe
            // this call held is given back.
            if (next.entry.kind !== "builtin") yield* health.released(next.entry.provider)
            return yield* Effect.fail(failure)
          }
          yield* health.failed(next.entry.provider, again.value.retryAfter)
          if (streamed) return yield* Effect.fail(failure)
          last = failure
          previous = next
        }
        return yield* Effect.fail(
          // Transient (the breakers rest): a code clients may retry, unlike a model that is not offered at all.
          last ?? new UpstreamUnavailable({ message: "Every provider of the expert's models is failing; try again later." })
        )
      })

    return { call: callChain } as const
  }),
  dependencies: [ProviderHealth.Default]
}) {}
