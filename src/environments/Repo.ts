import * as SqlClient from "@effect/sql/SqlClient"
import type * as SqlError from "@effect/sql/SqlError"
import { Effect, Option, Schema } from "effect"
import type { Partition } from "../identity/Partition.js"
import { decodeFirst, decodeRows, Json } from "../platform/Rows.js"

export interface EnvironmentConfig {
  readonly name: string
  readonly description: string
  readonly packages: ReadonlyArray<string>
  readonly env: Readonly<Record<string, string>>
  readonly files: ReadonlyArray<string>
  readonly setupScript: string
}

const EnvironmentRowSchema = Schema.Struct({
  id: Schema.String,
  ownerId: Schema.String,
  endUserId: Schema.String,
  name: Schema.String,
  description: Schema.String,
  packages: Json(Schema.Array(Schema.String)),
  env: Json(Schema.Record({ key: Schema.String, value: Schema.String })),
  files: Json(Schema.Array(Schema.String)),
  setupScript: Schema.String,
  createdAt: Schema.DateFromSelf,
  updatedAt: Schema.DateFromSelf
})
export type EnvironmentRow = typeof EnvironmentRowSchema.Type

const environmentRows = decodeRows(EnvironmentRowSchema)
const firstEnvironment = decodeFirst(EnvironmentRowSchema)
/** The row a write returned: there is one (INSERT/UPDATE … RETURNING of a row known to exist). */
const written = (rows: ReadonlyArray<unknown>) => Effect.map(firstEnvironment(rows), Option.getOrThrow)

const ENVIRONMENT =
  "id, owner_id, end_user_id, name, description, packages, env, files, setup_script, created_at, updated_at"

/** What a write found: done, the row missing, files it names that the partition does not have. */
export type WriteResult =
  | { readonly _tag: "Written"; readonly environment: EnvironmentRow }
  | { readonly _tag: "Missing" }
  | { readonly _tag: "UnknownFiles"; readonly ids: ReadonlyArray<string> }
  | { readonly _tag: "Rejected"; readonly message: string }

const isForeignKeyViolation = (error: SqlError.SqlError) =>
  (error.cause as { code?: unknown } | undefined)?.code === "23503"

/** Environments. SQL errors are defects here, except a foreign key that says the row is still referenced. */
export class EnvironmentsRepo extends Effect.Service<EnvironmentsRepo>()("atrium/environments/EnvironmentsRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    /**
     * The ids among `ids` that are not files of `partition`. The files found are locked `FOR SHARE` until the
     * transaction ends, so none of them can be deleted before the environment naming it is committed.
     */
    const unknownFiles = (partition: Partition, ids: ReadonlyArray<string>) =>
      Effect.gen(function*() {
        if (ids.length === 0) return []
        const found = yield* sql`
          SELECT id FROM files
          WHERE owner_id = ${partition.accountId} AND end_user_id = ${partition.endUserId} AND ${sql.in("id", ids)}
          FOR SHARE`.pipe(Effect.flatMap(decodeRows(Schema.Struct({ id: Schema.String }))))
        const present = new Set(found.map((row) => row.id))
        return ids.filter((id) => !present.has(id))
      })

    const insert = (id: string, partition: Partition, config: EnvironmentConfig) =>
      sql.withTransaction(Effect.gen(function*() {
        const unknown = yield* unknownFiles(partition, config.files)
        if (unknown.length > 0) return { _tag: "UnknownFiles", ids: unknown } as WriteResult
        const rows = yield* sql`
          INSERT INTO environments (id, owner_id, end_user_id, name, description, packages, env, files, setup_script)
          VALUES (${id}, ${partition.accountId}, ${partition.endUserId}, ${config.name}, ${config.description},
                  ${JSON.stringify(config.packages)}::jsonb, ${JSON.stringify(config.env)}::jsonb,
                  ${JSON.stringify(config.files)}::jsonb, ${config.setupScript})
          RETURNING ${sql.literal(ENVIRONMENT)}`
        return { _tag: "Written", environment: yield* written(rows) } as WriteResult
      })).pipe(Effect.orDie, Effect.withSpan("EnvironmentsRepo.insert"))

    const byId = (partition: Partition, id: string) =>
      sql`
        SELECT ${sql.literal(ENVIRONMENT)} FROM environments
        WHERE id = ${id} AND owner_id = ${partition.accountId} AND end_user_id = ${partition.endUserId}`.pipe(
        Effect.flatMap(firstEnvironment),
        Effect.orDie
      )

    const list = (partition: Partition, limit: number) =>
      sql`
        SELECT ${sql.literal(ENVIRONMENT)} FROM environments
        WHERE owner_id = ${partition.accountId} AND end_user_id = ${partition.endUserId}
        ORDER BY created_at DESC, id LIMIT ${limit}`.pipe(
        Effect.flatMap(environmentRows),
        Effect.orDie
      )

    /**
     * Reads the row locked, applies `change`, writes the result: concurrent edits apply one after the other. A
     * `change` that answers a string rejects the edit with that message.
     */
    const update = (partition: Partition, id: string, change: (current: EnvironmentRow) => EnvironmentConfig | string) =>
      sql.withTransaction(Effect.gen(function*() {
        const current = yield* sql`
          SELECT ${sql.literal(ENVIRONMENT)} FROM environments
          WHERE id = ${id} AND owner_id = ${partition.accountId} AND end_user_id = ${partition.endUserId}
          FOR UPDATE`.pipe(Effect.flatMap(firstEnvironment))
        if (Option.isNone(current)) return { _tag: "Missing" } as WriteResult
        const next = change(current.value)
        if (typeof next === "string") return { _tag: "Rejected", message: next } as WriteResult
        const unknown = yield* unknownFiles(partition, next.files)
        if (unknown.length > 0) return { _tag: "UnknownFiles", ids: unknown } as WriteResult
        const updated = yield* sql`
          UPDATE environments SET name = ${next.name}, description = ${next.description},
            packages = ${JSON.stringify(next.packages)}::jsonb, env = ${JSON.stringify(next.env)}::jsonb,
            files = ${JSON.stringify(next.files)}::jsonb, setup_script = ${next.setupScript}, updated_at = now()
          WHERE id = ${id}
          RETURNING ${sql.literal(ENVIRONMENT)}`
        return { _tag: "Written", environment: yield* written(updated) } as WriteResult
      })).pipe(Effect.orDie, Effect.withSpan("EnvironmentsRepo.update"))

    /** Sessions on this environment: while any exists (whatever its state), the environment stays. */
    const sessionsUsing = (id: string) =>
      sql`SELECT count(*)::text AS count FROM sessions WHERE environment_id = ${id}`.pipe(
        Effect.flatMap(decodeFirst(Schema.Struct({ count: Schema.NumberFromString }))),
        Effect.map(Option.match({ onNone: () => 0, onSome: (row) => row.count }))
      )

    /** Deletes unless a session uses it; a foreign key from a session to the row also counts as "in use". */
    const remove = (partition: Partition, id: string) =>
      sql.withTransaction(Effect.gen(function*() {
        const locked = yield* sql`
          SELECT id FROM environments
          WHERE id = ${id} AND owner_id = ${partition.accountId} AND end_user_id = ${partition.endUserId}
          FOR UPDATE`
        if (locked.length === 0) return { _tag: "Missing" } as const
        const sessions = yield* sessionsUsing(id)
        if (sessions > 0) return { _tag: "InUse", sessions } as const
        yield* sql`DELETE FROM environments WHERE id = ${id}`
        return { _tag: "Deleted" } as const
      })).pipe(
        Effect.catchIf(isForeignKeyViolation, () => Effect.succeed({ _tag: "InUse", sessions: 1 } as const)),
        Effect.orDie,
        Effect.withSpan("EnvironmentsRepo.remove")
      )

    return { insert, byId, list, update, remove } as const
  })
}) {}
