import { createHash } from "node:crypto"
import { Effect, Option } from "effect"
import { AgentsRepo } from "../agents/Repo.js"
import type { Partition } from "../identity/Partition.js"
import { NotFound } from "../platform/Errors.js"
import type { AgentId } from "../platform/Ids.js"
import type { MemoryBlockSetting, MemorySettings } from "../runtime/Expert.js"
import { type MemoryBlock, type MemoryFact, type MemoryOwner, MemoryRefused } from "../runtime/Ports.js"
import { MAX_FACT_CHARS } from "../runtime/tools/Memory.js"
import { FactId } from "../runtime/Domain.js"
import { type BlockRow, type FactRow, type MemoryKey, MemoryRepo } from "./Repo.js"
import { canUseMemoryOf, readsDraft } from "./Policy.js"

/**
 * What an expert remembers of each end user (issue 47, docs/memory.md): blocks within their limits and facts that
 * are superseded, never deleted by the model. Every write of a block, whoever makes it (the model's tools, the end
 * user's PATCH, extraction), goes through `edit`, the one place its limit is checked.
 */

/** Current facts one end user may have with one expert: `fact_add` past it is refused (supersede instead). */
export const MAX_FACTS = 1_000
/** Retries of a block write that lost a race with another write of the same block (each decides again). */
const WRITE_ATTEMPTS = 5

/**
 * A fact's id: derived from the tool call that writes it when there is one (its idempotency key), so a repeat of the
 * call (a durable run's step tried again) finds the fact the first try wrote; random otherwise.
 */
const factIdOf = (call: string | undefined) =>
  call === undefined ? FactId.random() : FactId.make(`fact_${createHash("sha256").update(call).digest("base64url").slice(0, 24)}`)

/** Who wrote a block's version. */
export type Writer = "model" | "user" | "extraction"

const NO_SETTINGS: MemorySettings = { enabled: false, blocks: [] }

const keyOf = (owner: { readonly agentId: string; readonly partition: Partition }): MemoryKey => ({
  agentId: owner.agentId,
  accountId: owner.partition.accountId,
  endUserId: owner.partition.endUserId
})

const blockOf = (setting: MemoryBlockSetting, row: BlockRow | undefined): MemoryBlock => ({
  label: setting.label,
  description: setting.description,
  value: row?.value ?? "",
  limit: setting.limit,
  readOnly: setting.read_only === true,
  version: row?.version ?? 0
})

export const factOf = (row: FactRow): MemoryFact => ({
  id: row.id,
  text: row.text,
  validFrom: row.validFrom,
  supersededAt: row.supersededAt
})

/** The limit check: the only gate between a block's next value and the database. */
export const withinLimit = (setting: MemoryBlockSetting, next: string): string | undefined =>
  next.length > setting.limit
    ? `The block ${setting.label} would hold ${next.length} characters; its limit is ${setting.limit}. Shorten it (memory_replace) first.`
    : undefined

/** Words of a query as full text search takes them: letters and digits, lower case. */
const wordsOf = (query: string) => query.toLowerCase().split(/[^\p{L}\p{N}]+/u).filter((word) => word.length > 0).slice(0, 10)

export class Memory extends Effect.Service<Memory>()("atrium/memory/Memory", {
  effect: Effect.gen(function*() {
    const repo = yield* MemoryRepo
    const agents = yield* AgentsRepo

    /**
     * The expert `identifier` as `partition`'s account may use it (its owner's draft, anyone else's published
     * version), with its memory settings; 404 otherwise, as everywhere an agent is named.
     */
    const ownerFor = Effect.fn("Memory.ownerFor")(function*(identifier: string, partition: Partition) {
      const agent = yield* agents.byIdentifier(identifier)
      const notFound = new NotFound({ message: `No agent ${identifier}.` })
      if (Option.isNone(agent)) return yield* notFound
      const { draft, id, publishedVersion } = agent.value
      if (!canUseMemoryOf(partition, agent.value)) return yield* notFound
      let config = draft
      if (!readsDraft(partition, agent.value) && publishedVersion !== null) {
        const published = yield* agents.version(id, publishedVersion)
        if (Option.isNone(published)) return yield* notFound
        config = published.value
      }
      return { agentId: id, partition, settings: config.memory ?? NO_SETTINGS } satisfies MemoryOwner
    })

    const settingOf = (owner: MemoryOwner, label: string) => {
      const setting = owner.settings.blocks.find((block) => block.label === label)
      if (setting !== undefined) return Effect.succeed(setting)
      const labels = owner.settings.blocks.map((block) => block.label)
      return Effect.fail(new MemoryRefused({
        message: labels.length === 0
          ? `No memory block ${label}: this expert keeps no blocks.`
          : `No memory block ${label}; the blocks are ${labels.join(", ")}.`
      }))
    }

    /**
     * Every block write: reads the block, computes its next value, checks the limit, and writes it only if no one
     * wrote in between (else decides again on what is there now). The model cannot write a read-only block.
     */
    const edit = Effect.fn("Memory.edit")(function*(
      owner: MemoryOwner,
      label: string,
      writer: Writer,
      change: (current: string) => string | MemoryRefused,
      call?: string
    ) {
      const setting = yield* settingOf(owner, label)
      if (writer !== "user" && setting.read_only === true) {
        return yield* new MemoryRefused({ message: `The block ${label} is read-only.` })
      }
      const key = keyOf(owner)
      for (let attempt = 0; attempt < WRITE_ATTEMPTS; attempt++) {
        const row = (yield* repo.blocks(key)).find((block) => block.label === label)
        const current = blockOf(setting, row)
        // A repeat of a tool call that already wrote this block (a durable run's step tried again): what it wrote is
        // there; it is not applied twice.
        if (call !== undefined && (yield* repo.writtenByCall(key, label, call))) return current
        const next = change(current.value)
        if (typeof next !== "string") return yield* next
        const over = withinLimit(setting, next)
        if (over !== undefined) return yield* new MemoryRefused({ message: over })
        if (next === current.value && row !== undefined) return current
        const written = yield* repo.write({ ...key, label, expected: current.version, value: next, writtenBy: writer, call: call ?? null })
        if (Option.isSome(written)) return { ...current, value: next, version: written.value.version }
      }
      return yield* new MemoryRefused({ message: `The block ${label} is being changed by another call; try again.` })
    })

    const snapshot = Effect.fn("Memory.snapshot")(function*(owner: MemoryOwner, maxFacts: number) {
      const key = keyOf(owner)
      const rows = yield* repo.blocks(key)
      const facts = maxFacts > 0 ? yield* repo.facts(key, true, maxFacts) : []
      return {
        blocks: owner.settings.blocks.map((setting) => blockOf(setting, rows.find((row) => row.label === setting.label))),
        facts: facts.map(factOf)
      }
    })

    const read = (owner: MemoryOwner, label: string) =>
      Effect.gen(function*() {
        const setting = yield* settingOf(owner, label)
        const rows = yield* repo.blocks(keyOf(owner))
        return blockOf(setting, rows.find((row) => row.label === label))
      })

    const replace = (owner: MemoryOwner, label: string, old: string, next: string, writer: Writer = "model", call?: string) =>
      edit(owner, label, writer, (current) => {
        const at = current.indexOf(old)
        if (at < 0) return new MemoryRefused({ message: `The block ${label} does not contain the text to replace.` })
        if (current.indexOf(old, at + 1) >= 0) {
          return new MemoryRefused({ message: `The text to replace appears more than once in ${label}; give more of it.` })
        }
        return current.slice(0, at) + next + current.slice(at + old.length)
      }, call)

    const append = (owner: MemoryOwner, label: string, text: string, writer: Writer = "model", call?: string) =>
      edit(owner, label, writer, (current) => current.length === 0 ? text : `${current}\n${text}`, call)

    const setValue = (owner: MemoryOwner, label: string, value: string, writer: Writer) =>
      edit(owner, label, writer, () => value)

    const search = Effect.fn("Memory.search")(function*(owner: MemoryOwner, query: string, limit: number) {
      const key = keyOf(owner)
      const words = wordsOf(query)
      const facts = words.length === 0 ? yield* repo.facts(key, true, limit) : yield* repo.search(key, words.join(" "), limit)
      const { blocks } = yield* snapshot(owner, 0)
      return {
        facts: facts.map(factOf),
        blocks: blocks.filter((block) => {
          if (block.value.length === 0) return false
          const value = block.value.toLowerCase()
          return words.every((word) => value.includes(word))
        })
      }
    })

    const checkFact = (text: string) =>
      text.trim().length === 0 || text.length > MAX_FACT_CHARS
        ? Effect.fail(new MemoryRefused({ message: `A fact is 1 to ${MAX_FACT_CHARS} characters.` }))
        : Effect.void

    const addFact = Effect.fn("Memory.addFact")(function*(owner: MemoryOwner, text: string, source: Writer = "model", call?: string) {
      yield* checkFact(text)
      const key = keyOf(owner)
      const id = factIdOf(call)
      // A repeat of the tool call that added it answers the fact it added.
      if (call !== undefined) {
        const added = yield* repo.fact(key, id)
        if (Option.isSome(added)) return factOf(added.value)
      }
      if ((yield* repo.countCurrent(key)) >= MAX_FACTS) {
        return yield* new MemoryRefused({ message: `This user already has ${MAX_FACTS} facts; supersede one instead.` })
      }
      const inserted = yield* repo.insertFact({ ...key, id, text, source })
      if (Option.isSome(inserted)) return factOf(inserted.value)
      // Taken meanwhile by another try of the same call (a runner that lost the run still finishing its step).
      const taken = yield* repo.fact(key, id)
      if (Option.isSome(taken)) return factOf(taken.value)
      return yield* new MemoryRefused({ message: "The fact could not be written; try again." })
    })

    const supersede = Effect.fn("Memory.supersede")(function*(owner: MemoryOwner, id: FactId, text: string, source: Writer = "model", call?: string) {
      yield* checkFact(text)
      const key = keyOf(owner)
      const newer = factIdOf(call)
      const created = yield* repo.supersede({ ...key, old: id, id: newer, text, source })
      if (Option.isSome(created)) return factOf(created.value)
      const existing = yield* repo.fact(key, id)
      // A repeat of the tool call that superseded it answers the fact it wrote.
      if (call !== undefined && Option.isSome(existing) && existing.value.supersededBy === newer) {
        const written = yield* repo.fact(key, newer)
        if (Option.isSome(written)) return factOf(written.value)
      }
      return yield* new MemoryRefused({
        message: Option.isSome(existing)
          ? `The fact ${id} was already superseded by ${existing.value.supersededBy ?? "a newer fact"}.`
          : `No fact ${id}.`
      })
    })

    /** Everything the end user has with the expert, as they see it (GET /v1/memory). */
    const view = Effect.fn("Memory.view")(function*(owner: MemoryOwner) {
      const { blocks } = yield* snapshot(owner, 0)
      const facts = yield* repo.facts(keyOf(owner), false, MAX_FACTS * 2)
      return { blocks, facts }
    })

    /** The end user's copy of everything kept about them, every block version included. */
    const exported = Effect.fn("Memory.export")(function*(owner: MemoryOwner) {
      const key = keyOf(owner)
      const rows = yield* repo.blocks(key)
      const versions = yield* repo.versions(key)
      const facts = yield* repo.facts(key, false, MAX_FACTS * 2)
      return { rows, versions, facts }
    })

    const removeFact = (owner: MemoryOwner, id: FactId) => repo.removeFact(keyOf(owner), id)
    const removeAll = (owner: MemoryOwner) => repo.removeAll(keyOf(owner))
    const usage = (agentId: AgentId) => repo.usage(agentId)

    return {
      ownerFor,
      snapshot,
      read,
      replace,
      append,
      setValue,
      search,
      addFact,
      supersede,
      view,
      exported,
      removeFact,
      removeAll,
      usage
    } as const
  }),
  dependencies: [MemoryRepo.Default, AgentsRepo.Default]
}) {}
