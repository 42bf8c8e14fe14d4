import * as Activity from "@effect/workflow/Activity"
import * as Workflow from "@effect/workflow/Workflow"
import { WorkflowEngine } from "@effect/workflow/WorkflowEngine"
import { Effect, Layer, Option, Schema } from "effect"
import { storableValue } from "../platform/Storable.js"
import { RunId } from "../runtime/Domain.js"
import { MemorySettings } from "../runtime/Expert.js"
import { ModelChain } from "../runtime/ModelChain.js"
import { Models, type ResolvedModel } from "../runtime/models/Models.js"
import type { MemoryOwner, MemoryTurn } from "../runtime/Ports.js"
import { costOf } from "../runtime/Run.js"
import { CONTEXT_FACTS, renderMemory } from "../runtime/tools/Memory.js"
import { MemoryConfig } from "./Config.js"
import { Memory } from "./Memory.js"
import { FactId } from "../runtime/Domain.js"
import { type ExtractionTurnRow, ExtractionTurnsRepo } from "./Repo.js"
import { Wallets } from "../billing/Wallets.js"

/**
 * Extraction (issue 47 item 2, docs/memory.md "Extraction"): after a turn of an expert with `memory.extraction`, one
 * model call reads the turn beside what is remembered and proposes facts, supersessions and block appends, which go
 * through the same checks as the model's own tools (limits included). It runs off the turn's path, debounced per
 * (expert, end user): turns that come while one waits are read by it, so a busy session costs at most one call per
 * turn and usually far fewer. Its tokens are charged to the turn's payer as their own ledger line (`memory`).
 *
 * Durable, as background runs are (runs/Background.ts): the turn is written to `memory_extraction_turns` and a
 * `MemoryExtraction` workflow is started for it on the cluster's workflow engine, on the shard of the turn's run id.
 * A runner that stops before the extraction ran leaves the workflow's start unprocessed in the cluster's message
 * storage; the shard's next owner executes it, and finds the turn in its table.
 */

/** How many times an extraction finds another of its owner's running before it leaves its turns to the next one. */
const BUSY_ATTEMPTS = 120
/** The most turns one extraction reads (the newest). */
const MAX_TURNS = 5
/** The most of one turn extraction reads (characters of the message and of the answer each). */
const MAX_TURN_CHARS = 8_000

const Proposal = Schema.Struct({
  facts: Schema.optional(Schema.Array(Schema.String)),
  supersede: Schema.optional(Schema.Array(Schema.Struct({ id: FactId.unchecked, text: Schema.String }))),
  blocks: Schema.optional(Schema.Array(Schema.Struct({ label: Schema.String, append: Schema.String })))
})
type Proposal = typeof Proposal.Type

/** The first JSON object in the model's answer, if it is a proposal. */
export const proposalOf = (text: string): Option.Option<Proposal> => {
  const start = text.indexOf("{")
  const end = text.lastIndexOf("}")
  if (start < 0 || end <= start) return Option.none()
  try {
    // Parsed, an escaped `\u0000` in the model's JSON is a real NUL again: mended before it is stored.
    return Schema.decodeUnknownOption(Proposal)(storableValue(JSON.parse(text.slice(start, end + 1))))
  } catch {
    return Option.none()
  }
}

export const EXTRACTION_INSTRUCTIONS = "You keep an assistant's long-term memory of one user. Read the turn below and what is already " +
  "remembered. Propose only durable facts about the user (who they are, their preferences, their situation), not " +
  "about the conversation. A fact that contradicts a remembered one supersedes it (its id). Answer with one JSON " +
  "object and nothing else: {\"facts\": [\"...\"], \"supersede\": [{\"id\": \"fact_...\", \"text\": \"...\"}], " +
  "\"blocks\": [{\"label\": \"...\", \"append\": \"...\"}]}; empty lists when there is nothing to remember."

/**
 * One extraction, identified by the run id of the turn that started it: its idempotency key, the key of its ledger
 * line (`memory:<run id>`) and the claim on the turns it reads. Executed again after a fault, it is the same one.
 */
export const MemoryExtraction = Workflow.make({
  name: "MemoryExtraction",
  payload: { runId: RunId },
  idempotencyKey: ({ runId }) => runId
})

/** The turn's side: hands a finished turn to extraction (written, and its workflow started) and returns. */
export class Extraction extends Effect.Service<Extraction>()("atrium/memory/Extraction", {
  effect: Effect.gen(function*() {
    const turns = yield* ExtractionTurnsRepo
    const workflows = yield* WorkflowEngine

    const afterTurn = (owner: MemoryOwner, turn: MemoryTurn) =>
      Effect.gen(function*() {
        const runId = turn.runId
        yield* turns.insert({
          runId,
          agentId: owner.agentId,
          accountId: owner.partition.accountId,
          endUserId: owner.partition.endUserId,
          agent: turn.agent,
          models: turn.models,
          settings: owner.settings,
          message: turn.message,
          answer: turn.answer
        })
        // A persisted message to the extraction's shard: once sent, whichever runner owns the shard executes it.
        yield* MemoryExtraction.execute({ runId }, { discard: true }).pipe(Effect.provideService(WorkflowEngine, workflows))
      }).pipe(
        Effect.catchAllCause((cause) => Effect.logWarning("could not hand a turn to memory extraction", cause)),
        Effect.withSpan("Extraction.afterTurn")
      )

    return { afterTurn } as const
  }),
  dependencies: [ExtractionTurnsRepo.Default]
}) {}

/** The workflow's body, registered with the engine on every runner (Server.ts). */
export const MemoryExtractionLive = Layer.unwrapEffect(Effect.gen(function*() {
  const memory = yield* Memory
  const models = yield* Models
  const chain = yield* ModelChain
  const wallets = yield* Wallets
  const turnsRepo = yield* ExtractionTurnsRepo
  const { extractionDebounce } = yield* MemoryConfig
  const decodeSettings = Schema.decodeUnknownSync(MemorySettings)

  /** One model call over `turns` (oldest first), charged as `memory:<id>`, and its proposals written. */
  const extract = Effect.fn("Extraction.extract")(function*(id: RunId, owner: MemoryOwner, turns: ReadonlyArray<ExtractionTurnRow>) {
    const last = turns[turns.length - 1]!
    const resolved: Array<ResolvedModel> = []
    for (const modelId of last.models as ReadonlyArray<string>) {
      const model = yield* models.resolve(modelId)
      if (Option.isSome(model)) resolved.push(model.value)
    }
    if (resolved.length === 0) return
    const { blocks, facts } = yield* memory.snapshot(owner, CONTEXT_FACTS)
    // The last turn's message first: it is what a directive-driven model (builtin) reads.
    const transcript = [...turns].reverse().map((turn) =>
      `${turn.message.slice(0, MAX_TURN_CHARS)}\n\nThe assistant answered:\n${turn.answer.slice(0, MAX_TURN_CHARS)}`
    ).join("\n\n(An earlier turn:)\n")
    const { call, model } = yield* chain.call(
      resolved,
      [
        { role: "system", content: `${EXTRACTION_INSTRUCTIONS}\n\n${renderMemory(blocks, facts)}` },
        { role: "user", content: transcript }
      ],
      undefined,
      () => Effect.void,
      undefined
    )
    const cost = costOf(model, call.inputTokens, call.outputTokens, call.cachedInputTokens)
    if (cost > 0n) {
      // Charged before anything is written: an account that cannot pay gets no extraction. The key is the
      // extraction's identity, so an execution again after a fault (its model call made again) is charged once.
      yield* wallets.chargeFor(owner.partition.accountId, cost, {
        kind: "memory",
        scope: "memory",
        key: `memory:${id}`,
        description: `Memory of ${last.agent} (${model.entry.id}, ${turns.length} turn${turns.length === 1 ? "" : "s"})`
      }, null)
    }
    const proposal = proposalOf(call.text)
    if (Option.isNone(proposal)) return
    // A fact already current is not added again: an execution cut after writing and run again writes nothing twice.
    const known = new Set(facts.map((fact) => fact.text))
    // Each proposal as the model's own tool call would be: refused ones (limits, read-only, unknown) are dropped.
    for (const text of proposal.value.facts ?? []) {
      if (known.has(text)) continue
      known.add(text)
      yield* Effect.ignore(memory.addFact(owner, text, "extraction"))
    }
    for (const { id: old, text } of proposal.value.supersede ?? []) {
      yield* Effect.ignore(memory.supersede(owner, old, text, "extraction"))
    }
    for (const { append, label } of proposal.value.blocks ?? []) {
      yield* Effect.ignore(memory.append(owner, label, append, "extraction"))
    }
  })

  /**
   * Claims the owner's waiting turns, extracts once from the newest of them, and lets them go; `busy` when another
   * extraction of the owner holds turns (it runs first: this one reads what it wrote).
   */
  const run = (id: RunId, first: ExtractionTurnRow) =>
    Effect.gen(function*() {
      const { busy, turns: claimed } = yield* turnsRepo.claim({ id, agentId: first.agentId, accountId: first.accountId, endUserId: first.endUserId })
      if (busy) return "busy" as const
      if (claimed.length === 0) return "done" as const
      // A session far busier than the debounce: the newest turns are what matters.
      const turns = claimed.slice(-MAX_TURNS)
      const last = turns[turns.length - 1]!
      const owner: MemoryOwner = {
        agentId: last.agentId,
        partition: { accountId: last.accountId, endUserId: last.endUserId },
        settings: decodeSettings(last.settings)
      }
      yield* extract(id, owner, turns).pipe(
        Effect.catchAllCause((cause) => Effect.logWarning("memory extraction failed", cause))
      )
      yield* turnsRepo.done(id)
      return "done" as const
    })

  const execute = (runId: RunId) =>
    Effect.gen(function*() {
      const turn = yield* turnsRepo.byRun(runId)
      // Read already by an earlier extraction (done, or running now): nothing is left for this one.
      if (Option.isNone(turn) || (turn.value.extractionId !== null && turn.value.extractionId !== runId)) return
      // The debounce: turns of the same expert and end user that come meanwhile are read by this extraction.
      // Not a durable clock: an execution again after a fault waits again, which costs nothing.
      yield* Effect.sleep(extractionDebounce)
      // Each attempt recorded once done: an execution again after that answers from the records and calls no model.
      // While another extraction of the owner runs, this one waits a debounce more, for at most BUSY_ATTEMPTS; past
      // that its turns are left to the owner's next turn's extraction (which takes every waiting turn).
      for (let attempt = 0; attempt < BUSY_ATTEMPTS; attempt++) {
        const outcome = yield* Activity.make({ name: `extract/${attempt}`, success: Schema.Literal("busy", "done"), execute: run(runId, turn.value) })
        if (outcome === "done") return
        yield* Effect.sleep(extractionDebounce)
      }
    }).pipe(Effect.withSpan("MemoryExtraction.execute", { attributes: { runId } }))

  return MemoryExtraction.toLayer(({ runId }) => execute(runId))
})).pipe(Layer.provide([Memory.Default, Models.Default, ModelChain.Default, ExtractionTurnsRepo.Default, MemoryConfig.Default]))
