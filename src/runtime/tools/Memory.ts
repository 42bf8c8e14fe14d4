import { Effect, Either, Option, ParseResult, Schema } from "effect"
import { MEMORY_TOOLS, type MemoryToolName } from "../Expert.js"
import { FactId } from "../Domain.js"
import { ExpertMemory, type MemoryBlock, type MemoryFact, type MemoryOwner } from "../Ports.js"
import { ToolFailure } from "./Tools.js"

/**
 * The memory tools (docs/memory.md): what the model sees of them, and their calls through the `ExpertMemory` port.
 * Blocks are edited in place (`memory_replace`, `memory_append`) within their limits; facts are only added or
 * superseded, so a model that changed its mind never loses what it was told.
 */

/** The longest fact: a fact is one short statement, and every current fact may be in the next turn's context. */
export const MAX_FACT_CHARS = 500
/** The current facts each turn's context shows, newest first (the rest are found with `memory_search`). */
export const CONTEXT_FACTS = 20

const Label = Schema.String.pipe(Schema.maxLength(40)).annotations({ description: "the block's label" })
const FactText = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(MAX_FACT_CHARS))

export const MEMORY_TOOL_SPECS = {
  memory_read: {
    description: "Reads one of your memory blocks about this user: its value, limit (characters) and version.",
    parameters: Schema.Struct({ label: Label })
  },
  memory_replace: {
    description: "Replaces the text `old` (which must appear exactly once) in a memory block with `new`; an empty `new` removes it. " +
      "The block must stay within its limit.",
    parameters: Schema.Struct({ label: Label, old: Schema.String.pipe(Schema.minLength(1)), new: Schema.String })
  },
  memory_append: {
    description: "Appends text to a memory block (on a new line). The block must stay within its limit.",
    parameters: Schema.Struct({ label: Label, text: Schema.String.pipe(Schema.minLength(1)) })
  },
  memory_search: {
    description: "Searches what you remember of this user: current facts and memory blocks matching every word of the query.",
    parameters: Schema.Struct({ query: Schema.String.pipe(Schema.maxLength(500)) })
  },
  fact_add: {
    description: `Records a short fact about this user (at most ${MAX_FACT_CHARS} characters), for later conversations.`,
    parameters: Schema.Struct({ text: FactText })
  },
  fact_supersede: {
    description: "Replaces a fact that is no longer true with a newer one; the old fact is kept, marked superseded.",
    // The model's word for the fact, unchecked: one of the wrong kind is no fact of this user's, as an unknown one.
    parameters: Schema.Struct({ id: FactId.unchecked.pipe(Schema.maxLength(64)), text: FactText })
  },
  memory_save: {
    description: "Saves a note to this agent's memory of the user, for later conversations (a fact).",
    parameters: Schema.Struct({ text: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(MAX_FACT_CHARS)) })
  }
} as const

export const isMemoryTool = (name: string): name is MemoryToolName =>
  Object.hasOwn(MEMORY_TOOL_SPECS, name)

/** Every tool an expert with memory enabled is offered. */
export const MEMORY_ENABLED_TOOLS: ReadonlyArray<MemoryToolName> = [...MEMORY_TOOLS, "memory_save"]

const blockView = (block: MemoryBlock) => ({
  label: block.label,
  value: block.value,
  limit: block.limit,
  chars: block.value.length,
  version: block.version,
  read_only: block.readOnly
})
const factView = (fact: MemoryFact) => ({ id: fact.id, text: fact.text, valid_from: fact.validFrom.toISOString() })

const refused = (error: { readonly message: string }) => new ToolFailure({ message: error.message })

/** Runs a memory tool: its arguments checked first, a refusal a `ToolFailure` the model can recover from. */
export const runMemoryTool = (
  name: MemoryToolName,
  args: unknown,
  owner: Option.Option<MemoryOwner>,
  memory: Option.Option<typeof ExpertMemory.Service>,
  call: string
): Effect.Effect<unknown, ToolFailure> =>
  Effect.gen(function*() {
    if (Option.isNone(owner) || Option.isNone(memory)) {
      return yield* new ToolFailure({ message: `${name} is not available: this run has no memory.` })
    }
    const spec = MEMORY_TOOL_SPECS[name]
    const decoded = Schema.decodeUnknownEither(spec.parameters as Schema.Schema<any, any>)(args, { onExcessProperty: "ignore" })
    if (Either.isLeft(decoded)) {
      const detail = ParseResult.ArrayFormatter.formatErrorSync(decoded.left)
        .map((issue) => `${issue.path.length > 0 ? issue.path.join(".") : "arguments"}: ${issue.message}`).join("; ")
      return yield* new ToolFailure({ message: `Invalid arguments for ${name}: ${detail}` })
    }
    const params = decoded.right
    const at = owner.value
    const port = memory.value
    switch (name) {
      case "memory_read":
        return blockView(yield* Effect.mapError(port.read(at, params.label), refused))
      case "memory_replace":
        return blockView(yield* Effect.mapError(port.replace(at, params.label, params.old, params.new, call), refused))
      case "memory_append":
        return blockView(yield* Effect.mapError(port.append(at, params.label, params.text, call), refused))
      case "memory_search": {
        const found = yield* port.search(at, params.query, 10)
        return {
          facts: found.facts.map(factView),
          blocks: found.blocks.map((block) => ({ label: block.label, value: block.value })),
          // The spec's shape of `memory_search`, kept for experts written against it.
          memories: found.facts.map((fact) => ({ text: fact.text, saved_at: fact.validFrom.toISOString() }))
        }
      }
      case "fact_add":
        return factView(yield* Effect.mapError(port.addFact(at, params.text, call), refused))
      case "memory_save": {
        const fact = yield* Effect.mapError(port.addFact(at, params.text, call), refused)
        return { saved: true, id: fact.id }
      }
      case "fact_supersede":
        return factView(yield* Effect.mapError(port.supersede(at, params.id, params.text, call), refused))
    }
  })

const escape = (text: string) => text.replace(/</g, "&lt;")

/**
 * What the expert remembers, as a section of the turn's system prompt. A block is shown at most to its limit (a
 * creator who lowered a limit never makes a turn's prompt grow), so memory adds at most the blocks' limits plus
 * `CONTEXT_FACTS` facts to a prompt.
 */
export const renderMemory = (
  blocks: ReadonlyArray<MemoryBlock>,
  facts: ReadonlyArray<MemoryFact>
): string => {
  const lines = [
    "<memory>",
    "What you remember of this user from earlier conversations. Keep it current with your memory tools: " +
    "memory_replace and memory_append edit a block (within its limit); fact_add records a fact and fact_supersede " +
    "replaces one that changed."
  ]
  for (const block of blocks) {
    lines.push(
      `<block label="${block.label}" chars="${Math.min(block.value.length, block.limit)}" limit="${block.limit}"${block.readOnly ? " read_only=\"true\"" : ""}>`
    )
    if (block.description.length > 0) lines.push(`(${escape(block.description)})`)
    lines.push(escape(block.value.slice(0, block.limit)), "</block>")
  }
  lines.push("<facts>")
  // A note saved before facts existed may be longer than a fact (up to 4,000 characters): shown to a fact's length.
  for (const fact of facts) {
    lines.push(`- [${fact.id}] ${escape(fact.text.slice(0, MAX_FACT_CHARS))} (since ${fact.validFrom.toISOString().slice(0, 10)})`)
  }
  lines.push("</facts>", "</memory>")
  return lines.join("\n")
}
