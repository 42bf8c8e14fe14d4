import type * as LanguageModel from "@effect/ai/LanguageModel"
import type * as Prompt from "@effect/ai/Prompt"
import { Data, type Effect, FiberRef, type Option } from "effect"
import type { Partition } from "../identity/Partition.js"
import type { AgentId, UserId } from "../platform/Ids.js"
import type { Decision } from "./Approvals.js"
import type { RunId } from "./Domain.js"
import type { Fence } from "../platform/cluster/Fences.js"
import { type Micros, parseCredits } from "../platform/Money.js"
import type { InternalEvent } from "./Events.js"
import type { ExpertConfig } from "./Expert.js"
import type { ResolvedModel } from "./models/Models.js"
import type { OutputFormat } from "./models/OutputFormat.js"
import type { RunLedger } from "./Ports.js"
import type { SandboxHolder } from "./sandbox/Holder.js"

/**
 * What a run is, apart from how the engine runs it (RunEngine.ts): what a caller asks for, what it gets back, the
 * limits every run keeps, and what a model call costs.
 */

/** An agent as a run sees it: a published version, or the owner's draft (`version` null). */
export interface RunnableAgent {
  /** None for a bare model called through `/v1/chat/completions` (an agent of no one, without tools). */
  readonly id: AgentId | null
  readonly identifier: string
  readonly ownerId: UserId
  readonly version: number | null
  readonly config: ExpertConfig
  /**
   * The creator's `trace_content` setting, read from the expert (not its version) when the run starts: the run's
   * trace keeps messages and tool data only when it is on (docs/traces.md).
   */
  readonly traceContent?: boolean | undefined
}

export interface RunRequest {
  readonly runId: RunId
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
  /**
   * The fencing token every charge of the run carries (a session's shard generation): the wallet's commit refuses the
   * charge in its own statement once the generation moved on, however the check above answered (issue 42 item 7).
   */
  readonly chargeFence?: Fence | null | undefined
  /**
   * Done when the run's owner gives it up without a hand-over (a session whose shard is released because the lock
   * storage failed). A settle still waiting for the wallet then lets go at once: the wallet may be this runner's, its
   * shard waiting behind the same release, and the run's next owner voids its hold and counts it from the ledger.
   */
  readonly givenUp?: Effect.Effect<void> | undefined
  /**
   * A background run's steps (runs/Background.ts): each model step and each tool call goes through `step`, which
   * records its result once and answers the recorded result when the run is executed again (on another runner after
   * a fault), so a finished step is neither run nor billed twice. None: steps run as they come (a foreground run).
   */
  readonly durable?: DurableSteps | undefined
}

/**
 * How a durable run records its steps. `name` is the step's identity within the run (`step/2`, `tool/2/0`); `codec`
 * turns its result into JSON and back (a step may be read back by another runner). A step's failure is recorded too.
 */
export interface DurableSteps {
  readonly step: <A, E>(
    name: string,
    codec: StepCodec<A>,
    effect: Effect.Effect<A, E>
  ) => Effect.Effect<A, E>
  /**
   * The approval of an `ask` tool call (`key`: its step and place, `step/index`), waited for durably: opened and told
   * once (`approval.required` through `emit`), then waited for without holding a fiber (the workflow suspends on a
   * `DurableDeferred` that the answer resolves on any runner, and wakes on a `DurableClock` when nobody answers). Its
   * decision goes to the tool call's step. None: the approval waits in memory, as a foreground run's.
   */
  readonly approve?: (key: string, call: { readonly id: string; readonly name: string; readonly params: unknown }, emit: Emit) => Effect.Effect<Decision>
  /**
   * Whether the run was interrupted only to suspend (it waits for an approval, no fiber kept): the engine then neither
   * settles its hold nor records an end, since the run goes on when the workflow resumes and replays its steps.
   */
  readonly suspended?: () => boolean
}

export interface StepCodec<A> {
  readonly encode: (value: A) => unknown
  readonly decode: (json: unknown) => A
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

/**
 * How a step waits when every provider of its chain rests (ModelChain, `MAX_CHAIN_WAIT_MS`): `sleep` in its own fiber
 * (a foreground run, a session's turn); `defer`: the step ends with `StepResting` and a background run's workflow
 * waits on a `DurableClock` instead, holding no fiber (runs/Background.ts); `waited`: the step is that wait's second
 * attempt, which does not wait again (a step waits once, as in memory).
 */
export type ChainWait = "sleep" | "defer" | "waited"
export const CurrentChainWait: FiberRef.FiberRef<ChainWait> = FiberRef.unsafeMake<ChainWait>("sleep")

/** A step handed its wait to the workflow (`defer`): try it again once `until` (ms since the epoch) has passed. */
export class StepResting extends Data.TaggedError("StepResting")<{ readonly until: number }> {}

/** Deepest delegation chain: the root run is depth 0, its subagent 1, ... */
export const MAX_DELEGATION_DEPTH = 3
/** The longest a step waits for a resting provider of its chain (`Retry-After`, an open breaker) before failing. */
export const MAX_CHAIN_WAIT_MS = 10_000
/** Model calls in one run: a model that keeps calling tools is stopped rather than billed forever. */
export const MAX_STEPS = 12

/**
 * A run without a budget holds this many times its first step's estimate when it starts (docs/billing.md, "Holds"),
 * capped by what the wallet has available. Four steps, not the twelve a run may take: a hold is what other runs of the
 * wallet cannot use, and twelve steps of an answer each (`HOLD_STEP_OUTPUT_TOKENS`) reserved some 36 credits a run on
 * a model at 1 and 2 credits per 1,000 tokens, so eight runs at once on a 100-credit wallet left the later ones
 * nothing (budget_exhausted). Most runs take one to four steps; a longer one extends its hold in one round trip.
 */
export const HOLD_STEPS = 4

/**
 * What a hold's estimate assumes each step answers (tokens), and adds to the next step's prompt. The first step knows
 * its prompt but not its answer: a hold of `HOLD_STEPS` times the prompt alone was spent by four steps of tool calls
 * (each answer and result read again by the next step), and the run extended its hold, a third round trip.
 */
export const HOLD_STEP_OUTPUT_TOKENS = 1_000


/** How a run tells each step: the caller decides where events go (an HTTP stream, a session's log). */
export type Emit = (event: InternalEvent) => Effect.Effect<void>

/** Finds a subagent a run may delegate to, as the payer sees it (a session's or a stateless run's rules). */
export type ResolveSubagent = (identifier: string, payer: Partition) => Effect.Effect<Option.Option<RunnableAgent>>

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
