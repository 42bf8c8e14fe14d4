import { Duration, Effect, Option, Schema } from "effect"
import { Wallets } from "../billing/Wallet.js"
import { ModelChain } from "../runtime/ModelChain.js"
import { Models, type ResolvedModel } from "../runtime/models/Models.js"
import type { MemoryOwner, MemoryTurn } from "../runtime/Ports.js"
import { costOf } from "../runtime/Run.js"
import { CONTEXT_FACTS, renderMemory } from "../runtime/tools/Memory.js"
import { Memory } from "./Memory.js"

/**
 * Extraction (issue 47 item 2, docs/memory.md "Extraction"): after a turn of an expert with `memory.extraction`, one
 * model call reads the turn beside what is remembered and proposes facts, supersessions and block appends, which go
 * through the same checks as the model's own tools (limits included). It runs off the turn's path, debounced per
 * (expert, end user): turns that come while one waits are folded into it, so a busy session costs at most one call
 * per turn and usually far fewer. Its tokens are charged to the turn's payer as their own ledger line (`memory`).
 *
 * In process: a runner that stops while an extraction waits loses it (the turn is not affected); it is not a
 * durable workflow.
 */

/** How long after a turn extraction waits for the next one of the same expert and end user before it calls. */
export const EXTRACTION_DEBOUNCE = Duration.seconds(1)
/** The most turns one extraction reads (the newest). */
const MAX_TURNS = 5
/** The most of one turn extraction reads (characters of the message and of the answer each). */
const MAX_TURN_CHARS = 8_000

const Proposal = Schema.Struct({
  facts: Schema.optional(Schema.Array(Schema.String)),
  supersede: Schema.optional(Schema.Array(Schema.Struct({ id: Schema.String, text: Schema.String }))),
  blocks: Schema.optional(Schema.Array(Schema.Struct({ label: Schema.String, append: Schema.String })))
})
type Proposal = typeof Proposal.Type

/** The first JSON object in the model's answer, if it is a proposal. */
export const proposalOf = (text: string): Option.Option<Proposal> => {
  const start = text.indexOf("{")
  const end = text.lastIndexOf("}")
  if (start < 0 || end <= start) return Option.none()
  try {
    return Schema.decodeUnknownOption(Proposal)(JSON.parse(text.slice(start, end + 1)))
  } catch {
    return Option.none()
  }
}

const INSTRUCTIONS = "You keep an assistant's long-term memory of one user. Read the turn below and what is already " +
  "remembered. Propose only durable facts about the user (who they are, their preferences, their situation), not " +
  "about the conversation. A fact that contradicts a remembered one supersedes it (its id). Answer with one JSON " +
  "object and nothing else: {\"facts\": [\"...\"], \"supersede\": [{\"id\": \"fact_...\", \"text\": \"...\"}], " +
  "\"blocks\": [{\"label\": \"...\", \"append\": \"...\"}]}; empty lists when there is nothing to remember."

interface Waiting {
  owner: MemoryOwner
  turns: Array<MemoryTurn>
}

export class Extraction extends Effect.Service<Extraction>()("atrium/memory/Extraction", {
  scoped: Effect.gen(function*() {
    const memory = yield* Memory
    const models = yield* Models
    const chain = yield* ModelChain
    const wallets = yield* Wallets
    const scope = yield* Effect.scope
    /** Per (expert, end user): the turns waiting for the next extraction; present while its worker runs. */
    const waiting = new Map<string, Waiting>()

    const extract = Effect.fn("Extraction.extract")(function*(owner: MemoryOwner, turns: ReadonlyArray<MemoryTurn>) {
      const last = turns[turns.length - 1]!
      const resolved: Array<ResolvedModel> = []
      for (const id of last.models) {
        const model = yield* models.resolve(id)
        if (Option.isSome(model)) resolved.push(model.value)
      }
      if (resolved.length === 0) return
      const { blocks, facts } = yield* memory.snapshot(owner, CONTEXT_FACTS)
      // The last turn's message first: it is what a directive-driven model (builtin) reads.
      const transcript = turns.map((turn) =>
        `${turn.message.slice(0, MAX_TURN_CHARS)}\n\nThe assistant answered:\n${turn.answer.slice(0, MAX_TURN_CHARS)}`
      ).reverse().join("\n\n(An earlier turn:)\n")
      const { call, model } = yield* chain.call(
        resolved,
        [
          { role: "system", content: `${INSTRUCTIONS}\n\n${renderMemory(blocks, facts)}` },
          { role: "user", content: transcript }
        ],
        undefined,
        () => Effect.void,
        undefined
      )
      const cost = costOf(model, call.inputTokens, call.outputTokens, call.cachedInputTokens)
      if (cost > 0n) {
        // Charged before anything is written: an account that cannot pay gets no extraction.
        yield* wallets.chargeFor(owner.partition.accountId, cost, {
          kind: "memory",
          scope: "memory",
          key: `memory:${last.runId}`,
          description: `Memory of ${last.agent} (${model.entry.id}, ${turns.length} turn${turns.length === 1 ? "" : "s"})`
        }, null)
      }
      const proposal = proposalOf(call.text)
      if (Option.isNone(proposal)) return
      // Each proposal as the model's own tool call would be: refused ones (limits, read-only, unknown) are dropped.
      for (const text of proposal.value.facts ?? []) yield* Effect.ignore(memory.addFact(owner, text, "extraction"))
      for (const { id, text } of proposal.value.supersede ?? []) yield* Effect.ignore(memory.supersede(owner, id, text, "extraction"))
      for (const { append, label } of proposal.value.blocks ?? []) {
        yield* Effect.ignore(memory.append(owner, label, append, "extraction"))
      }
    })

    const keyOf = (owner: MemoryOwner) => `${owner.agentId}\u0000${owner.partition.accountId}\u0000${owner.partition.endUserId}`

    /** Waits out the debounce, takes every turn that came meanwhile, extracts once; again if more came during it. */
    const worker = (key: string): Effect.Effect<void> =>
      Effect.gen(function*() {
        yield* Effect.sleep(EXTRACTION_DEBOUNCE)
        const batch = waiting.get(key)!
        const turns = batch.turns.splice(0)
        yield* extract(batch.owner, turns).pipe(
          Effect.catchAllCause((cause) => Effect.logWarning("memory extraction failed", cause))
        )
        if (batch.turns.length > 0) return yield* worker(key)
        waiting.delete(key)
      })

    const afterTurn = (owner: MemoryOwner, turn: MemoryTurn) =>
      Effect.suspend(() => {
        const key = keyOf(owner)
        const batch = waiting.get(key)
        if (batch !== undefined) {
          batch.owner = owner
          batch.turns.push(turn)
          // A session far busier than the debounce: the newest turns are what matters.
          if (batch.turns.length > MAX_TURNS) batch.turns.shift()
          return Effect.void
        }
        waiting.set(key, { owner, turns: [turn] })
        return Effect.asVoid(Effect.forkIn(worker(key), scope))
      })

    return { afterTurn, extract } as const
  }),
  dependencies: [Memory.Default, Models.Default, ModelChain.Default]
}) {}
