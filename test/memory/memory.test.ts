import { assert, describe, it } from "@effect/vitest"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Either, FastCheck as fc, Layer } from "effect"
import { AgentsRepo } from "../../src/agents/Repo.js"
import { Memory } from "../../src/memory/Memory.js"
import { MemoryRepo } from "../../src/memory/Repo.js"
import { FactId } from "../../src/runtime/Domain.js"
import { AgentId, randomBase62, UserId } from "../../src/platform/Ids.js"
import type { MemorySettings } from "../../src/runtime/Expert.js"
import type { MemoryOwner } from "../../src/runtime/Ports.js"
import { insertUser, TestDatabase } from "../support/Database.js"

/**
 * Memory as a service (issue 47, docs/memory.md) on a database of its own: blocks within their limits on every write
 * path, versions, facts superseded and never lost by the model, deletes that leave nothing, and partitions apart.
 */

const SETTINGS: MemorySettings = {
  enabled: true,
  blocks: [
    { label: "human", description: "Who the user is", limit: 40 },
    { label: "preferences", description: "How they like answers", limit: 25 },
    { label: "persona", description: "Set by the user only", limit: 30, read_only: true }
  ]
}

/** A new expert of a new user, with `settings` in its draft; the owner's own partition. */
const newExpert = (settings: MemorySettings = SETTINGS) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const n = randomBase62(10).toLowerCase()
    const userId = UserId.make(`usr_${n}`)
    yield* insertUser(userId)
    const draft = {
      name: n, description: "", category: "other", instructions: "", model: "builtin", tools: [], subagents: [],
      opening_message: "", case_demos: [], billing: { type: "FREE", price: "0", free_trial_per_user: 3, allow_trial: true },
      memory: settings
    }
    yield* sql`INSERT INTO agents (id, identifier, owner_id, draft) VALUES (${`agt_${n}`}, ${`m-${n}`}, ${userId}, ${JSON.stringify(draft)}::jsonb)`.pipe(Effect.orDie)
    return { agentId: AgentId.make(`agt_${n}`), identifier: `m-${n}`, userId }
  })

const ownerOf = (agentId: string, accountId: UserId, endUserId = "", settings: MemorySettings = SETTINGS): MemoryOwner => ({
  agentId,
  partition: { accountId, endUserId },
  settings
})

const refusal = <A, E extends { message: string }, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.map(Effect.either(effect), (result) => Either.isLeft(result) ? result.left.message : `accepted: ${JSON.stringify(result.right)}`)

const MemoryLayer = Layer.mergeAll(Memory.Default, MemoryRepo.Default, AgentsRepo.Default).pipe(Layer.provideMerge(TestDatabase()))

describe("memory", () => {
  it.layer(MemoryLayer, { timeout: "60 seconds" })((it) => {
    it.effect("blocks: append, replace and read, each change a new version that keeps the value before it", () =>
      Effect.gen(function*() {
        const memory = yield* Memory
        const expert = yield* newExpert()
        const owner = ownerOf(expert.agentId, expert.userId)
        const empty = yield* memory.read(owner, "human")
        assert.deepStrictEqual([empty.value, empty.version, empty.limit], ["", 0, 40])

        assert.strictEqual((yield* memory.append(owner, "human", "Name: Ada")).version, 1)
        assert.strictEqual((yield* memory.append(owner, "human", "Stack: Go")).value, "Name: Ada\nStack: Go")
        const replaced = yield* memory.replace(owner, "human", "Go", "Rust")
        assert.deepStrictEqual([replaced.value, replaced.version], ["Name: Ada\nStack: Rust", 3])
        assert.strictEqual((yield* memory.read(owner, "human")).value, "Name: Ada\nStack: Rust")

        const { rows, versions } = yield* memory.exported(owner)
        assert.deepStrictEqual(rows.map((row) => [row.label, row.version]), [["human", 3]])
        assert.deepStrictEqual(versions.map((v) => [v.version, v.value, v.writtenBy]), [
          [1, "Name: Ada", "model"],
          [2, "Name: Ada\nStack: Go", "model"],
          [3, "Name: Ada\nStack: Rust", "model"]
        ])
      }))

    it.effect("every write path refuses what passes a block's limit, and the model cannot write a read-only block", () =>
      Effect.gen(function*() {
        const memory = yield* Memory
        const expert = yield* newExpert()
        const owner = ownerOf(expert.agentId, expert.userId)
        yield* memory.append(owner, "preferences", "short answers")
        assert.include(yield* refusal(memory.append(owner, "preferences", "and plenty of examples")), "limit is 25")
        assert.include(yield* refusal(memory.replace(owner, "preferences", "short", "very very very short")), "limit is 25")
        assert.include(yield* refusal(memory.setValue(owner, "preferences", "x".repeat(26), "user")), "limit is 25")
        assert.include(yield* refusal(memory.setValue(owner, "preferences", "x".repeat(26), "extraction")), "limit is 25")
        assert.strictEqual((yield* memory.read(owner, "preferences")).value, "short answers")
        // Exactly at the limit is fine.
        assert.strictEqual((yield* memory.setValue(owner, "preferences", "y".repeat(25), "user")).value.length, 25)

        assert.include(yield* refusal(memory.append(owner, "persona", "I am a pirate")), "read-only")
        assert.strictEqual((yield* memory.setValue(owner, "persona", "Speaks formally", "user")).value, "Speaks formally")
        assert.include(yield* refusal(memory.append(owner, "nope", "x")), "No memory block nope; the blocks are human, preferences, persona")
        assert.include(yield* refusal(memory.replace(owner, "preferences", "zzz", "a")), "does not contain")
      }))

    it.effect.prop(
      "property: random writes from every path never leave a block (or any kept version) past its limit",
      [fc.array(
        fc.record({
          path: fc.constantFrom("append", "replace", "user", "extraction"),
          label: fc.constantFrom("human", "preferences"),
          text: fc.string({ minLength: 1, maxLength: 30 }),
          old: fc.nat(40)
        }),
        { minLength: 1, maxLength: 25 }
      )],
      ([writes]) =>
        Effect.gen(function*() {
          const memory = yield* Memory
          const repo = yield* MemoryRepo
          const expert = yield* newExpert()
          const owner = ownerOf(expert.agentId, expert.userId, `p-${randomBase62(6)}`)
          const limits = new Map(SETTINGS.blocks.map((block) => [block.label, block.limit]))
          for (const write of writes) {
            const current = (yield* memory.read(owner, write.label)).value
            const op = write.path === "append"
              ? memory.append(owner, write.label, write.text)
              : write.path === "replace"
              ? memory.replace(owner, write.label, current.slice(write.old % Math.max(current.length, 1)).slice(0, 3) || "x", write.text)
              : memory.setValue(owner, write.label, current + write.text, write.path as "user" | "extraction")
            yield* Effect.either(op)
            for (const row of yield* repo.blocks({ agentId: owner.agentId, accountId: owner.partition.accountId, endUserId: owner.partition.endUserId })) {
              assert.isAtMost(row.value.length, limits.get(row.label)!, `${row.label} after ${write.path}`)
            }
          }
          for (const version of yield* repo.versions({ agentId: owner.agentId, accountId: owner.partition.accountId, endUserId: owner.partition.endUserId })) {
            assert.isAtMost(version.value.length, limits.get(version.label)!, `${version.label} version ${version.version}`)
          }
        }),
      { timeout: 120_000, fastCheck: { numRuns: 40, seed: 47, endOnFailure: true } }
    )

    it.effect("facts: a contradicted fact is superseded and kept; search and the context see only the current one", () =>
      Effect.gen(function*() {
        const memory = yield* Memory
        const expert = yield* newExpert()
        const owner = ownerOf(expert.agentId, expert.userId)
        const city = yield* memory.addFact(owner, "The user lives in Lisbon.")
        yield* memory.addFact(owner, "The user's favourite colour is teal.")
        const moved = yield* memory.supersede(owner, FactId.make(city.id), "The user lives in Porto.")
        assert.include(yield* refusal(memory.supersede(owner, FactId.make(city.id), "The user lives in Faro.")), `already superseded by ${moved.id}`)
        assert.include(yield* refusal(memory.supersede(owner, FactId.make("fact_nope"), "x")), "No fact fact_nope")
        assert.include(yield* refusal(memory.addFact(owner, "x".repeat(501))), "1 to 500 characters")

        const { facts } = yield* memory.view(owner)
        const old = facts.find((fact) => fact.id === city.id)!
        assert.isNotNull(old.supersededAt)
        assert.strictEqual(old.supersededBy, moved.id)
        assert.strictEqual(facts.length, 3)

        const found = yield* memory.search(owner, "LIVES user", 10)
        assert.deepStrictEqual(found.facts.map((fact) => fact.text), ["The user lives in Porto."])
        assert.deepStrictEqual((yield* memory.search(owner, "colour Paris", 10)).facts, [])
        const snapshot = yield* memory.snapshot(owner, 20)
        assert.deepStrictEqual(snapshot.facts.map((fact) => fact.text).sort(), ["The user lives in Porto.", "The user's favourite colour is teal."])
      }))

    it.effect("a tool call tried again (a durable run's step after a fault) writes once: its key finds what it wrote", () =>
      Effect.gen(function*() {
        const memory = yield* Memory
        const expert = yield* newExpert()
        const owner = ownerOf(expert.agentId, expert.userId)
        // Each call twice with its key, as a step cut after its tool ran and before its result was recorded.
        const first = yield* memory.append(owner, "human", "Name: Ada", "model", "run_a:call_1")
        const again = yield* memory.append(owner, "human", "Name: Ada", "model", "run_a:call_1")
        assert.deepStrictEqual([again.value, again.version], [first.value, first.version])
        // Another call appending the same text is another write.
        assert.strictEqual((yield* memory.append(owner, "human", "Likes Go", "model", "run_a:call_2")).value, "Name: Ada\nLikes Go")
        assert.strictEqual((yield* memory.append(owner, "human", "Likes Go", "model", "run_a:call_2")).value, "Name: Ada\nLikes Go")

        const added = yield* memory.addFact(owner, "The user lives in Lisbon.", "model", "run_a:call_3")
        const addedAgain = yield* memory.addFact(owner, "The user lives in Lisbon.", "model", "run_a:call_3")
        assert.strictEqual(addedAgain.id, added.id)
        const moved = yield* memory.supersede(owner, FactId.make(added.id), "The user lives in Porto.", "model", "run_a:call_4")
        const movedAgain = yield* memory.supersede(owner, FactId.make(added.id), "The user lives in Porto.", "model", "run_a:call_4")
        assert.strictEqual(movedAgain.id, moved.id)
        // A different call superseding it again is still refused: the fact was superseded by another.
        assert.include(yield* refusal(memory.supersede(owner, FactId.make(added.id), "x", "model", "run_a:call_5")), `already superseded by ${moved.id}`)

        const { facts, versions } = yield* Effect.zip(memory.view(owner), memory.exported(owner)).pipe(
          Effect.map(([view, exported]) => ({ facts: view.facts, versions: exported.versions }))
        )
        assert.deepStrictEqual(facts.map((fact) => fact.text).sort(), ["The user lives in Lisbon.", "The user lives in Porto."])
        assert.deepStrictEqual(versions.map((v) => v.value), ["Name: Ada", "Name: Ada\nLikes Go"])
      }))

    it.effect("a deleted fact, or everything deleted, is in no search and no snapshot", () =>
      Effect.gen(function*() {
        const memory = yield* Memory
        const expert = yield* newExpert()
        const owner = ownerOf(expert.agentId, expert.userId)
        const tea = yield* memory.addFact(owner, "Drinks green tea")
        yield* memory.addFact(owner, "Plays chess")
        yield* memory.append(owner, "human", "Likes tea")
        assert.isTrue(yield* memory.removeFact(owner, FactId.make(tea.id)))
        assert.isFalse(yield* memory.removeFact(owner, FactId.make(tea.id)))
        assert.deepStrictEqual((yield* memory.search(owner, "tea", 10)).facts, [])
        assert.deepStrictEqual((yield* memory.search(owner, "tea", 10)).blocks.map((block) => block.label), ["human"])

        assert.deepStrictEqual(yield* memory.removeAll(owner), { blocks: 1, facts: 1 })
        const after = yield* memory.snapshot(owner, 20)
        assert.deepStrictEqual(after.facts, [])
        assert.deepStrictEqual(after.blocks.map((block) => [block.value, block.version]), [["", 0], ["", 0], ["", 0]])
        assert.deepStrictEqual((yield* memory.exported(owner)).versions, [])
        assert.deepStrictEqual((yield* memory.search(owner, "chess", 10)).facts, [])
      }))

    it.effect("another end user of the account, another account, another expert: each sees nothing of the others", () =>
      Effect.gen(function*() {
        const memory = yield* Memory
        const expert = yield* newExpert()
        const other = yield* newExpert()
        const alice = ownerOf(expert.agentId, expert.userId, "alice")
        yield* memory.addFact(alice, "alice likes tea")
        yield* memory.append(alice, "human", "alice")
        for (
          const stranger of [
            ownerOf(expert.agentId, expert.userId, "bob"),
            ownerOf(expert.agentId, expert.userId, ""),
            ownerOf(expert.agentId, other.userId, "alice"),
            ownerOf(other.agentId, expert.userId, "alice")
          ]
        ) {
          const seen = yield* memory.view(stranger)
          assert.deepStrictEqual(seen.facts, [])
          assert.isTrue(seen.blocks.every((block) => block.value === ""))
          assert.deepStrictEqual((yield* memory.search(stranger, "tea", 10)).facts, [])
        }
        assert.strictEqual((yield* memory.usage(expert.agentId)).endUsers, 1)
      }))

    it.effect("ownerFor: the owner's draft, others the published version, and 404 for anything else", () =>
      Effect.gen(function*() {
        const memory = yield* Memory
        const expert = yield* newExpert()
        const mine = yield* memory.ownerFor(expert.identifier, { accountId: expert.userId, endUserId: "x" })
        assert.deepStrictEqual(mine.settings, SETTINGS)
        const stranger = yield* Effect.flip(memory.ownerFor(expert.identifier, { accountId: UserId.make("usr_other"), endUserId: "" }))
        assert.strictEqual(stranger._tag, "NotFound")
        assert.strictEqual((yield* Effect.flip(memory.ownerFor("no-such-expert", { accountId: expert.userId, endUserId: "" })))._tag, "NotFound")
      }))
  })
})
