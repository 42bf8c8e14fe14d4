import * as SqlClient from "@effect/sql/SqlClient"
import { Duration, Effect, Option } from "effect"
import type { Draft, Material } from "./Distiller.js"

export interface TranscriptEntry {
  readonly role: "user" | "assistant"
  readonly content: string
  readonly at: string
  readonly run_id?: string
}

export interface DistillationRow {
  readonly id: string
  readonly ownerId: string
  readonly topic: string
  readonly materials: ReadonlyArray<Material>
  readonly draft: Draft
  readonly messages: ReadonlyArray<TranscriptEntry>
  readonly agentId: string | null
  readonly agentIdentifier: string | null
  readonly turns: number
  readonly createdAt: Date
  readonly updatedAt: Date
}

const json = (value: unknown) => (typeof value === "string" ? JSON.parse(value) : value)

const toRow = (row: any): DistillationRow => ({
  id: row.id,
  ownerId: row.ownerId,
  topic: row.topic,
  materials: json(row.materials),
  draft: json(row.draft),
  messages: json(row.messages),
  agentId: row.agentId,
  agentIdentifier: row.agentIdentifier ?? null,
  turns: Number(row.turns),
  createdAt: row.createdAt,
  updatedAt: row.updatedAt
})

const COLUMNS =
  "d.id, d.owner_id, d.topic, d.materials, d.draft, d.messages, d.agent_id, a.identifier AS agent_identifier, d.turns, " +
  "d.created_at, d.updated_at"

/** Distillation conversations. SQL errors are defects here. */
export class DistillationsRepo extends Effect.Service<DistillationsRepo>()("atrium/distillation/DistillationsRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const byId = (id: string, ownerId: string) =>
      sql`
        SELECT ${sql.literal(COLUMNS)} FROM distillations d LEFT JOIN agents a ON a.id = d.agent_id
        WHERE d.id = ${id} AND d.owner_id = ${ownerId}`.pipe(
        Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), toRow)),
        Effect.orDie
      )

    const insert = (row: {
      id: string
      ownerId: string
      topic: string
      materials: ReadonlyArray<Material>
      draft: Draft
      messages: ReadonlyArray<TranscriptEntry>
    }) =>
      sql`
        INSERT INTO distillations (id, owner_id, topic, materials, draft, messages, turns)
        VALUES (${row.id}, ${row.ownerId}, ${row.topic}, ${JSON.stringify(row.materials)}::jsonb,
                ${JSON.stringify(row.draft)}::jsonb, ${JSON.stringify(row.messages)}::jsonb, 1)`.pipe(
        Effect.zipRight(byId(row.id, row.ownerId)),
        Effect.map(Option.getOrThrow),
        Effect.orDie
      )

    /**
     * Takes the conversation for one message for at most `hold`: none when it is not `ownerId`'s (or does not
     * exist), `busy` when another message is being answered.
     */
    const claim = (id: string, ownerId: string, hold: Duration.Duration) =>
      Effect.gen(function*() {
        const seconds = Math.ceil(Duration.toSeconds(hold))
        const claimed = yield* sql`
          UPDATE distillations SET busy_until = now() + make_interval(secs => ${seconds + 30})
          WHERE id = ${id} AND owner_id = ${ownerId} AND (busy_until IS NULL OR busy_until < now())
          RETURNING id`
        if (claimed.length > 0) return { _tag: "Claimed" as const, row: Option.getOrThrow(yield* byId(id, ownerId)) }
        const exists = yield* byId(id, ownerId)
        return Option.isSome(exists) ? { _tag: "Busy" as const } : { _tag: "Missing" as const }
      }).pipe(Effect.orDie)

    const release = (id: string) =>
      sql`UPDATE distillations SET busy_until = NULL WHERE id = ${id}`.pipe(Effect.asVoid, Effect.orDie)

    /** Writes the outcome of one message and releases the conversation. */
    const finish = (id: string, ownerId: string, update: {
      draft: Draft
      messages: ReadonlyArray<TranscriptEntry>
      agentId: string | null
    }) =>
      sql`
        UPDATE distillations SET draft = ${JSON.stringify(update.draft)}::jsonb,
          messages = ${JSON.stringify(update.messages)}::jsonb, agent_id = ${update.agentId},
          turns = turns + 1, busy_until = NULL, updated_at = now()
        WHERE id = ${id}`.pipe(
        Effect.zipRight(byId(id, ownerId)),
        Effect.map(Option.getOrThrow),
        Effect.orDie
      )

    const byOwner = (ownerId: string) =>
      sql`
        SELECT ${sql.literal(COLUMNS)} FROM distillations d LEFT JOIN agents a ON a.id = d.agent_id
        WHERE d.owner_id = ${ownerId} ORDER BY d.created_at DESC, d.id LIMIT 100`.pipe(
        Effect.map((rows) => rows.map(toRow)),
        Effect.orDie
      )

    return { byId, insert, claim, release, finish, byOwner } as const
  })
}) {}
