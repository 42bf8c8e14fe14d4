import type * as Prompt from "@effect/ai/Prompt"
import { createHash } from "node:crypto"
import { Cause, Clock, Duration, Effect, Exit, FiberRef, FiberSet, HashSet, identity, Mailbox, Option, Schedule, Schema, Stream } from "effect"
import { type Micros, toNumber } from "../platform/Money.js"
import type { InternalEvent } from "./Events.js"
import { DELEGATE_TOOL, tokensOf } from "./models/Builtin.js"
import { Models, type ResolvedModel } from "./models/Models.js"
import { checkOutput, CurrentOutputFormat } from "./models/OutputFormat.js"
import { assistantContent, type ModelCall, ModelChain } from "./ModelChain.js"
import { ExpertMemory, type MemoryOwner, PaymentFailed, type RunCharge, RunPayer } from "./Ports.js"
import { RunId } from "./Domain.js"
import { storableText, storableValue } from "../platform/Storable.js"
import { RunsRepo } from "./Repo.js"
import type { Decision } from "./Approvals.js"
import {
  costOf,
  CurrentChainWait,
  type Emit,
  MAX_DELEGATION_DEPTH,
  HOLD_STEP_OUTPUT_TOKENS,
  HOLD_STEPS,
  MAX_STEPS,
  type DurableSteps,
  type ResolveSubagent,
  type RunnableAgent,
  type RunRequest,
  type RunResult,
  type StepCodec
} from "./Run.js"
import { RunState } from "./RunState.js"
import {
  BillingFailed,
  codeOf,
  eventsBefore,
  exhausted,
  isRunStop,
  ModelOutputInvalid,
  ModelUnavailable,
  OwnerLost,
  StepLimitReached
} from "./RunStop.js"
import { DelegateParameters, knowledgeOf, memoryEnabled, toolkitOf } from "./RunTools.js"
import { makeSandboxHolder } from "./sandbox/Holder.js"
import { McpTools } from "./tools/Mcp.js"
import { ToolCalls } from "./ToolCalls.js"
import { annotateSpan, Attr, chargedToSpan, genAiSpan, Operation, traced, TraceSink, type TraceRun } from "./Tracing.js"
import { FILE_SEARCH } from "./tools/FileSearch.js"
import { CONTEXT_FACTS, isMemoryTool, MEMORY_ENABLED_TOOLS, renderMemory } from "./tools/Memory.js"
import type { ToolContext } from "./tools/Tools.js"

/**
 * The run engine, shared by `/v1/agents/run`, `/v1/chat/completions` and sessions (DESIGN.md §4): model call ->
 * tool calls -> model call ... until the model answers without tools. Every step is told as internal events through
 * `emit`; the caller decides where they go (an HTTP stream, a session's log). Usage is paid through the `RunPayer` port (billing's wallet)
 * in two phases (docs/billing.md, "Holds"): the run holds credits when its first step is judged, charges each model
 * call against the hold without asking the wallet, and posts its steps (one ledger entry each, keyed per step) and
 * voids the rest when it ends: two wallet round trips per run, however many steps, plus one per extension.
 */

const DEFAULT_INSTRUCTIONS = "You are a helpful expert."

/** The pauses of a durable run waiting for its wallet: 1 s doubling, at most 30 s apart. */
const WALLET_WAIT = Schedule.exponential("1 second", 2).pipe(Schedule.union(Schedule.spaced("30 seconds")))
/** How long a durable run's settle waits for the wallet before the run records what the ledger holds. */
const SETTLE_PATIENCE = Duration.minutes(5)

/**
 * Asks the wallet again while it does not answer (`PaymentFailed` of an outage: each ask already waited out its own
 * window, `RunPayerLive`), on `WALLET_WAIT`, for `patience` (unbounded: the caller's race bounds it). A refusal is
 * final. The request's key (the hold's id, the charges' keys) makes an ask that did commit answer from the wallet.
 */
const walletPatient = <A, R>(effect: Effect.Effect<A, PaymentFailed, R>, patience?: Duration.Duration): Effect.Effect<A, PaymentFailed, R> =>
  Effect.retry(effect, {
    schedule: patience === undefined ? WALLET_WAIT : Schedule.upTo(WALLET_WAIT, patience),
    while: (error) => error.outage === true
  })

/**
 * `effect` in a fiber of its own that this one can stop waiting for, even from an uninterruptible region (a run's
 * settle): interrupted, it answers at once and leaves `effect`'s own interruption behind (its cluster call may have to
 * tell the wallet's runner through the very storage that is down).
 */
const lettingGo = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.interruptible(Effect.disconnect(Effect.interruptible(effect)))

/** Whose run a trace is: the expert's creator and the run's payer (with its end user) may read it. */
const traceRunOf = (request: RunRequest): TraceRun => ({
  runId: request.runId,
  agentId: request.agent.id,
  agent: request.agent.identifier,
  agentVersion: request.agent.version,
  ownerId: request.agent.ownerId,
  payerId: request.payer.accountId,
  endUserId: request.payer.endUserId,
  sessionId: Option.getOrNull(request.sessionId),
  captureContent: request.agent.traceContent === true
})

/** A model step as a durable run records it: the call (JSON already) and its charge (micro-credits as a string). */
const modelStepCodec: StepCodec<{ readonly call: ModelCall; readonly charge: Micros }> = {
  encode: ({ call, charge }) => ({ call, charge: charge.toString() }),
  decode: (json) => {
    const { call, charge } = json as { call: ModelCall; charge: string }
    return { call, charge: BigInt(charge) }
  }
}
/** A tool call's outcome, as the model is told it and a durable run records it. */
type ToolOutcome = { readonly denied: boolean; readonly isFailure: boolean; readonly result: unknown }

/**
 * A durable delegation's child run id: the parent run and the call's place (`step/index`), so every execution of the
 * parent's workflow runs the same child, whose charges (`<child>:<step>`) the wallet then takes once.
 */
const childRunId = (parentRunId: RunId, place: string) =>
  RunId.make(`run_${createHash("sha256").update(`${parentRunId}\ndelegate/${place}`).digest("base64url").replace(/[-_]/g, "").slice(0, 20)}`)

/** A result that is JSON as it is (a tool call's outcome). */
const jsonCodec = <A>(): StepCodec<A> => ({ encode: (value) => value, decode: (json) => json as A })
const trialCodec: StepCodec<Option.Option<InternalEvent>> = {
  encode: Option.getOrNull,
  decode: (json) => Option.fromNullable(json as InternalEvent | null)
}

export class RunEngine extends Effect.Service<RunEngine>()("atrium/runtime/RunEngine", {
  scoped: Effect.gen(function*() {
    const models = yield* Models
    const repo = yield* RunsRepo
    /**
     * Settles asked again after their runs' ends (`settleLater`): bounded in number, and interrupted with this
     * service (a runner stopping loses them, as docs/billing.md "Holds" says).
     */
    const lateSettles = yield* FiberSet.make()
    const lateSettlesAtOnce = yield* Effect.makeSemaphore(64)
    const runPayer = yield* RunPayer
    const mcpTools = yield* McpTools
    const modelChain = yield* ModelChain
    const toolCalls = yield* ToolCalls
    const memory = yield* Effect.serviceOption(ExpertMemory)
    // Absent where no one reads traces (tests of the engine alone): runs are then not traced at all.
    const traceSink = yield* Effect.serviceOption(TraceSink)

    /**
     * Runs one turn of `request`, telling every step through `emit`. It always ends with `complete` or `error` (an
     * interrupted run ends with neither: its caller decides what to say), and records the outcome.
     */
    const execute = (request: RunRequest, tell: Emit, resolveSubagent: ResolveSubagent): Effect.Effect<RunResult> =>
      Effect.gen(function*() {
        // Every event is stored (a session's log, a background run's events): one a model or an upstream said that
        // PostgreSQL refuses (a NUL in an upstream's error message, say) is mended here, whatever made it.
        const emit: Emit = (event) => tell(storableValue(event))
        const { agent, payer } = request
        const state = new RunState(request)
        const clientNames = new Set((request.clientTools ?? []).map((tool) => tool.name))
        // A background run records each step (runs/Background.ts); a foreground run runs them as they come.
        const recorded = <A, E>(name: string, codec: StepCodec<A>, effect: Effect.Effect<A, E>) =>
          request.durable === undefined ? effect : request.durable.step(name, codec, effect)

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
          parentRunId: Option.getOrNull(request.parentRunId),
          agent: agent.identifier
        })
        const record = (status: "completed" | "failed" | "cancelled", failure: Option.Option<{ code: string; message: string }>) =>
          ledger.finish(request.runId, state.record(status, failure)).pipe(
            Effect.catchAllCause((cause) => Effect.logError("the run's record could not be written", cause))
          )

        /**
         * The run's hold (docs/billing.md, "Holds"), keyed like its charges: a run executed again (a durable run's
         * next owner) or a turn run again asks for the same hold and finds it. `held` is the hold's amount as the
         * wallet last answered (none asked yet: 0), `used` what this run's own steps charged against it, and
         * `unposted` those steps' charges, posted by `settle` when the run ends.
         */
        const holdId = request.chargeKey ?? request.runId
        let held = 0n
        let asked = false
        let used = 0n
        /**
         * When the hold is past half its life (ms since the epoch): a run still going then (a long approval wait, slow
         * steps) asks for it again at its next step, in one round trip, so the wallet never voids a live run's hold.
         */
        let renewAt = 0
        /** What the hold assumes one step costs (`HOLD_STEP_OUTPUT_TOKENS`), judged before each step. */
        let perStep = 0n
        const unposted = new Map<number, { readonly amount: Micros; readonly charge: RunCharge }>()
        const owe = (step: number, amount: Micros, description: string) => {
          if (unposted.has(step)) return
          unposted.set(step, {
            amount,
            charge: { key: `${holdId}:${step}`, description, fence: request.chargeFence ?? null }
          })
          used += amount
        }
        /**
         * Makes the hold cover `need` more than this run used, in one round trip when it does not already: first the
         * run's budget, or without one `HOLD_STEPS` times what a step is assumed to cost (`perStep`, at least `need`);
         * later, as much again as it holds.
         * What the hold can still pay after (the wallet gives what is available, never more).
         */
        const cover = (need: Micros) =>
          Effect.gen(function*() {
            const now = yield* Clock.currentTimeMillis
            const covered = asked && held - used >= need && held - used > 0n
            if (covered && now < renewAt) return held - used
            const budget = Option.getOrUndefined(request.budget)
            let target = !asked
              ? used + (budget !== undefined ? budget : (need > perStep ? need : perStep) * BigInt(HOLD_STEPS))
              : covered
              // Renewed, not extended: the same amount, kept alive for another life.
              ? held
              : used + (need > held ? need : held)
            if (!covered) {
              if (budget !== undefined && target > budget && budget >= used + need) target = budget
              if (target < used + need) target = used + need
            }
            asked = true
            const grant = yield* runPayer.hold(payer.accountId, holdId, target).pipe(
              // A durable run has no client waiting on it: a wallet that does not answer is waited for, for as long as
              // the run lives (its deadline and its cancel race its steps), rather than failing it `billing_failed`.
              request.durable === undefined ? identity : walletPatient,
              Effect.catchTag("PaymentFailed", (error) => Effect.fail(new BillingFailed({ message: error.message })))
            )
            held = grant.amount
            // An expiry not ahead of this runner's clock (clocks that disagree) is not chased step after step.
            renewAt = grant.expiresAt > now ? now + Math.floor((grant.expiresAt - now) / 2) : Number.MAX_SAFE_INTEGER
            return held - used
          })
        /**
         * Ends the hold: posts what the run's steps used and voids the rest (whatever way the run ended). Answers
         * whether the settle was let go because this run's fiber was interrupted (its runner stopping): the run has
         * then not ended, and says nothing more.
         *
         * `cut`: the run was cut short (a cancel, its runner stopping) and lets go of its settle without waiting out
         * an outage; its next owner settles or voids the hold and counts the run from the ledger (a session's next
         * activation, a background run's resumed workflow). A run that ended on its own has its settle sent again
         * through an outage by the payer (`RunPayerLive`): given up, it would record steps its payer was never charged.
         */
        const settle = (cut: boolean): Effect.Effect<boolean> => Effect.suspend(() => {
          if (!asked && unposted.size === 0) return Effect.succeed(false)
          const charges = [...unposted.entries()].sort(([a], [b]) => a - b).map(([, c]) => c)
          const patient = request.durable !== undefined && !cut
          const settling = runPayer.settle(payer.accountId, holdId, charges, request.chargeFence ?? null, cut).pipe(
            // A durable run that ended on its own is billed once: its settle waits for the wallet (`SETTLE_PATIENCE`)
            // rather than leave its steps unposted. One cut short lets go, as every run does (its next owner settles).
            // Its runner stopping meanwhile interrupts the wait (this runs uninterruptible otherwise, and would hold
            // the runner's shutdown for minutes): the workflow has recorded no end, and its next owner settles.
            patient ? (settling) => lettingGo(walletPatient(settling, SETTLE_PATIENCE)) : identity
          )
          // Raced in fibers of their own (`lettingGo`): this runs uninterruptible, and a settle that lets go must stop
          // waiting.
          const released = request.givenUp === undefined ? settling : Effect.raceFirst(
            lettingGo(settling),
            Effect.interruptible(Effect.zipRight(
              request.givenUp,
              Effect.fail(new PaymentFailed({ message: "The run's owner gave it up: its next owner settles its hold." }))
            ))
          )
          return released.pipe(
            Effect.flatMap((posted) => {
              const refused = charges.filter((_, i) => posted[i] !== true)
              if (refused.length === 0) return Effect.succeed(false)
              // Only when the hold was gone (it outlived HOLD_TTL_SECONDS) and the wallet could not pay, or the
              // session moved on: the run says what the ledger took.
              for (const c of refused) state.charged(-c.amount)
              return Effect.as(Effect.logWarning(`run ${request.runId}: ${refused.length} step charge(s) were not posted`), false)
            }),
            Effect.catchAllCause((cause) =>
              Effect.flatMap(Effect.descriptor, (fiber) => {
                // Let go because this run's own fiber was interrupted (its runner stopping), not because the wallet's
                // call was: the run has not ended.
                if (patient && Cause.isInterruptedOnly(cause) && HashSet.size(fiber.interruptors) > 0) return Effect.succeed(true)
                // A foreground run that ended on its own, whose wallet did not answer its settle within the window
                // its caller is promised: its caller is told now, and the settle is asked again in the background,
                // keyed, for as long as a durable run's would be (its steps are not given up: the fault checker found
                // such runs recorded as charged with nothing in the ledger). Its row is corrected if the wallet then
                // refuses some. (A turn its session gave up fails without `outage`: its next owner settles or voids
                // the hold. A late settle that meets that void, or its session's newer fence, is refused.)
                const later = !cut && request.durable === undefined &&
                  Cause.failureOption(cause).pipe(Option.exists((error) => error.outage === true))
                return Effect.zipRight(
                  Effect.logError(`run ${request.runId}: its hold could not be settled${later ? " yet; asked again in the background" : ""}`, cause),
                  later ? Effect.as(FiberSet.run(lateSettles, Effect.interruptible(lateSettlesAtOnce.withPermits(1)(settleLater(charges, settling)))), false) : Effect.succeed(false)
                )
              })
            )
          )
        })
        /**
         * The settle of a run that ended, asked again until the wallet answers (`SETTLE_PATIENCE`); the charges it
         * refused are taken off the run's row once that row is written (a session writes it with the turn's commit,
         * after the run's end: looked for every second for a minute).
         */
        const settleLater = (charges: ReadonlyArray<{ readonly amount: Micros; readonly charge: RunCharge }>, settling: Effect.Effect<ReadonlyArray<boolean>, PaymentFailed>) =>
          walletPatient(settling, SETTLE_PATIENCE).pipe(
            Effect.flatMap((posted) => {
              const refused = charges.reduce((sum, c, i) => posted[i] === true ? sum : sum + c.amount, 0n)
              if (refused === 0n) return Effect.logInfo(`run ${request.runId}: its hold is settled, after its end`)
              const correct = repo.lessCredits(request.runId, refused).pipe(
                Effect.repeat({ schedule: Schedule.spaced("1 second"), while: (corrected) => !corrected, times: 60 })
              )
              return Effect.zipRight(correct, Effect.logWarning(`run ${request.runId}: ${refused} micro-credits were refused after its end`))
            }),
            Effect.catchAllCause((cause) =>
              Effect.logError(`run ${request.runId}: its hold could not be settled within ${Duration.format(SETTLE_PATIENCE)}; its row may say more than the ledger took`, cause)
            )
          )

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

          // Recorded: a run executed again must not take a second free trial.
          const trial = yield* recorded("trial", trialCodec, trialGate(request))
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
            return yield* new ModelUnavailable({
              message: `The expert's model "${agent.config.model}" is not offered by this platform any more (see GET /v1/models): its owner must choose another.`
            })
          }
          // The expert's remote MCP servers, connected for this run (closed when it ends).
          const remote = yield* Effect.acquireRelease(mcpTools.open(agent.config, payer, agent.ownerId), (r) => r.close)
          const knowledge = knowledgeOf(request)
          const toolkit = toolkitOf(request, remote, knowledge !== undefined)
          const policies = new Map([
            ...remote.policies,
            ...agent.config.tools.map((tool) => [tool.name as string, tool.permission] as const)
          ])
          // Knowledge the expert has, or the caller named, is searched unless the expert's tools say otherwise.
          if (knowledge !== undefined && (request.knowledge !== undefined || !policies.has(FILE_SEARCH))) policies.set(FILE_SEARCH, "allow")
          // Memory belongs to the expert and the end user (docs/memory.md); a bare model has none. With memory
          // enabled its tools are allowed unless the expert's tool policies say otherwise.
          const remembers = memoryEnabled(agent.config)
          const memoryOwner: MemoryOwner | undefined = agent.id === null ||
              !(remembers || agent.config.tools.some((tool) => isMemoryTool(tool.name)))
            ? undefined
            : { agentId: agent.id, partition: payer, settings: agent.config.memory ?? { enabled: false, blocks: [] } }
          if (remembers) for (const name of MEMORY_ENABLED_TOOLS) if (!policies.has(name)) policies.set(name, "allow")
          const context: ToolContext = { agentId: agent.id ?? "", partition: payer, workspace: request.workspace, knowledge, memory: memoryOwner }
          const instructions = agent.config.instructions.trim().length > 0 ? agent.config.instructions : DEFAULT_INSTRUCTIONS
          // Read once per run, when it starts: what the end user deleted before this turn is not in it.
          const remembered = remembers && memoryOwner !== undefined && Option.isSome(memory)
            ? yield* Effect.map(memory.value.snapshot(memoryOwner, CONTEXT_FACTS), (found) => renderMemory(found.blocks, found.facts))
            : undefined
          const conversation: Array<Prompt.MessageEncoded> = [
            { role: "system", content: remembered === undefined ? instructions : `${instructions}\n\n${remembered}` },
            ...request.history,
            ...state.added
          ]

          // A step's charge goes into `state.spent` once, the moment the wallet took it, with no effect in between:
          // an interrupt that lands after the charge (while its usage event is written) cannot leave the run saying
          // less than the ledger. A step executed again (its record lost) or replayed from its record counts once.
          const countedSteps = new Set<number>()
          const count = (step: number, charge: bigint) => {
            if (countedSteps.has(step)) return
            countedSteps.add(step)
            state.charged(charge)
          }
          for (let step = 1; step <= MAX_STEPS; step++) {
            // One step: the model call, its charge and its usage, recorded as one (a durable run's step identity is
            // its number, which is also its charge key's: a step run again after a fault bills once).
            const { call, charge } = yield* recorded(`step/${step}`, modelStepCodec, Effect.gen(function*() {
              // A step tried again after its workflow waited out a resting provider is the same turn, told once.
              if ((yield* FiberRef.get(CurrentChainWait)) !== "waited") yield* emit({ type: "turn_start", turn: step })
              const promptTokens = tokensOf(JSON.stringify(conversation))
              const estimate = costOf(chain[0]!, promptTokens, state.lastOutputTokens)
              perStep = costOf(chain[0]!, promptTokens + HOLD_STEP_OUTPUT_TOKENS, HOLD_STEP_OUTPUT_TOKENS)
              yield* affordable(request, state.spent, estimate, cover)

              let charge = 0n
              // The charge is made inside the answering call's `chat` span, so the span says what it cost.
              const { call, model } = yield* modelChain.call(
                chain,
                conversation,
                toolkit,
                emit,
                step === 1 ? request.toolChoice : undefined,
                (call, model) =>
                  Effect.gen(function*() {
                    // Each step at the rate of the model that answered it.
                    const cost = costOf(model, call.inputTokens, call.outputTokens, call.cachedInputTokens)
                    // The caller's budget is a promise: past it the platform, not the caller, pays for the step.
                    charge = Option.match(request.budget, {
                      onNone: () => cost,
                      onSome: (budget) => (cost < budget - state.spent ? cost : budget - state.spent)
                    })
                    // Charged first, told after: a `usage.token` always names credits that really left the wallet.
                    if (charge > 0n) {
                      if (request.fence !== undefined && !(yield* request.fence)) {
                        state.called(call)
                        return yield* new OwnerLost({ message: "This runner no longer holds the session; the turn stopped before billing." })
                      }
                      // Charged against the run's hold: no round trip while the hold covers it, one to extend it when not.
                      const room = yield* cover(charge).pipe(
                        // A step that could not be paid still said what it said: its text stays in the run's answer.
                        Effect.tapError(() => Effect.sync(() => state.called(call)))
                      )
                      if (room < charge) {
                        state.called(call)
                        return yield* exhausted("wallet", state.spent + room, state.spent, "Not enough credits for the next step.")
                      }
                      owe(step, charge, `Run of ${agent.identifier} (${model.entry.id}, step ${step})`)
                      count(step, charge)
                      yield* chargedToSpan(charge)
                    }
                  })
              ).pipe(Effect.locally(CurrentOutputFormat, request.outputFormat))
              yield* emit({
                type: "token_usage",
                model: model.entry.id,
                input_tokens: call.inputTokens,
                output_tokens: call.outputTokens,
                ...(call.cachedInputTokens > 0 ? { cached_input_tokens: call.cachedInputTokens } : {}),
                credits: toNumber(charge)
              })
              return { call, charge }
            }))
            state.called(call)
            // A step replayed from its record (a durable run's next owner) is posted with the others at the end.
            if (charge > 0n) {
              owe(step, charge, `Run of ${agent.identifier} (step ${step})`)
              count(step, charge)
            }

            const assistant = assistantContent(call)
            if (assistant.length > 0) {
              state.added.push({ role: "assistant", content: assistant })
              conversation.push({ role: "assistant", content: assistant })
            }
            if (call.toolCalls.length === 0) {
              const wrong = request.outputFormat === undefined ? undefined : checkOutput(request.outputFormat, call.text)
              if (wrong !== undefined) {
                return yield* new ModelOutputInvalid({ message: `The model's answer was refused: ${wrong}.` })
              }
              return "completed" as const
            }
            // The caller runs its own tools: the run ends here and hands the calls back. Calls of the agent's own
            // tools in the same step are not run (the caller's next request continues from its tools' results).
            const forCaller = call.toolCalls.filter((toolCall) => clientNames.has(toolCall.name))
            if (forCaller.length > 0) {
              state.clientToolCalls.push(...forCaller)
              return "completed" as const
            }

            const results: Array<any> = []
            for (const [index, toolCall] of call.toolCalls.entries()) {
              // A durable run waits for an approval outside the tool call's step: the wait is the workflow's (it
              // suspends, holding no fiber), and the step that runs the tool (or tells its denial) follows it.
              const approve = request.durable?.approve
              const decided = approve !== undefined && toolCalls.asks(toolCall.name, policies)
                ? Option.some(yield* approve(`${step}/${index}`, toolCall, emit))
                : Option.none<Decision>()
              // A durable run's delegation is not one recorded step: its child's steps are the parent's, each recorded,
              // so a child that waits for an approval suspends the parent's workflow as the parent's own would.
              const outcome = request.durable !== undefined && toolCall.name === DELEGATE_TOOL
                ? yield* durableDelegation(`${step}/${index}`, toolCall, request, request.durable, emit, resolveSubagent, state)
                : yield* recorded(`tool/${step}/${index}`, jsonCodec<ToolOutcome>(), toolCalls.run(
                { ...toolCall, key: `${request.runId}:${step}/${index}` },
                policies,
                context,
                { ...request, sandbox: holder },
                remote,
                emit,
                (id, params) => delegate(id, params, request, emit, resolveSubagent, state),
                decided
              ))
              if (outcome.denied) state.denied(toolCall.name)
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
            state.added.push({ role: "tool", content: results })
            conversation.push({ role: "tool", content: results })
          }
          return yield* new StepLimitReached({ message: `The run stopped after ${MAX_STEPS} model calls.` })
        })

        const exit = yield* Effect.exit(Effect.interruptible(Effect.scoped(body))).pipe(
          Effect.ensuring(ownHolder === undefined ? Effect.void : ownHolder.release)
        )
        // A durable run interrupted only to suspend (it waits for an approval): it has not ended. Its hold stays
        // (the replay asks for it again by its id, or for a new one once it expired) and nothing is recorded.
        if (Exit.isFailure(exit) && Cause.isInterruptedOnly(exit.cause) && request.durable?.suspended?.() === true) {
          return yield* Effect.interrupt
        }
        // However the run ended (interrupted too), what it used is posted before it says so, and its hold voided.
        if (yield* settle(Exit.isFailure(exit) && Cause.isInterrupted(exit.cause))) return yield* Effect.interrupt
        if (Exit.isSuccess(exit)) {
          yield* emit({
            type: "complete",
            usage: { input_tokens: state.inputTokens, output_tokens: state.outputTokens },
            credits_charged: toNumber(state.spent)
          })
          yield* record("completed", Option.none())
          const result = state.result("completed", Option.none())
          // Extraction is memory's, off this turn's path: `afterTurn` only hands the turn over.
          if (agent.id !== null && agent.config.memory?.enabled === true && agent.config.memory.extraction === true && Option.isSome(memory)) {
            yield* memory.value.afterTurn(
              { agentId: agent.id, partition: payer, settings: agent.config.memory },
              {
                runId: request.runId,
                agent: agent.identifier,
                models: [agent.config.model, ...(agent.config.fallback_models ?? [])],
                message: request.message,
                answer: result.output
              }
            )
          }
          return result
        }
        if (Cause.isInterruptedOnly(exit.cause)) {
          yield* record("cancelled", Option.some({ code: "interrupted", message: "The run was interrupted." }))
          return yield* Effect.interrupt
        }
        // A stop is classified by its tag; anything else is a failure of ours, logged and told as internal_error.
        const stop = Option.filter(Cause.failureOption(exit.cause), isRunStop)
        if (Option.isNone(stop)) yield* Effect.logError("run failed", exit.cause)
        for (const event of Option.match(stop, { onNone: () => [], onSome: eventsBefore })) yield* emit(event)
        const failure = Option.match(stop, {
          onNone: () => ({ code: "internal_error", message: "The run failed on our side." }),
          onSome: (stop) => ({ code: codeOf(stop), message: storableText(stop.message) })
        })
        yield* emit({ type: "error", ...failure })
        yield* record("failed", Option.some(failure))
        return state.result("failed", Option.some(failure))
      }).pipe(
        Effect.tap((result) =>
          annotateSpan(
            result.status === "failed" ? { [Attr.errorType]: Option.getOrElse(Option.map(result.failure, (f) => f.code), () => "failed") } : {}
          )
        ),
        Effect.uninterruptible,
        // The run's root span (docs/traces.md): `invoke_agent {expert}`, under the caller's span for a child run.
        genAiSpan(`invoke_agent ${request.agent.identifier}`, {
          attributes: {
            [Attr.operation]: Operation.invokeAgent,
            [Attr.agentName]: request.agent.identifier,
            ...(request.agent.id === null ? {} : { [Attr.agentId]: request.agent.id }),
            ...(request.agent.version === null ? {} : { [Attr.agentVersion]: String(request.agent.version) }),
            ...Option.match(request.sessionId, { onNone: () => ({}), onSome: (id) => ({ [Attr.conversationId]: id }) }),
            "atrium.run.id": request.runId
          }
        }),
        (run) => traced(traceSink, traceRunOf(request), run)
      )

    /**
     * The next step must fit both the run's budget and the wallet, judged by what it will likely cost: the wallet's
     * part is the run's hold (`cover`), asked for only when it does not cover the estimate (the first step's places it).
     */
    const affordable = <E>(request: RunRequest, spent: Micros, estimate: Micros, cover: (need: Micros) => Effect.Effect<Micros, E>) =>
      Effect.gen(function*() {
        if (Option.isSome(request.budget) && spent + estimate > request.budget.value) {
          return yield* Effect.fail(exhausted("budget", request.budget.value, spent, "The run's budget is spent."))
        }
        const room = yield* cover(estimate)
        if (room < estimate || room <= 0n) {
          return yield* Effect.fail(exhausted("wallet", spent + room, spent, "Not enough credits for the next step."))
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

    /** What a `delegate` call runs: a listed subagent available to the payer, or why not (the tool's failure). */
    const prepareDelegation = (params: unknown, request: RunRequest, resolveSubagent: ResolveSubagent) =>
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
        return { identifier, message, agent: child.value }
      })

    /** The child run of a delegation: same payer, end user and workspace, half of what is left of the budget. */
    const childRequest = (request: RunRequest, agent: RunnableAgent, message: string, state: RunState): RunRequest => ({
      runId: RunId.random(),
      agent,
      payer: request.payer,
      history: [],
      message,
      // Half of what is left, not of the whole budget: the parent may already have spent most of it, and the
      // tree as a whole must stay within what the caller allowed.
      budget: Option.map(request.budget, (budget) => (budget > state.spent ? budget - state.spent : 0n) / 2n),
      sessionId: request.sessionId,
      workspace: request.workspace,
      parentRunId: Option.some(request.runId),
      depth: request.depth + 1,
      // A subagent's settle lets go with its parent's: the parent waits for the child, behind the same release.
      givenUp: request.givenUp
    })

    /** Only a child's `approval.required` reaches the parent's events: a human must be able to answer it. */
    const childEmit = (emit: Emit): Emit => (event) => event.type === "Ask" ? emit(event) : Effect.void

    const childFailure = (identifier: string, result: RunResult) =>
      `The subagent ${identifier} failed: ${Option.getOrElse(Option.map(result.failure, (f) => f.message), () => "")}`

    /**
     * Delegation: a child run of a listed subagent, paid by the same payer, with half of what is left of the
     * budget. Only its `approval.required` events reach the parent's stream (a human must be able to answer them);
     * its answer comes back as the tool's output.
     */
    const delegate = (
      toolCallId: string,
      params: unknown,
      request: RunRequest,
      emit: Emit,
      resolveSubagent: ResolveSubagent,
      state: RunState
    ): Effect.Effect<unknown, { message: string }> =>
      Effect.gen(function*() {
        const { agent, identifier, message } = yield* prepareDelegation(params, request, resolveSubagent)
        yield* emit({ type: "delegation_started", delegation_id: toolCallId, agent: identifier })
        const childResult = yield* execute(childRequest(request, agent, message, state), childEmit(emit), resolveSubagent)
        state.charged(childResult.creditsCharged)
        yield* emit({
          type: "delegation_completed",
          delegation_id: toolCallId,
          agent: identifier,
          output: childResult.output,
          status: childResult.status
        })
        if (childResult.status === "failed") return yield* Effect.fail({ message: childFailure(identifier, childResult) })
        return { agent: identifier, output: childResult.output }
      })

    /**
     * A delegation of a durable run (issue 43): the child's run is part of the parent's workflow rather than one
     * recorded step of it. Its id is its identity (the parent run and the call's place), its steps are recorded as
     * the parent's under `d/<place>/`, and its `ask` approvals wait as the parent's own do (`DurableSteps.approve`,
     * an approval id made of the parent run and the call's place): the parent's workflow suspends, holding no fiber,
     * and the answer resumes it on any runner. Every execution of the parent runs the child again over its records
     * (no model call, nothing told, nothing billed again); what the call tells before and after the child is recorded
     * on its own (`tool/<place>/open`, `tool/<place>`), so it is told once.
     */
    const durableDelegation = (
      place: string,
      toolCall: { readonly id: string; readonly name: string; readonly params: unknown },
      request: RunRequest,
      durable: DurableSteps,
      emit: Emit,
      resolveSubagent: ResolveSubagent,
      state: RunState
    ) =>
      Effect.gen(function*() {
        const id = toolCall.id
        type Opened = { readonly identifier: string; readonly message: string; readonly agent: RunnableAgent } | { readonly failed: string }
        const opened = yield* durable.step(`tool/${place}/open`, jsonCodec<Opened>(), Effect.gen(function*() {
          yield* emit({ type: "tool_call", tool_call_id: id, name: DELEGATE_TOOL, status: "running" })
          const prepared = yield* Effect.either(prepareDelegation(toolCall.params, request, resolveSubagent))
          if (prepared._tag === "Left") return { failed: prepared.left.message } satisfies Opened
          yield* emit({ type: "delegation_started", delegation_id: id, agent: prepared.right.identifier })
          return prepared.right satisfies Opened
        }))
        const failed = (message: string) =>
          Effect.as(emit({ type: "tool_call", tool_call_id: id, name: DELEGATE_TOOL, status: "failed", error: message }), {
            isFailure: true,
            denied: false,
            result: message
          } satisfies ToolOutcome)
        if ("failed" in opened) return yield* durable.step(`tool/${place}`, jsonCodec<ToolOutcome>(), failed(opened.failed))
        const prefix = `d/${place}/`
        const approve = durable.approve
        const childResult = yield* execute(
          {
            ...childRequest(request, opened.agent, opened.message, state),
            runId: childRunId(request.runId, place),
            // Its row is written by the first execution only; the next ones replay it.
            ledger: { start: repo.startOnce, finish: repo.finish },
            durable: {
              step: (name, codec, effect) => durable.step(`${prefix}${name}`, codec, effect),
              ...(approve === undefined ? {} : { approve: (key, call, tell) => approve(`${prefix}${key}`, call, tell) }),
              ...(durable.suspended === undefined ? {} : { suspended: durable.suspended })
            }
          },
          childEmit(emit),
          resolveSubagent
        )
        state.charged(childResult.creditsCharged)
        return yield* durable.step(`tool/${place}`, jsonCodec<ToolOutcome>(), Effect.gen(function*() {
          yield* emit({
            type: "delegation_completed",
            delegation_id: id,
            agent: opened.identifier,
            output: childResult.output,
            status: childResult.status
          })
          if (childResult.status === "failed") return yield* failed(childFailure(opened.identifier, childResult))
          const output = { agent: opened.identifier, output: childResult.output }
          yield* emit({ type: "tool_call", tool_call_id: id, name: DELEGATE_TOOL, status: "completed" })
          yield* emit({ type: "tool_call_result", tool_call_id: id, output })
          return { isFailure: false, denied: false, result: output } satisfies ToolOutcome
        }))
      })

    /**
     * A run as a stream of internal events. The run lives in the stream's scope: when the consumer stops (a client
     * that disconnects from a stateless run), the run is interrupted and recorded as cancelled.
     */
    const stream = (
      request: RunRequest,
      resolveSubagent: ResolveSubagent,
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
  dependencies: [Models.Default, RunsRepo.Default, McpTools.Default, ModelChain.Default, ToolCalls.Default]
}) {}
