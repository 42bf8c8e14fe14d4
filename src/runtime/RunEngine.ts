import * as AiError from "@effect/ai/AiError"
import type * as LanguageModel from "@effect/ai/LanguageModel"
import type * as Prompt from "@effect/ai/Prompt"
import * as Tool from "@effect/ai/Tool"
import type * as Toolkit from "@effect/ai/Toolkit"
import { Cause, Clock, Duration, Effect, Exit, Mailbox, Option, Schema, Stream } from "effect"
import { checkOutput, CurrentOutputFormat, type OutputFormat } from "./models/OutputFormat.js"
import { newId } from "../platform/Ids.js"
import { type Micros, parseCredits, toNumber } from "../platform/Money.js"
import { Approvals } from "./Approvals.js"
import type { InternalEvent } from "./Events.js"
import type { ExpertConfig } from "./Expert.js"
import { DELEGATE_TOOL, tokensOf } from "./models/Builtin.js"
import { describeFailure } from "./models/Upstream.js"
import { ProviderHealth, retryable } from "./models/Health.js"
import { Models, type ResolvedModel } from "./models/Models.js"
import { RunsRepo } from "./Repo.js"
import { KnowledgeSearch, type RunLedger, RunPayer } from "./Ports.js"
import { makeSandboxHolder, type SandboxHolder } from "./sandbox/Holder.js"
import { McpTools, type RemoteTools } from "./tools/Mcp.js"
import { CodeRunner, RUN_CODE, RUN_CODE_DESCRIPTION, RunCodeParameters } from "./tools/RunCode.js"
import { FILE_SEARCH, FILE_SEARCH_DESCRIPTION, FileSearchParameters, runFileSearch } from "./tools/FileSearch.js"
import { definitionOf, isBuiltinTool, type KnowledgeScope, lenientTool, runBuiltin, type ToolContext } from "./tools/Tools.js"
import type { Partition } from "../identity/Partition.js"

/**
 * The run engine, shared by `/v1/agents/run`, `/v1/chat/completions` and sessions (DESIGN.md §4): model call ->
 * tool calls -> model call ... until the model answers without tools. Every step is told as internal events through
 * `emit`; the caller decides where they go (an HTTP stream, a session's log). Usage is charged through the `RunPayer` port (billing's wallet)
 * after each model call, idempotently per run step.
 */

/** An agent as a run sees it: a published version, or the owner's draft (`version` null). */
export interface RunnableAgent {
  /** None for a bare model called through `/v1/chat/completions` (an agent of no one, without tools). */
  readonly id: string | null
  readonly identifier: string
  readonly ownerId: string
  readonly version: number | null
  readonly config: ExpertConfig
}

export interface RunRequest {
  readonly runId: string
  readonly agent: RunnableAgent
  /** Who pays (the account) and for which end user; files and memory are partitioned by both. */
  readonly payer: Partition
  /** Earlier messages of the conversation (a session's history), oldest first. */
  readonly history: ReadonlyArray<Prompt.MessageEncoded>
  readonly message: string
  /** The most this run may charge, in micro-credits. */
  readonly budget: Option.Option<Micros>
  readonly sessionId: Option.Option<string>
  /** Whose files the file tools see: a session's workspace, or the end user's own (''). */
  readonly workspace: string
  readonly parentRunId: Option.Option<string>
  readonly depth: number
  /** The environment `run_code`'s sandbox is built from (a session's); none: an empty sandbox. */
  readonly environmentId?: string | null | undefined
  /** The sandbox of the conversation (a session keeps one while active); none: the run makes its own. */
  readonly sandbox?: SandboxHolder | undefined
  /**
   * Function tools the caller defines and runs itself (`tools` of `/v1/chat/completions` and `/v1/responses`): the
   * model is offered them beside the agent's own; a step that calls one ends the run with the call handed back
   * (`RunResult.clientToolCalls`) instead of running it here.
   */
  readonly clientTools?: ReadonlyArray<ClientTool> | undefined
  /** Applies to the run's first model call only, as the Agents SDK resets it, so `required` cannot loop. */
  readonly toolChoice?: LanguageModel.ToolChoice<string> | undefined
  /**
   * The form the answer must take (structured output): every model call is asked for it, and the final answer is
   * checked against it before the run completes (a mismatch fails the run with `model_output_invalid`).
   */
  readonly outputFormat?: OutputFormat | undefined
  /**
   * The conversation in `history` already ends where the model must go on (tool results the caller sent back):
   * `message` is not added as a new user message.
   */
  readonly resume?: boolean | undefined
  /**
   * Knowledge bases the caller names for this run (`file_search` tools of `/v1/responses`), searched in the
   * caller's partition; by default the agent's own (`knowledge_bases`, its owner's).
   */
  readonly knowledge?: { readonly storeIds: ReadonlyArray<string>; readonly maxResults?: number | undefined } | undefined
  /** Where the run's row goes; by default its own statements. Not passed on to subagents' runs. */
  readonly ledger?: RunLedger | undefined
  /**
   * What the run's charges are keyed by (`<chargeKey>:<step>`): the run id by default. A session's turn passes its
   * own identity (`session:<id>:<turn>`), so a turn that is ever run again cannot charge a step twice (issue 33).
   */
  readonly chargeKey?: string | undefined
  /**
   * Asked before every charge: false stops the run (`owner_lost`) before it bills. A session's turn passes whether its
   * runner still holds the session's shard, so a runner that lost it (paused, cut from the database) bills nothing.
   */
  readonly fence?: Effect.Effect<boolean> | undefined
}

/** A function tool the caller runs: its name, description and JSON Schema of its arguments, passed on as-is. */
export interface ClientTool {
  readonly name: string
  readonly description?: string | undefined
  readonly parameters: unknown
}

export interface RunResult {
  readonly status: "completed" | "failed"
  /** The answer's text, every step's text joined. */
  readonly output: string
  readonly reasoning: string
  readonly creditsCharged: Micros
  readonly inputTokens: number
  readonly outputTokens: number
  readonly failure: Option.Option<{ readonly code: string; readonly message: string }>
  /** The messages this run added to the conversation, for a session's history. */
  readonly messages: ReadonlyArray<Prompt.MessageEncoded>
  /** Calls of `clientTools` the run stopped at, for the caller to run (empty otherwise). */
  readonly clientToolCalls: ReadonlyArray<{ readonly id: string; readonly name: string; readonly params: unknown }>
}

/** Deepest delegation chain: the root run is depth 0, its subagent 1, ... */
export const MAX_DELEGATION_DEPTH = 3
/** The longest a step waits for a resting provider of its chain (`Retry-After`, an open breaker) before failing. */
export const MAX_CHAIN_WAIT_MS = 10_000
/** Model calls in one run: a model that keeps calling tools is stopped rather than billed forever. */
export const MAX_STEPS = 12

const DEFAULT_INSTRUCTIONS = "You are a helpful expert."

/** A run cannot go on: the event to emit and the failure to record. */
class Stop {
  constructor(
    readonly code: string,
    readonly message: string,
    readonly before: ReadonlyArray<InternalEvent> = [],
    /** The model call's own error, for the fallback rule. */
    readonly error?: unknown
  ) {}
}

/** Maps a model failure to the `code` of `run.failed` (docs/events.md). */
export const failureOf = (error: unknown): { code: string; message: string } => {
  if (Schema.is(AiError.AiError)(error)) {
    // The builtin model's failures are the model's own (`/fail`), not an upstream's.
    if (error._tag === "UnknownError" && error.module === "BuiltinModel") {
      return { code: "model_error", message: error.description ?? error.message }
    }
    return describeFailure(error)
  }
  const tagged = error as { _tag?: string; message?: string; description?: string; reason?: string }
  const message = typeof tagged?.message === "string" && tagged.message.length > 0 ? tagged.message : String(error)
  switch (tagged?._tag) {
    case "UpstreamTimeout":
    case "TimeoutException":
      return { code: "upstream_timeout", message }
    case "HttpResponseError":
      return { code: "upstream_error", message }
    case "HttpRequestError":
      return { code: "upstream_unavailable", message }
    case "MalformedOutput":
    case "MalformedInput":
      return { code: "model_output_invalid", message }
    default:
      return { code: "model_error", message }
  }
}

const rateOf = (text: string) => parseCredits(text) ?? 0n

/**
 * Credits of a model call: tokens at the model's per-1k rates, rounded up to the micro-credit. `cachedTokens` are
 * the part of `inputTokens` read from the provider's prompt cache, at the model's cached rate.
 */
export const costOf = (model: ResolvedModel, inputTokens: number, outputTokens: number, cachedTokens = 0): Micros => {
  const cached = BigInt(Math.min(Math.max(cachedTokens, 0), inputTokens))
  const numerator = (BigInt(inputTokens) - cached) * rateOf(model.entry.inputPer1k) +
    cached * rateOf(model.entry.cachedInputPer1k) +
    BigInt(outputTokens) * rateOf(model.entry.outputPer1k)
  return (numerator + 999n) / 1000n
}

const DelegateParameters = Schema.Struct({
  agent: Schema.String.annotations({ description: "identifier of one of this agent's subagents" }),
  message: Schema.String.annotations({ description: "what the subagent should do" })
})

export class RunEngine extends Effect.Service<RunEngine>()("atrium/runtime/RunEngine", {
  effect: Effect.gen(function*() {
    const models = yield* Models
    const health = yield* ProviderHealth
    const repo = yield* RunsRepo
    const runPayer = yield* RunPayer
    const approvals = yield* Approvals
    const codeRunner = yield* CodeRunner
    const mcpTools = yield* McpTools
    const knowledgeSearch = yield* KnowledgeSearch

    /**
     * Runs one turn of `request`, telling every step through `emit`. It always ends with `complete` or `error` (an
     * interrupted run ends with neither: its caller decides what to say), and records the outcome.
     */
    const execute = (
      request: RunRequest,
      emit: (event: InternalEvent) => Effect.Effect<void>,
      resolveSubagent: (identifier: string, payer: Partition) => Effect.Effect<Option.Option<RunnableAgent>>
    ): Effect.Effect<RunResult> =>
      Effect.gen(function*() {
        const { agent, payer } = request
        let spent = 0n
        let inputTokens = 0
        let outputTokens = 0
        // Which tools were denied, for self-evolution: a name a model made up is kept, but not at any length.
        const deniedTools: Array<string> = []
        let output = ""
        let reasoning = ""
        const added: Array<Prompt.MessageEncoded> = request.resume === true
          ? []
          : [{ role: "user", content: [{ type: "text", text: request.message }] }]
        const clientToolCalls: Array<{ id: string; name: string; params: unknown }> = []
        const clientNames = new Set((request.clientTools ?? []).map((tool) => tool.name))

        // The run's record is bookkeeping: if the database refuses it, the stream still ends with run.failed and
        // [DONE] (a failed start fails the run below; a failed finish is logged).
        const ledger = request.ledger ?? repo
        const started = ledger.start({
          id: request.runId,
          agentId: agent.id,
          agentVersion: agent.version,
          payerId: payer.accountId,
          endUserId: payer.endUserId,
          sessionId: Option.getOrNull(request.sessionId),
          parentRunId: Option.getOrNull(request.parentRunId)
        })
        const record = (status: "completed" | "failed" | "cancelled", failure: Option.Option<{ code: string; message: string }>) =>
          ledger.finish(request.runId, {
            status,
            failureCode: Option.getOrNull(Option.map(failure, (f) => f.code)),
            failureMessage: Option.getOrNull(Option.map(failure, (f) => f.message.slice(0, 1000))),
            inputTokens,
            outputTokens,
            creditsCharged: spent,
            answerChars: output.trim().length,
            deniedTools
          }).pipe(Effect.catchAllCause((cause) => Effect.logError("the run's record could not be written", cause)))
        const result = (status: "completed" | "failed", failure: Option.Option<{ code: string; message: string }>): RunResult => ({
          status,
          output,
          reasoning,
          creditsCharged: spent,
          inputTokens,
          outputTokens,
          failure,
          messages: added,
          clientToolCalls
        })

        // A run without a conversation's sandbox gets one of its own, released when the run ends.
        const ownHolder = request.sandbox === undefined ? yield* makeSandboxHolder : undefined
        const holder = request.sandbox ?? ownHolder!

        const body = Effect.gen(function*() {
          yield* emit({
            type: "preparing",
            run_id: request.runId,
            agent: agent.identifier,
            ...Option.match(request.sessionId, { onNone: () => ({}), onSome: (session_id) => ({ session_id }) })
          })
          yield* started

          const trial = yield* trialGate(request)
          if (Option.isSome(trial)) {
            yield* emit(trial.value)
            return "trial_exhausted" as const
          }

          // The expert's model, then its fallbacks; a model removed from the providers setting is left out.
          const chain: Array<ResolvedModel> = []
          for (const id of [agent.config.model, ...(agent.config.fallback_models ?? [])]) {
            const resolved = yield* models.resolve(id)
            if (Option.isSome(resolved) && !chain.some((m) => m.entry.id === resolved.value.entry.id)) chain.push(resolved.value)
          }
          if (chain.length === 0) {
            return yield* Effect.fail(
              new Stop(
                "model_unavailable",
                `The expert's model "${agent.config.model}" is not offered by this platform any more (see GET /v1/models): its owner must choose another.`
              )
            )
          }
          // The expert's remote MCP servers, connected for this run (closed when it ends).
          const remote = yield* Effect.acquireRelease(mcpTools.open(agent.config, payer, agent.ownerId), (r) => r.close)
          const knowledge = knowledgeOf(request)
          const tools = { ...remote.definitions, ...toolsOf(agent.config, request.depth) }
          if (knowledge !== undefined) tools[FILE_SEARCH] = lenientTool(FILE_SEARCH, FILE_SEARCH_DESCRIPTION, FileSearchParameters)
          for (const tool of request.clientTools ?? []) {
            tools[tool.name] = Tool.make(tool.name, tool.description === undefined ? {} : { description: tool.description })
              .setParameters(
                Schema.Struct({}, Schema.Record({ key: Schema.String, value: Schema.Unknown })).annotations({
                  jsonSchema: (tool.parameters ?? { type: "object", properties: {} }) as object
                })
              ) as unknown as ReturnType<typeof lenientTool>
          }
          const toolkit = Object.keys(tools).length === 0 ? undefined : ({
            tools,
            handle: () => Effect.dieMessage("the run engine resolves tool calls itself")
          } as unknown as Toolkit.WithHandler<any>)
          const policies = new Map([
            ...remote.policies,
            ...agent.config.tools.map((tool) => [tool.name as string, tool.permission] as const)
          ])
          // Knowledge the expert has, or the caller named, is searched unless the expert's tools say otherwise.
          if (knowledge !== undefined && (request.knowledge !== undefined || !policies.has(FILE_SEARCH))) policies.set(FILE_SEARCH, "allow")
          const context: ToolContext = { agentId: agent.id ?? "", partition: payer, workspace: request.workspace, knowledge }
          const conversation: Array<Prompt.MessageEncoded> = [
            { role: "system", content: agent.config.instructions.trim().length > 0 ? agent.config.instructions : DEFAULT_INSTRUCTIONS },
            ...request.history,
            ...added
          ]
          let lastOutputTokens = 0

          for (let step = 1; step <= MAX_STEPS; step++) {
            yield* emit({ type: "turn_start", turn: step })
            const estimate = costOf(chain[0]!, tokensOf(JSON.stringify(conversation)), lastOutputTokens)
            yield* affordable(request, spent, estimate)

            const { call, model } = yield* callChain(chain, conversation, toolkit, emit, step === 1 ? request.toolChoice : undefined).pipe(
              Effect.locally(CurrentOutputFormat, request.outputFormat)
            )
            inputTokens += call.inputTokens
            outputTokens += call.outputTokens
            lastOutputTokens = call.outputTokens
            output += call.text
            reasoning += call.reasoning
            // Each step at the rate of the model that answered it.
            const cost = costOf(model, call.inputTokens, call.outputTokens, call.cachedInputTokens)
            // The caller's budget is a promise: past it the platform, not the caller, pays for the step.
            const charge = Option.match(request.budget, {
              onNone: () => cost,
              onSome: (budget) => (cost < budget - spent ? cost : budget - spent)
            })
            // Charged first, told after: a `usage.token` always names credits that really left the wallet.
            if (charge > 0n) {
              if (request.fence !== undefined && !(yield* request.fence)) {
                return yield* Effect.fail(new Stop("owner_lost", "This runner no longer holds the session; the turn stopped before billing."))
              }
              yield* runPayer.charge(payer.accountId, charge, {
                key: `${request.chargeKey ?? request.runId}:${step}`,
                description: `Run of ${agent.identifier} (${model.entry.id}, step ${step})`
              }).pipe(
                Effect.catchTag("InsufficientFunds", () =>
                  runPayer.balance(payer.accountId).pipe(
                    Effect.flatMap((balance) =>
                      Effect.fail(exhausted("wallet", spent + balance, spent, "Not enough credits for the next step."))
                    )
                  )),
                Effect.catchTag("PaymentFailed", (error) => Effect.fail(new Stop("billing_failed", error.message)))
              )
              spent += charge
            }
            yield* emit({
              type: "token_usage",
              model: model.entry.id,
              input_tokens: call.inputTokens,
              output_tokens: call.outputTokens,
              ...(call.cachedInputTokens > 0 ? { cached_input_tokens: call.cachedInputTokens } : {}),
              credits: toNumber(charge)
            })

            const assistant: Array<any> = []
            // Anthropic wants a step's signed thinking back before its tool calls when thinking is on.
            if (call.signature !== undefined && call.reasoning.length > 0) {
              assistant.push({
                type: "reasoning",
                text: call.reasoning,
                options: { anthropic: { type: "thinking", signature: call.signature } }
              })
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
            if (assistant.length > 0) {
              added.push({ role: "assistant", content: assistant })
              conversation.push({ role: "assistant", content: assistant })
            }
            if (call.toolCalls.length === 0) {
              const wrong = request.outputFormat === undefined ? undefined : checkOutput(request.outputFormat, call.text)
              if (wrong !== undefined) {
                return yield* Effect.fail(new Stop("model_output_invalid", `The model's answer was refused: ${wrong}.`))
              }
              return "completed" as const
            }
            // The caller runs its own tools: the run ends here and hands the calls back. Calls of the agent's own
            // tools in the same step are not run (the caller's next request continues from its tools' results).
            const forCaller = call.toolCalls.filter((toolCall) => clientNames.has(toolCall.name))
            if (forCaller.length > 0) {
              clientToolCalls.push(...forCaller)
              return "completed" as const
            }

            const results: Array<any> = []
            for (const toolCall of call.toolCalls) {
              const outcome = yield* runToolCall(toolCall, policies, context, { ...request, sandbox: holder }, remote, emit, resolveSubagent, spent, (credits) => {
                spent += credits
              })
              if (outcome.denied) deniedTools.push(toolCall.name.slice(0, 200))
              // `providerExecuted` is required in the encoded form of a tool result (@effect/ai 0.37): without it the
              // next model call fails to decode the prompt.
              results.push({
                type: "tool-result",
                id: toolCall.id,
                name: toolCall.name,
                isFailure: outcome.isFailure,
                result: outcome.result,
                providerExecuted: false
              })
            }
            added.push({ role: "tool", content: results })
            conversation.push({ role: "tool", content: results })
          }
          return yield* Effect.fail(new Stop("max_steps", `The run stopped after ${MAX_STEPS} model calls.`))
        })

        const exit = yield* Effect.exit(Effect.interruptible(Effect.scoped(body))).pipe(
          Effect.ensuring(ownHolder === undefined ? Effect.void : ownHolder.release)
        )
        if (Exit.isSuccess(exit)) {
          yield* emit({
            type: "complete",
            usage: { input_tokens: inputTokens, output_tokens: outputTokens },
            credits_charged: toNumber(spent)
          })
          yield* record("completed", Option.none())
          return result("completed", Option.none())
        }
        if (Cause.isInterruptedOnly(exit.cause)) {
          yield* record("cancelled", Option.some({ code: "interrupted", message: "The run was interrupted." }))
          return yield* Effect.interrupt
        }
        const failure = Cause.failureOption(exit.cause)
        const stop = Option.isSome(failure) && failure.value instanceof Stop
          ? failure.value
          : new Stop("internal_error", "The run failed on our side.")
        if (Option.isNone(failure)) yield* Effect.logError("run failed", exit.cause)
        for (const event of stop.before) yield* emit(event)
        yield* emit({ type: "error", code: stop.code, message: stop.message })
        const outcome = Option.some({ code: stop.code, message: stop.message })
        yield* record("failed", outcome)
        return result("failed", outcome)
      }).pipe(Effect.uninterruptible, Effect.withSpan("RunEngine.execute", { attributes: { runId: request.runId } }))

    const exhausted = (reason: "budget" | "wallet", budget: Micros, spent: Micros, message: string) =>
      new Stop("budget_exhausted", message, [{
        type: "budget_exhausted",
        budget: toNumber(budget),
        spent: toNumber(spent),
        reason
      }])

    /** The next step must fit both the run's budget and the wallet, judged by what it will likely cost. */
    const affordable = (request: RunRequest, spent: Micros, estimate: Micros) =>
      Effect.gen(function*() {
        if (Option.isSome(request.budget) && spent + estimate > request.budget.value) {
          return yield* Effect.fail(exhausted("budget", request.budget.value, spent, "The run's budget is spent."))
        }
        const balance = yield* runPayer.balance(request.payer.accountId)
        if (balance < estimate || balance <= 0n) {
          return yield* Effect.fail(exhausted("wallet", spent + balance, spent, "Not enough credits for the next step."))
        }
      })

    /**
     * Spec 4.10 rule 4, 8: someone who has not unlocked an UNLOCK agent gets `free_trial_per_user` turns when the
     * agent allows trials; after that the turn says so instead of calling the model. The owner never needs a trial.
     * The allowance binds the paying account: its end users (`X-End-User-Id`) share it, so rotating the header
     * gets no more free turns (issue 15 item 2, docs/agents.md).
     */
    const trialGate = (request: RunRequest) =>
      Effect.gen(function*() {
        const { agent, payer } = request
        const billing = agent.config.billing
        if (billing.type !== "UNLOCK" || agent.ownerId === payer.accountId || agent.version === null || agent.id === null) {
          return Option.none<InternalEvent>()
        }
        const agentId = agent.id
        if (yield* repo.hasPurchased(payer.accountId, agentId)) return Option.none<InternalEvent>()
        const trial = yield* repo.takeTrial(agentId, payer.accountId, billing.allow_trial ? billing.free_trial_per_user : 0)
        if (trial.taken) return Option.none<InternalEvent>()
        return Option.some<InternalEvent>({
          type: "trial_exhausted",
          agent: agent.identifier,
          trials_used: trial.used,
          price: Number(billing.price)
        })
      })

    /** The knowledge this run's `file_search` searches: the caller's stores, else the expert's own. */
    const knowledgeOf = (request: RunRequest): KnowledgeScope | undefined => {
      const citations = { next: 0 }
      if (request.knowledge !== undefined && request.knowledge.storeIds.length > 0) {
        return { owner: request.payer, storeIds: request.knowledge.storeIds, maxResults: request.knowledge.maxResults ?? 10, citations }
      }
      const own = request.agent.config.knowledge_bases ?? []
      if (own.length === 0) return undefined
      return { owner: { accountId: request.agent.ownerId, endUserId: "" }, storeIds: own, maxResults: 10, citations }
    }

    const toolsOf = (config: ExpertConfig, depth: number) => {
      const tools: Record<string, ReturnType<typeof lenientTool>> = {}
      for (const tool of config.tools) if (isBuiltinTool(tool.name)) tools[tool.name] = definitionOf(tool.name)
      if (config.tools.some((tool) => tool.name === RUN_CODE)) {
        tools[RUN_CODE] = lenientTool(RUN_CODE, RUN_CODE_DESCRIPTION, RunCodeParameters)
      }
      if (config.subagents.length > 0 && depth < MAX_DELEGATION_DEPTH) {
        tools[DELEGATE_TOOL] = lenientTool(
          DELEGATE_TOOL,
          `Hands a task to one of your subagents and returns its answer. Subagents: ${config.subagents.join(", ")}.`,
          DelegateParameters
        )
      }
      return tools
    }

    /** One model call, streamed: text, thinking and tool-call arguments are emitted as they arrive. */
    const callModel = (
      model: LanguageModel.Service,
      conversation: ReadonlyArray<Prompt.MessageEncoded>,
      toolkit: Toolkit.WithHandler<any> | undefined,
      emit: (event: InternalEvent) => Effect.Effect<void>,
      toolChoice?: LanguageModel.ToolChoice<string> | undefined
    ) =>
      Effect.gen(function*() {
        let text = ""
        let thinking = ""
        let inputTokens = 0
        let outputTokens = 0
        let cachedInputTokens = 0
        let signature: string | undefined
        let thinkingOpen = false
        const announced = new Set<string>()
        const toolCalls: Array<{ id: string; name: string; params: unknown; options?: { google: { thoughtSignature: string } } }> = []
        yield* model.streamText({
          prompt: conversation,
          ...(toolkit === undefined ? {} : { toolkit, disableToolCallResolution: true }),
          ...(toolkit === undefined || toolChoice === undefined ? {} : { toolChoice: toolChoice as any })
        }).pipe(
          Stream.runForEach((part) => {
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
                thinking += part.delta
                return part.delta.length === 0 ? Effect.void : emit({ type: "reasoning", delta: part.delta })
              case "reasoning-end":
                if (!thinkingOpen) return Effect.void
                thinkingOpen = false
                return emit({ type: "thinking_status", status: "finished" })
              case "text-delta":
                text += part.delta
                return part.delta.length === 0 ? Effect.void : emit({ type: "text", delta: part.delta })
              case "tool-params-start":
                announced.add(part.id)
                return emit({ type: "tool_call", tool_call_id: part.id, name: part.name, status: "pending" })
              case "tool-params-delta":
                return emit({ type: "tool_call_chunk", tool_call_id: part.id, delta: part.delta })
              case "tool-call": {
                {
                  // Gemini signs a call made while thinking; the signature must go back with the call.
                  const signed = (part.metadata as { google?: { thoughtSignature?: unknown } } | undefined)?.google?.thoughtSignature
                  toolCalls.push({
                    id: part.id,
                    name: part.name,
                    params: part.params,
                    ...(typeof signed === "string" ? { options: { google: { thoughtSignature: signed } } } : {})
                  })
                }
                if (announced.has(part.id)) return Effect.void
                return emit({ type: "tool_call", tool_call_id: part.id, name: part.name, status: "pending", arguments: part.params })
              }
              case "finish":
                inputTokens = part.usage.inputTokens ?? inputTokens
                outputTokens = part.usage.outputTokens ?? outputTokens
                cachedInputTokens = part.usage.cachedInputTokens ?? cachedInputTokens
                return Effect.void
              case "error":
                return Effect.fail(part.error)
              default:
                return Effect.void
            }
          }),
          Effect.mapError((error) => {
            const failure = failureOf(error)
            return new Stop(failure.code, failure.message, [], error)
          })
        )
        if (thinkingOpen) yield* emit({ type: "thinking_status", status: "finished" })
        // A provider that reports no usage is billed by the same estimate the builtin model uses.
        if (inputTokens === 0) inputTokens = tokensOf(JSON.stringify(conversation))
        if (outputTokens === 0) outputTokens = tokensOf(text + thinking + JSON.stringify(toolCalls.map((c) => c.params)))
        return { text, reasoning: thinking, signature, inputTokens, outputTokens, cachedInputTokens, toolCalls }
      })

    /**
     * One step's model call through the expert's chain (docs/models.md): the first model whose provider's breaker
     * admits it; a retryable failure before anything of the step was streamed moves to the next model, told as
     * `run.model_fallback`. Once the step has streamed output a failure ends the run, since a client cannot take
     * back text it was shown. When every provider of the chain rests for a short while (a `Retry-After`, an open
     * breaker), the step waits for the first of them, once.
     */
    const callChain = (
      chain: ReadonlyArray<ResolvedModel>,
      conversation: ReadonlyArray<Prompt.MessageEncoded>,
      toolkit: Toolkit.WithHandler<any> | undefined,
      emit: (event: InternalEvent) => Effect.Effect<void>,
      toolChoice?: LanguageModel.ToolChoice<string> | undefined
    ) =>
      Effect.gen(function*() {
        let last: Stop | undefined
        let previous: ResolvedModel | undefined
        let waited = false
        const tried = new Set<string>()
        // Each pass tries every model once; a second pass only after waiting out a short rest (bounded loop).
        while (true) {
          let next: ResolvedModel | undefined
          for (const candidate of chain) {
            if (tried.has(candidate.entry.id)) continue
            if (candidate.entry.kind === "builtin" || (yield* health.admit(candidate.entry.provider))) {
              next = candidate
              break
            }
          }
          if (next === undefined) {
            const waits = (yield* Effect.forEach(chain, (m) => health.waitFor(m.entry.provider))).filter((ms) => ms > 0)
            const soonest = waits.length === 0 ? Infinity : Math.min(...waits)
            if (waited || soonest > MAX_CHAIN_WAIT_MS) break
            waited = true
            tried.clear()
            yield* Effect.sleep(Duration.millis(soonest))
            continue
          }
          if (previous !== undefined && last !== undefined) {
            const rest = Option.flatMap(retryable(last.error, yield* Clock.currentTimeMillis), (r) => r.retryAfter)
            yield* emit({
              type: "model_fallback",
              from: previous.entry.id,
              to: next.entry.id,
              code: last.code,
              message: last.message,
              ...(Option.isSome(rest) ? { retry_after_ms: Duration.toMillis(rest.value) } : {})
            })
          }
          tried.add(next.entry.id)
          let streamed = false
          const outcome = yield* Effect.either(
            callModel(next.model, conversation, toolkit, (event) => {
              streamed = true
              return emit(event)
            }, toolChoice)
          )
          if (outcome._tag === "Right") {
            if (next.entry.kind !== "builtin") yield* health.succeeded(next.entry.provider)
            return { call: outcome.right, model: next }
          }
          const failure = outcome.left
          const again = retryable(failure.error, yield* Clock.currentTimeMillis)
          if (Option.isNone(again)) return yield* Effect.fail(failure)
          yield* health.failed(next.entry.provider, again.value.retryAfter)
          if (streamed) return yield* Effect.fail(failure)
          last = failure
          previous = next
        }
        return yield* Effect.fail(
          // Transient (the breakers rest): a code clients may retry, unlike a model that is not offered at all.
          last ?? new Stop("upstream_unavailable", "Every provider of the expert's models is failing; try again later.")
        )
      })

    /** A tool call through the agent's policy: denied, asked for, or run; the result goes back to the model. */
    const runToolCall = (
      toolCall: { id: string; name: string; params: unknown },
      policies: ReadonlyMap<string, "allow" | "ask" | "deny">,
      context: ToolContext,
      request: RunRequest,
      remote: RemoteTools,
      emit: (event: InternalEvent) => Effect.Effect<void>,
      resolveSubagent: (identifier: string, payer: Partition) => Effect.Effect<Option.Option<RunnableAgent>>,
      spent: Micros,
      addSpent: (credits: Micros) => void
    ) =>
      Effect.gen(function*() {
        const { id, name, params } = toolCall
        const deny = (reason: string) =>
          Effect.as(emit({ type: "tool_denied", tool_call_id: id, name, reason }), {
            isFailure: true,
            denied: true,
            result: `The tool call was denied: ${reason}`
          })
        const policy = name === DELEGATE_TOOL ? "allow" : policies.get(name)
        if (policy === undefined) return yield* deny("the agent does not have this tool")
        if (policy === "deny") return yield* deny("denied by the agent's tool policy")
        if (policy === "ask") {
          const approval = yield* approvals.open(request.payer, request.sessionId)
          yield* emit({
            type: "Ask",
            approval_id: approval.id,
            tool_call_id: id,
            name,
            arguments: params,
            expires_at: approval.expiresAt.toISOString()
          })
          const decision = yield* approval.wait
          if (!decision.approved) return yield* deny(decision.reason.length > 0 ? decision.reason : "denied by the user")
        }

        yield* emit({ type: "tool_call", tool_call_id: id, name, status: "running" })
        const outcome = yield* Effect.either(
          name === DELEGATE_TOOL
            ? delegate(id, params, request, emit, resolveSubagent, spent, addSpent)
            : remote.has(name)
            ? remote.call(name, params)
            : name === FILE_SEARCH && context.knowledge !== undefined
            ? Effect.provideService(runFileSearch(params, context, request.payer.accountId), KnowledgeSearch, knowledgeSearch)
            : name === RUN_CODE
            ? codeRunner.run(params, { ...context, holder: request.sandbox!, environmentId: request.environmentId ?? null })
            : isBuiltinTool(name)
            ? Effect.provideService(runBuiltin(name, params, context), RunsRepo, repo)
            : Effect.fail({ message: `Unknown tool ${name}.` })
        )
        if (outcome._tag === "Left") {
          const code = (outcome.left as { code?: unknown }).code
          yield* emit({
            type: "tool_call",
            tool_call_id: id,
            name,
            status: "failed",
            error: outcome.left.message,
            ...(typeof code === "string" ? { code } : {})
          })
          return { isFailure: true, denied: false, result: outcome.left.message }
        }
        yield* emit({ type: "tool_call", tool_call_id: id, name, status: "completed" })
        yield* emit({ type: "tool_call_result", tool_call_id: id, output: outcome.right })
        return { isFailure: false, denied: false, result: outcome.right }
      })

    /**
     * Delegation: a child run of a listed subagent, paid by the same payer, with half of what is left of the
     * budget. Only its `approval.required` events reach the parent's stream (a human must be able to answer them);
     * its answer comes back as the tool's output.
     */
    const delegate = (
      delegationId: string,
      params: unknown,
      request: RunRequest,
      emit: (event: InternalEvent) => Effect.Effect<void>,
      resolveSubagent: (identifier: string, payer: Partition) => Effect.Effect<Option.Option<RunnableAgent>>,
      spent: Micros,
      addSpent: (credits: Micros) => void
    ): Effect.Effect<unknown, { message: string }> =>
      Effect.gen(function*() {
        const decoded = Schema.decodeUnknownOption(DelegateParameters)(params)
        if (Option.isNone(decoded)) {
          return yield* Effect.fail({ message: "Invalid arguments for delegate: agent and message are required strings." })
        }
        const { agent: identifier, message } = decoded.value
        if (!request.agent.config.subagents.includes(identifier)) {
          return yield* Effect.fail({ message: `${identifier} is not one of this agent's subagents.` })
        }
        if (request.depth + 1 > MAX_DELEGATION_DEPTH) {
          return yield* Effect.fail({ message: `Delegation is limited to a depth of ${MAX_DELEGATION_DEPTH}.` })
        }
        const child = yield* resolveSubagent(identifier, request.payer)
        if (Option.isNone(child)) return yield* Effect.fail({ message: `The subagent ${identifier} is not available.` })
        yield* emit({ type: "delegation_started", delegation_id: delegationId, agent: identifier })
        const childResult = yield* execute(
          {
            runId: newId("run"),
            agent: child.value,
            payer: request.payer,
            history: [],
            message,
            // Half of what is left, not of the whole budget: the parent may already have spent most of it, and the
            // tree as a whole must stay within what the caller allowed.
            budget: Option.map(request.budget, (budget) => (budget > spent ? budget - spent : 0n) / 2n),
            sessionId: request.sessionId,
            workspace: request.workspace,
            parentRunId: Option.some(request.runId),
            depth: request.depth + 1
          },
          (event) => event.type === "Ask" ? emit(event) : Effect.void,
          resolveSubagent
        )
        addSpent(childResult.creditsCharged)
        yield* emit({
          type: "delegation_completed",
          delegation_id: delegationId,
          agent: identifier,
          output: childResult.output,
          status: childResult.status
        })
        if (childResult.status === "failed") {
          return yield* Effect.fail({
            message: `The subagent ${identifier} failed: ${Option.getOrElse(Option.map(childResult.failure, (f) => f.message), () => "")}`
          })
        }
        return { agent: identifier, output: childResult.output }
      })

    /**
     * A run as a stream of internal events. The run lives in the stream's scope: when the consumer stops (a client
     * that disconnects from a stateless run), the run is interrupted and recorded as cancelled.
     */
    const stream = (
      request: RunRequest,
      resolveSubagent: (identifier: string, payer: Partition) => Effect.Effect<Option.Option<RunnableAgent>>,
      onResult: (result: RunResult) => Effect.Effect<void> = () => Effect.void
    ): Stream.Stream<InternalEvent> =>
      Stream.unwrapScoped(Effect.gen(function*() {
        const mailbox = yield* Mailbox.make<InternalEvent>()
        yield* execute(request, (event) => Effect.asVoid(mailbox.offer(event)), resolveSubagent).pipe(
          Effect.tap(onResult),
          Effect.ensuring(mailbox.end),
          Effect.forkScoped
        )
        return Mailbox.toStream(mailbox)
      }))

    return { execute, stream } as const
  }),
  dependencies: [Models.Default, ProviderHealth.Default, RunsRepo.Default, Approvals.Default, CodeRunner.Default, McpTools.Default]
}) {}
