import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import { Duration, Effect, Option, Schema } from "effect"
import { AgentId, UserId } from "../platform/Ids.js"
import { Json } from "../platform/Rows.js"
import { DistillationId } from "./Domain.js"

const TranscriptEntrySchema = Schema.Struct({
  role: Schema.Literal("user", "assistant"),
  content: Schema.String,
  at: Schema.String,
  run_id: Schema.optional(Schema.String)
})
export type TranscriptEntry = typeof TranscriptEntrySchema.Type

/** The distiller's `Material` and `Draft` as their jsonb columns hold them. */
const MaterialRow = Schema.Struct({ filename: Schema.String, content: Schema.String })
const DraftRow = Schema.Struct({
  name: Schema.String,
  description: Schema.String,
  category: Schema.String,
  instructions: Schema.String
})

const DistillationRowSchema = Schema.Struct({
  id: DistillationId,
  ownerId: UserId,
  topic: Schema.String,
  materials: Json(Schema.Array(MaterialRow)),
  draft: Json(DraftRow),
  messages: Json(Schema.Array(TranscriptEntrySchema)),
  agentId: Schema.NullOr(AgentId),
  agentIdentifier: Schema.NullOr(Schema.String),
  turns: Schema.Number,
  createdAt: Schema.DateFromSelf,
  updatedAt: Schema.DateFromSelf
})
export type DistillationRow = typeof DistillationRowSchema.Type

const COLUMNS =
  "d.id, d.owner_id, d.topic, d.materials, d.draft, d.messages, d.agent_id, a.identifier AS agent_identifier, d.turns, " +
  "d.created_at, d.updated_at"

const Owned = Schema.Struct({ id: DistillationId, ownerId: UserId })

/** Distillation conversations. SQL errors are defects here. */
export class DistillationsRepo extends Effect.Service<DistillationsRepo>()("atrium/distillation/DistillationsRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const distillationById = SqlSchema.findOne({
      Request: Owned,
      Result: DistillationRowSchema,
      execute: ({ id, ownerId }) =>
        sql`
          SELECT ${sql.literal(COLUMNS)} FROM distillations d LEFT JOIN agents a ON a.id = d.agent_id
          WHERE d.id = ${id} AND d.owner_id = ${ownerId}`
    })
    const byId = (id: DistillationId, ownerId: UserId) => Effect.orDie(distillationById({ id, ownerId }))

    const insertRow = SqlSchema.void({
      Request: Schema.Struct({
        ...Owned.fields,
        topic: Schema.String,
        materials: Schema.parseJson(Schema.Array(MaterialRow)),
        draft: Schema.parseJson(DraftRow),
        messages: Schema.parseJson(Schema.Array(TranscriptEntrySchema))
      }),
      execute: (row) =>
        sql`
          INSERT INTO distillations (id, owner_id, topic, materials, draft, messages, turns)
          VALUES (${row.id}, ${row.ownerId}, ${row.topic}, ${row.materials}::jsonb,
                  ${row.draft}::jsonb, ${row.messages}::jsonb, 1)`
    })
    const insert = (row: Parameters<typeof insertRow>[0]) =>
      insertRow(row).pipe(
        Effect.zipRight(distillationById({ id: row.id, ownerId: row.ownerId })),
        Effect.map(Option.getOrThrow),
        Effect.orDie
      )

    const claimRow = SqlSchema.findOne({
      Request: Schema.Struct({ ...Owned.fields, seconds: Schema.Number }),
      Result: Schema.Struct({ id: DistillationId }),
      execute: ({ id, ownerId, seconds }) =>
        sql`
          UPDATE distillations SET busy_until = now() + make_interval(secs => ${seconds})
          WHERE id = ${id} AND owner_id = ${ownerId} AND (busy_until IS NULL OR busy_until < now())
          RETURNING id`
    })
    /**
     * Takes the conversation for one message for at most `hold`: none when it is not `ownerId`'s (or does not
     * exist), `busy` when another message is being answered.
     */
    const claim = (id: DistillationId, ownerId: UserId, hold: Duration.Duration) =>
      Effect.gen(function*() {
        const claimed = yield* claimRow({ id, ownerId, seconds: Math.ceil(Duration.toSeconds(hold)) + 30 })
        if (Option.isSome(claimed)) return { _tag: "Claimed" as const, row: Option.getOrThrow(yield* byId(id, ownerId)) }
        const exists = yield* byId(id, ownerId)
        return Option.isSome(exists) ? { _tag: "Busy" as const } : { _tag: "Missing" as const }
      }).pipe(Effect.orDie)

    const releaseRow = SqlSchema.void({
      Request: DistillationId,
      execute: (id) => sql`UPDATE distillations SET busy_until = NULL WHERE id = ${id}`
    })
    const release = (id: DistillationId) => Effect.orDie(releaseRow(id))

    const finishRow = SqlSchema.void({
      Request: Schema.Struct({
        id: DistillationId,
        draft: Schema.parseJson(DraftRow),
        messages: Schema.parseJson(Schema.Array(TranscriptEntrySchema)),
        agentId: Schema.NullOr(AgentId)
      }),
      execute: (update) =>
        sql`
          UPDATE distillations SET draft = ${update.draft}::jsonb,
            messages = ${update.messages}::jsonb, agent_id = ${update.agentId},
            turns = turns + 1, busy_until = NULL, updated_at = now()
          WHERE id = ${update.id}`
    })
    /** Writes the outcome of one message and releases the conversation. */
    const finish = (id: DistillationId, ownerId: UserId, update: {
      draft: DistillationRow["draft"]
      messages: ReadonlyArray<TranscriptEntry>
      agentId: AgentId | null
    }) =>
      finishRow({ id, ...update }).pipe(
        Effect.zipRight(byId(id, ownerId)),
        Effect.map(Option.getOrThrow),
        Effect.orDie
      )

    const distillationsOf = SqlSchema.findAll({
      Request: UserId,
      Result: DistillationRowSchema,
      execute: (ownerId) =>
        sql`
          SELECT ${sql.literal(COLUMNS)} FROM distillations d LEFT JOIN agents a ON a.id = d.agent_id
          WHERE d.owner_id = ${ownerId} ORDER BY d.created_at DESC, d.id LIMIT 100`
    })
    const byOwner = (ownerId: UserId) => Effect.orDie(distillationsOf(ownerId))

    return { byId, insert, claim, release, finish, byOwner } as const
  })
}) {}
