import { Context, Data, type Effect, type Option } from "effect"
import type { UserId } from "../platform/Ids.js"
import type { FactId, RunId } from "./Domain.js"
import type { Fence } from "../platform/cluster/Fences.js"
import type { Micros } from "../platform/Money.js"
import type { Partition } from "../identity/Partition.js"
import type { RunOutcome, RunRecord } from "./Repo.js"
import type { MemorySettings } from "./Expert.js"

/**
 * What the run engine needs from the layers above it, as ports it owns: money (`RunPayer`, implemented by billing)
 * and the experts a run may delegate to (`ResolveSubagent`, given by the caller that knows the agents).
 */

/** The wallet cannot pay for the step. */
export class InsufficientFunds extends Data.TaggedError("InsufficientFunds")<{ readonly message: string }> {}

/**
 * The charge failed for another reason (the payment side is down, or refused the charge). `outage`: the wallet did not
 * answer (an outage outlasted its window), so the same request may be answered later; a refusal has none.
 */
export class PaymentFailed extends Data.TaggedError("PaymentFailed")<{ readonly message: string; readonly outage?: boolean }> {}

export interface RunCharge {
  /** Unique per run step: the same key charges once however often it is sent. */
  readonly key: string
  readonly description: string
  /** The fence of the entity the run is for (a session's shard generation): the charge is refused once it is stale. */
  readonly fence?: Fence | null | undefined
}

/** A hold as the wallet granted it: its amount now, and when the wallet voids it unless asked again (ms since the epoch). */
export interface HoldGrant {
  readonly amount: Micros
  readonly expiresAt: number
}

/** Who pays a run's model steps: the account's wallet. */
export class RunPayer extends Context.Tag("atrium/runtime/RunPayer")<RunPayer, {
  /** Takes `amount` micro-credits from the account for one step of a run, once per `charge.key`. */
  readonly charge: (accountId: UserId, amount: Micros, charge: RunCharge) => Effect.Effect<void, InsufficientFunds | PaymentFailed>
  /** What the account can spend now. */
  readonly balance: (accountId: UserId) => Effect.Effect<Micros>
  /**
   * Places, extends or resumes the hold `holdId` on the account's wallet at `amount` in all (docs/billing.md,
   * "Holds"), as far as its available credits allow: the hold's amount now (0: nothing is available) and its expiry.
   * A run pays its steps against its hold with no round trip, asks again past half its life, and ends it with `settle`.
   */
  readonly hold: (accountId: UserId, holdId: string, amount: Micros) => Effect.Effect<HoldGrant, PaymentFailed>
  /**
   * Ends the hold `holdId`: voids what is left of it and posts `charges` (each once per key, in order). Whether each
   * was posted (or had been): a charge is refused only when the hold no longer covered it (it had expired) and the
   * wallet cannot pay it, or when `fence` is stale. `cut`: the run was cut short (a cancel, its runner stopping) and
   * lets go without waiting out an outage, its next owner settling the hold; a run that ended on its own waits, within
   * the 15 s every request is promised (`RunPayerLive`).
   */
  readonly settle: (
    accountId: UserId,
    holdId: string,
    charges: ReadonlyArray<{ readonly amount: Micros; readonly charge: RunCharge }>,
    fence: Fence | null,
    cut: boolean
  ) => Effect.Effect<ReadonlyArray<boolean>, PaymentFailed>
  /**
   * Voids the hold `holdId` of a run that will not go on (a session turn cut with its runner, closed by the session's
   * next owner), for good: a settle of that run arriving at the wallet after this posts nothing new, so the run's
   * cost counted from the ledger once this returned stays its cost (docs/billing.md, "Holds").
   */
  readonly voidHold: (accountId: UserId, holdId: string, fence: Fence | null) => Effect.Effect<void, PaymentFailed>
}>() {}

/** A passage `file_search` found, with its citation: the file, the chunk and its character range in the file's text. */
export interface KnowledgePassage {
  readonly storeId: string
  readonly fileId: string
  readonly filename: string
  readonly chunkIndex: number
  readonly startChar: number
  readonly endChar: number
  readonly heading: string
  readonly score: number
  readonly text: string
}

/** The knowledge could not be searched (a store is gone, the database refused): the tool call fails, not the run. */
export class KnowledgeUnavailable extends Data.TaggedError("KnowledgeUnavailable")<{ readonly message: string }> {}

/**
 * The knowledge bases a run's `file_search` searches (implemented by knowledge, above the engine): stores of
 * `owner` (the expert's owner, or the caller of `/v1/responses`), the query's embedding paid by `payer`.
 */
export class KnowledgeSearch extends Context.Tag("atrium/runtime/KnowledgeSearch")<KnowledgeSearch, {
  readonly search: (
    owner: Partition,
    storeIds: ReadonlyArray<string>,
    query: string,
    maxResults: number,
    payer: UserId
  ) => Effect.Effect<ReadonlyArray<KnowledgePassage>, KnowledgeUnavailable>
}>() {}

/** Whose memory a run reaches: the expert, the end user's partition, and the blocks the expert keeps. */
export interface MemoryOwner {
  readonly agentId: string
  readonly partition: Partition
  readonly settings: MemorySettings
}

/** A block as the turn's context shows it. */
export interface MemoryBlock {
  readonly label: string
  readonly description: string
  readonly value: string
  readonly limit: number
  readonly readOnly: boolean
  readonly version: number
}

/** A fact as the turn's context and the tools show it. */
export interface MemoryFact {
  readonly id: FactId
  readonly text: string
  readonly validFrom: Date
  readonly supersededAt: Date | null
}

/** A memory tool's call was refused (over a block's limit, no such block, a read-only block): the model is told. */
export class MemoryRefused extends Data.TaggedError("MemoryRefused")<{ readonly message: string }> {}

/**
 * What an expert remembers of an end user (implemented by memory, above the engine; docs/memory.md). Every write
 * checks the block's limit; the model never deletes a fact, it supersedes it.
 */
export class ExpertMemory extends Context.Tag("atrium/runtime/ExpertMemory")<ExpertMemory, {
  /** The blocks (every configured one, empty when never written) and the current facts, newest first, for a turn. */
  readonly snapshot: (owner: MemoryOwner, maxFacts: number) => Effect.Effect<{
    readonly blocks: ReadonlyArray<MemoryBlock>
    readonly facts: ReadonlyArray<MemoryFact>
  }>
  readonly read: (owner: MemoryOwner, label: string) => Effect.Effect<MemoryBlock, MemoryRefused>
  /**
   * The writes take the tool call's idempotency key (`call`, the run's and the call's ids): a repeat of the call (a
   * durable run's tool step tried again) writes nothing again and answers what the first try wrote.
   */
  readonly replace: (owner: MemoryOwner, label: string, old: string, next: string, call: string) => Effect.Effect<MemoryBlock, MemoryRefused>
  readonly append: (owner: MemoryOwner, label: string, text: string, call: string) => Effect.Effect<MemoryBlock, MemoryRefused>
  /** Current facts and blocks matching the query's words (full text). */
  readonly search: (owner: MemoryOwner, query: string, limit: number) => Effect.Effect<{
    readonly facts: ReadonlyArray<MemoryFact>
    readonly blocks: ReadonlyArray<MemoryBlock>
  }>
  readonly addFact: (owner: MemoryOwner, text: string, call: string) => Effect.Effect<MemoryFact, MemoryRefused>
  /** A newer fact in place of `id`, which stays, marked superseded. */
  readonly supersede: (owner: MemoryOwner, id: FactId, text: string, call: string) => Effect.Effect<MemoryFact, MemoryRefused>
  /**
   * A turn of an expert with extraction finished: memory may propose facts and block edits from it, later and
   * elsewhere (this returns at once; the turn never waits for it), at most one model call per turn.
   */
  readonly afterTurn: (owner: MemoryOwner, turn: MemoryTurn) => Effect.Effect<void>
}>() {}

/** What extraction reads of a finished turn, and who pays for it. */
export interface MemoryTurn {
  readonly runId: RunId
  readonly agent: string
  /** The expert's model and fallbacks, as the turn had them. */
  readonly models: ReadonlyArray<string>
  readonly message: string
  readonly answer: string
}

/** The expert `identifier` as a subagent run by `payer` sees it; none when it is not available to them. */
export type ResolveSubagent<Agent> = (identifier: string, payer: Partition) => Effect.Effect<Option.Option<Agent>>

/**
 * Where a run's row is written. By default (`RunsRepo`) as two statements of its own; a session writes it with its
 * turn's log instead, so the row costs no commit of its own.
 */
export interface RunLedger {
  readonly start: (run: RunRecord) => Effect.Effect<void>
  readonly finish: (runId: RunId, outcome: RunOutcome) => Effect.Effect<void>
}

/** An agent as `GET /v1/models` lists it: what a caller can name as `model` besides the models. */
export interface AgentModel {
  readonly identifier: string
  readonly description: string
  /** The model the agent runs on (its rates and context window are the entry's). */
  readonly model: string
}

/** The agents a user can run (their own, and the published ones), given by the layer that knows the agents. */
export class RunnableAgents extends Context.Tag("atrium/runtime/RunnableAgents")<RunnableAgents, {
  readonly list: (userId: UserId) => Effect.Effect<ReadonlyArray<AgentModel>>
  readonly find: (identifier: string, userId: UserId) => Effect.Effect<Option.Option<AgentModel>>
}>() {}
