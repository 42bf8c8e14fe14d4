import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { PlatformAuthentication } from "../identity/Domain.js"
import { InvalidRequest, NotFound } from "../platform/Errors.js"
import { FactId } from "../runtime/Domain.js"

/** Which expert's memory: its identifier (the caller's end user is the request's own). */
const AgentParam = Schema.Struct({
  agent: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(64)).annotations({ description: "the expert's identifier" })
})

export const MemoryBlockView = Schema.Struct({
  label: Schema.String,
  description: Schema.String,
  value: Schema.String,
  /** The most characters the block holds. */
  limit: Schema.Int,
  /** 0 until first written; each change adds one and keeps the previous value. */
  version: Schema.Int,
  /** The expert cannot change it; the end user can. */
  read_only: Schema.Boolean
})

export const MemoryFactView = Schema.Struct({
  id: Schema.String,
  text: Schema.String,
  valid_from: Schema.String,
  /** When a newer fact replaced it; null while it is current (only current facts are in the expert's context). */
  superseded_at: Schema.NullOr(Schema.String)
})

export const MemoryView = Schema.Struct({
  agent: Schema.String,
  /** Whether the expert remembers (its creator's setting); facts saved with `memory_save` exist either way. */
  enabled: Schema.Boolean,
  blocks: Schema.Array(MemoryBlockView),
  facts: Schema.Array(MemoryFactView)
})

export const MemoryExport = Schema.Struct({
  agent: Schema.String,
  exported_at: Schema.String,
  blocks: Schema.Array(Schema.Struct({
    label: Schema.String,
    value: Schema.String,
    version: Schema.Int,
    updated_at: Schema.String,
    versions: Schema.Array(Schema.Struct({
      version: Schema.Int,
      value: Schema.String,
      written_by: Schema.String,
      created_at: Schema.String
    }))
  })),
  facts: Schema.Array(Schema.Struct({
    ...MemoryFactView.fields,
    superseded_by: Schema.NullOr(Schema.String),
    source: Schema.String
  }))
})

/**
 * An end user's memory with one expert (docs/memory.md): theirs to see, edit, export and delete, under their
 * `X-End-User-Id` (with an API key) or their login. The expert's creator reaches none of it here.
 */
export class MemoryApi extends HttpApiGroup.make("memory")
  .add(
    HttpApiEndpoint.get("get", "/v1/memory")
      .setUrlParams(AgentParam)
      .addSuccess(MemoryView)
      .annotate(OpenApi.Description, "What this expert remembers of you: its blocks (every configured one) and every fact, superseded ones included.")
  )
  .add(
    HttpApiEndpoint.get("export", "/v1/memory/export")
      .setUrlParams(AgentParam)
      .addSuccess(MemoryExport)
      .annotate(OpenApi.Description, "Everything kept about you by this expert, every earlier value of each block included.")
  )
  .add(
    HttpApiEndpoint.patch("updateBlock", "/v1/memory/blocks/:label")
      .setPath(Schema.Struct({ label: Schema.String }))
      .setUrlParams(AgentParam)
      .setPayload(Schema.Struct({ value: Schema.String.pipe(Schema.maxLength(20_000)) }))
      .addSuccess(MemoryBlockView)
      .annotate(OpenApi.Description, "Set a block's value (within its limit; read-only blocks too: they are read-only to the expert). The previous value is kept as a version.")
  )
  .add(
    HttpApiEndpoint.del("deleteFact", "/v1/memory/facts/:id")
      .setPath(Schema.Struct({ id: FactId.unchecked }))
      .setUrlParams(AgentParam)
      .addSuccess(Schema.Struct({ id: Schema.String, deleted: Schema.Literal(true) }))
      .annotate(OpenApi.Description, "Delete a fact for good: it is in no search and no later turn's context.")
  )
  .add(
    HttpApiEndpoint.del("delete", "/v1/memory")
      .setUrlParams(AgentParam)
      .addSuccess(Schema.Struct({ agent: Schema.String, deleted: Schema.Literal(true), blocks: Schema.Int, facts: Schema.Int }))
      .annotate(OpenApi.Description, "Delete everything this expert keeps about you: blocks, their versions and facts.")
  )
  .middleware(PlatformAuthentication)
  .addError(NotFound)
  .addError(InvalidRequest)
  .annotate(OpenApi.Title, "Memory")
  .annotate(OpenApi.Description, "What an expert remembers of each end user (docs/memory.md), seen, edited and deleted by that end user.")
{}
