import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect, Layer } from "effect"
import { AtriumApi } from "../Api.js"
import { AuthenticationLive } from "../identity/Authentication.js"
import { partitionOf } from "../identity/Partition.js"
import { InvalidRequest, NotFound } from "../platform/Errors.js"
import type { MemoryBlock } from "../runtime/Ports.js"
import { Memory } from "./Memory.js"
import { Caller } from "../identity/Domain.js"

const blockView = (block: MemoryBlock) => ({
  label: block.label,
  description: block.description,
  value: block.value,
  limit: block.limit,
  version: block.version,
  read_only: block.readOnly
})

const factView = (fact: { id: string; text: string; validFrom: Date; supersededAt: Date | null }) => ({
  id: fact.id,
  text: fact.text,
  valid_from: fact.validFrom.toISOString(),
  superseded_at: fact.supersededAt?.toISOString() ?? null
})

/** The caller's memory with an expert: always the caller's own partition (account + end user), never another's. */
export const MemoryHttp = HttpApiBuilder.group(AtriumApi, "memory", (handlers) =>
  Effect.gen(function*() {
    const memory = yield* Memory
    const ownerOf = (agent: string) => Effect.flatMap(Caller, (caller) => memory.ownerFor(agent, partitionOf(caller)))
    return handlers
      .handle("get", ({ urlParams }) =>
        Effect.gen(function*() {
          const owner = yield* ownerOf(urlParams.agent)
          const { blocks, facts } = yield* memory.view(owner)
          return { agent: urlParams.agent, enabled: owner.settings.enabled, blocks: blocks.map(blockView), facts: facts.map(factView) }
        }))
      .handle("export", ({ urlParams }) =>
        Effect.gen(function*() {
          const owner = yield* ownerOf(urlParams.agent)
          const { facts, rows, versions } = yield* memory.exported(owner)
          return {
            agent: urlParams.agent,
            exported_at: new Date().toISOString(),
            blocks: rows.map((row) => ({
              label: row.label,
              value: row.value,
              version: row.version,
              updated_at: row.updatedAt.toISOString(),
              versions: versions.filter((v) => v.label === row.label).map((v) => ({
                version: v.version,
                value: v.value,
                written_by: v.writtenBy,
                created_at: v.createdAt.toISOString()
              }))
            })),
            facts: facts.map((fact) => ({ ...factView(fact), superseded_by: fact.supersededBy, source: fact.source }))
          }
        }))
      .handle("updateBlock", ({ path, payload, urlParams }) =>
        Effect.gen(function*() {
          const owner = yield* ownerOf(urlParams.agent)
          if (!owner.settings.blocks.some((block) => block.label === path.label)) {
            return yield* new NotFound({ message: `No memory block ${path.label} for ${urlParams.agent}.` })
          }
          const block = yield* memory.setValue(owner, path.label, payload.value, "user").pipe(
            Effect.catchTag("MemoryRefused", (refused) => Effect.fail(new InvalidRequest({ message: `Invalid request: value: ${refused.message}` })))
          )
          return blockView(block)
        }))
      .handle("deleteFact", ({ path, urlParams }) =>
        Effect.gen(function*() {
          const owner = yield* ownerOf(urlParams.agent)
          if (!(yield* memory.removeFact(owner, path.id))) return yield* new NotFound({ message: `No fact ${path.id}.` })
          return { id: path.id, deleted: true as const }
        }))
      .handle("delete", ({ urlParams }) =>
        Effect.gen(function*() {
          const owner = yield* ownerOf(urlParams.agent)
          const removed = yield* memory.removeAll(owner)
          return { agent: urlParams.agent, deleted: true as const, ...removed }
        }))
  })).pipe(Layer.provide(AuthenticationLive))

export const MemoryHttpLive = MemoryHttp.pipe(Layer.provide(Memory.Default))
