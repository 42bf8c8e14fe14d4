import { Context, Effect, Option } from "effect"
import type { DistillationId } from "../distillation/Domain.js"
import { Distillations } from "../distillation/Distillations.js"
import { foldRun, noProgress, type ProgressReport } from "../distillation/RunFold.js"
import type { SuggestionId } from "../evolution/Domain.js"
import { Evolution } from "../evolution/Evolution.js"
import { duration } from "../platform/Config.js"
import { errorType } from "../platform/Errors.js"
import { parseCredits, toNumber } from "../platform/Money.js"
import { type InternalEvent, publicPayload } from "../runtime/Events.js"
import { RunEngine } from "../runtime/RunEngine.js"
import { Runs } from "../runs/Runs.js"
import { type McpCaller, ToolFailure } from "./Tool.js"
import type { CallerIdentity } from "../identity/Domain.js"

/**
 * The six tools that need the run engine (spec 4.10: Testing, Distillation, Self-evolution). Their names, schemas
 * and descriptions live in the tool table (`Tools.ts`); their work is here, over the platform's services:
 * `test_expert` runs an agent through the run engine (rule 7: really executes and bills credits), the distillation
 * tools talk to the distiller (`src/distillation`, rule 6), the evolution tools to `src/evolution` (rule 9).
 *
 * The slow ones fold a run into one return under a time limit and, when the client asked for progress (a
 * `progressToken`), report it as `notifications/progress` through `McpProgress`, which the route sets per call.
 */

export type { ProgressReport }

export interface TestExpertArgs {
  readonly identifier: string
  readonly message: string
}
export interface StartDistillationArgs {
  readonly topic: string
  readonly materials: ReadonlyArray<{ readonly filename: string; readonly content: string }>
}
export interface ContinueDistillationArgs {
  readonly sessionId: DistillationId
  readonly message: string
}

/** Where the tool being called reports progress; nowhere unless the route set it for a client that asked. */
export class McpProgress extends Context.Reference<McpProgress>()("atrium/mcp/McpProgress", {
  defaultValue: (): ProgressReport => noProgress
}) {}

/** What the SDK hands a tool callback that progress needs: the request's `_meta` and its notification channel. */
export interface ProgressExtra {
  readonly _meta?: { readonly progressToken?: string | number | undefined } | undefined
  readonly sendNotification: (notification: {
    method: "notifications/progress"
    params: { progressToken: string | number; progress: number; message?: string }
  }) => Promise<void>
}

/**
 * The progress reporter of one tool call: MCP `notifications/progress` with the client's `progressToken` (progress
 * counts the run's steps and only grows; no total, since a run's length is not known ahead). None without a token.
 */
export const progressFromExtra = (extra: ProgressExtra): ProgressReport => {
  const token = extra._meta?.progressToken
  if (token === undefined) return noProgress
  return (progress, message) =>
    Effect.tryPromise(() =>
      extra.sendNotification({ method: "notifications/progress", params: { progressToken: token, progress, message } })
    ).pipe(Effect.ignore)
}

/** A service failure (`NotFound`, `InvalidRequest`, ...) as a tool failure with the same type and text. */
const proxy = <A, E extends { readonly _tag: string; readonly message: string }, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.mapError(effect, (error) => new ToolFailure({ type: errorType(error._tag), message: error.message }))

/** The tool-server caller as the run engine's services know callers: an account acting for itself. */
const identityOf = (caller: McpCaller): CallerIdentity => ({
  userId: caller.userId,
  via: caller.via,
  apiKeyId: Option.fromNullable(caller.apiKeyId),
  endUserId: Option.none()
})

/** The public events of a run, text and thinking increments left out (they are in `output`). */
const summaryOf = (events: ReadonlyArray<InternalEvent>) =>
  events.flatMap((event, index) =>
    event.type === "text" || event.type === "reasoning" || event.type === "tool_call_chunk"
      ? []
      : [publicPayload(event as { readonly type: string; readonly [key: string]: unknown }, index + 1)]
  )

export class EngineTools extends Effect.Service<EngineTools>()("atrium/mcp/EngineTools", {
  effect: Effect.gen(function*() {
    const runs = yield* Runs
    const engine = yield* RunEngine
    const evolution = yield* Evolution
    const distillations = yield* Distillations
    const testTimeout = yield* duration("TEST_EXPERT_TIMEOUT", "2 minutes")

    /**
     * Spec 4.10 rule 7: runs the agent once, for real, billed to the caller. The owner runs the draft (what testing
     * means); anyone else runs the published version, exactly as `POST /v1/agents/run` would.
     */
    const testExpert = (args: TestExpertArgs, caller: McpCaller) =>
      Effect.gen(function*() {
        const identity = identityOf(caller)
        const agent = yield* proxy(runs.agentFor(args.identifier, identity))
        const request = runs.request(identity, agent, args.message, {})
        const folded = yield* foldRun(engine, request, {
          timeout: testTimeout,
          progress: yield* McpProgress,
          resolveSubagent: (identifier, payer) => runs.runnable(identifier, payer.accountId)
        })
        const base = { runId: request.runId, identifier: agent.identifier, version: agent.version }
        const trial = folded.events.find((event) => event.type === "trial_exhausted")
        const notice = trial?.type === "trial_exhausted"
          ? { notice: `The ${trial.trials_used} free trial turns are used up: unlock the agent for ${trial.price} credits.` }
          : {}
        if (folded._tag === "TimedOut") {
          const output = folded.events.flatMap((e) => e.type === "text" ? [e.delta] : []).join("")
          const charged = folded.events.reduce(
            (sum, e) => e.type === "token_usage" ? sum + (parseCredits(String(e.credits)) ?? 0n) : sum,
            0n
          )
          return {
            ...base,
            status: "cancelled" as const,
            output,
            creditsCharged: toNumber(charged),
            usage: {
              input_tokens: folded.events.reduce((n, e) => e.type === "token_usage" ? n + e.input_tokens : n, 0),
              output_tokens: folded.events.reduce((n, e) => e.type === "token_usage" ? n + e.output_tokens : n, 0)
            },
            error: { code: "timeout", message: "The run took longer than TEST_EXPERT_TIMEOUT and was stopped." },
            events: summaryOf(folded.events)
          }
        }
        const { result } = folded
        return {
          ...base,
          status: result.status,
          output: result.output,
          creditsCharged: toNumber(result.creditsCharged),
          usage: { input_tokens: result.inputTokens, output_tokens: result.outputTokens },
          ...Option.match(result.failure, { onNone: () => ({}), onSome: (error) => ({ error }) }),
          ...notice,
          events: summaryOf(folded.events)
        }
      })

    const startDistillation = (args: StartDistillationArgs, caller: McpCaller) =>
      Effect.flatMap(McpProgress, (progress) => proxy(distillations.start(identityOf(caller), args, progress)))

    const continueDistillation = (args: ContinueDistillationArgs, caller: McpCaller) =>
      Effect.flatMap(McpProgress, (progress) => proxy(distillations.continue(identityOf(caller), args, progress)))

    const listEvolutionSuggestions = (args: { readonly identifier: string }, caller: McpCaller) =>
      proxy(evolution.list(args.identifier, caller.userId))

    const acceptEvolution = (args: { readonly suggestionId: SuggestionId }, caller: McpCaller) =>
      proxy(evolution.accept(args.suggestionId, caller.userId))

    const getEvolutionStats = (args: { readonly identifier: string }, caller: McpCaller) =>
      proxy(evolution.stats(args.identifier, caller.userId))

    return {
      testExpert,
      startDistillation,
      continueDistillation,
      listEvolutionSuggestions,
      acceptEvolution,
      getEvolutionStats
    } as const
  }),
  dependencies: [Runs.Default, RunEngine.Default, Evolution.Default, Distillations.Default]
}) {}
