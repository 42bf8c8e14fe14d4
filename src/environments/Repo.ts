import * as SqlClient from "@effect/sql/SqlClient"
import type * as SqlError from "@effect/sql/SqlError"
import * as SqlSchema from "@effect/sql/SqlSchema"
import { Effect, Option, Predicate, Schema } from "effect"
import { FileId } from "../files/Domain.js"
import type { Partition } from "../identity/Partition.js"
import { Json } from "../platform/Rows.js"
import { EnvironmentId, UserId } from "../platform/Ids.js"

export interface EnvironmentConfig {
  readonly name: string
  readonly description: string
  readonly packages: ReadonlyArray<string>
  readonly env: Readonly<Record<string, string>>
  readonly files: ReadonlyArray<FileId>
  readonly setupScript: string
}

const EnvironmentRowSchema = Schema.Struct({
  id: EnvironmentId,
  ownerId: Schema.String,
  endUserId: Schema.String,
  name: Schema.String,
  description: Schema.String,
  packages: Json(Schema.Array(Schema.String)),
  env: Json(Schema.Record({ key: Schema.String, value: Schema.String })),
  files: Json(Schema.Array(FileId)),
  setupScript: Schema.String,
  createdAt: Schema.DateFromSelf,
  updatedAt: Schema.DateFromSelf
})
export type EnvironmentRow = typeof EnvironmentRowSchema.Type

const ENVIRONMENT =
  "id, owner_id, end_user_id, name, description, packages, env, files, setup_script, created_at, updated_at"

/** What a write found: done, the row missing, files it names that the partition does not have. */
export type WriteResult =
  | { readonly _tag: "Written"; readonly environment: EnvironmentRow }
  | { readonly _tag: "Missing" }
  | { readonly _tag: "UnknownFiles"; readonly ids: ReadonlyArray<FileId> }
  | { readonly _tag: "Rejected"; readonly message: string }

const owner = (partition: Partition) => ({ accountId: partition.accountId, endUserId: partition.endUserId })

const isForeignKeyViolation = (error: unknown) =>
  Predicate.isTagged(error, "SqlError") && ((error as SqlError.SqlError).cause as { code?: unknown } | undefined)?.code === "23503"

const Owner = { accountId: UserId, endUserId: Schema.String }
const OwnedEnvironment = Schema.Struct({ ...Owner, id: EnvironmentId })
const Config = {
  name: Schema.String,
  description: Schema.String,
  packages: Schema.parseJson(Schema.Array(Schema.String)),
  env: Schema.parseJson(Schema.Record({ key: Schema.String, value: Schema.String })),
  files: Schema.parseJson(Schema.Array(FileId)),
  setupScript: Schema.String
}

/** Environments. SQL errors are defects here, except a foreign key that says the row is still referenced. */
export class EnvironmentsRepo extends Effect.Service<EnvironmentsRepo>()("atrium/environments/EnvironmentsRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const sharedFiles = SqlSchema.findAll({
      Request: Schema.Struct({ ...Owner, ids: Schema.Array(FileId) }),
      Result: Schema.Struct({ id: FileId }),
      execute: ({ accountId, endUserId, ids }) =>
        sql`
          SELECT id FROM files
          WHERE owner_id = ${accountId} AND end_user_id = ${endUserId} AND ${sql.in("id", ids)}
          FOR SHARE`
    })
    /**
     * The ids among `ids` that are not files of `partition`. The files found are locked `FOR SHARE` until the
     * transaction ends, so none of them can be deleted before the environment naming it is committed.
     */
    const unknownFiles = (partition: Partition, ids: ReadonlyArray<FileId>) =>
      Effect.gen(function*() {
        if (ids.length === 0) return []
        const found = yield* sharedFiles({ accountId: partition.accountId, endUserId: partition.endUserId, ids })
        const present = new Set<string>(found.map((row) => row.id))
        return ids.filter((id) => !present.has(id))
      })

    const insertEnvironment = SqlSchema.single({
      Request: Schema.Struct({ ...OwnedEnvironment.fields, ...Config }),
      Result: EnvironmentRowSchema,
      execute: (row) =>
        sql`
          INSERT INTO environments (id, owner_id, end_user_id, name, description, packages, env, files, setup_script)
          VALUES (${row.id}, ${row.accountId}, ${row.endUserId}, ${row.name}, ${row.description},
                  ${row.packages}::jsonb, ${row.env}::jsonb, ${row.files}::jsonb, ${row.setupScript})
          RETURNING ${sql.literal(ENVIRONMENT)}`
    })
    const insert = (id: EnvironmentId, partition: Partition, config: EnvironmentConfig) =>
      sql.withTransaction(Effect.gen(function*() {
        const unknown = yield* unknownFiles(partition, config.files)
        if (unknown.length > 0) return { _tag: "UnknownFiles", ids: unknown } as WriteResult
        const environment = yield* insertEnvironment({ id, ...owner(partition), ...config })
        return { _tag: "Written", environment } as WriteResult
      })).pipe(Effect.orDie, Effect.withSpan("EnvironmentsRepo.insert"))

    const environmentById = SqlSchema.findOne({
      Request: OwnedEnvironment,
      Result: EnvironmentRowSchema,
      execute: ({ accountId, endUserId, id }) =>
        sql`
          SELECT ${sql.literal(ENVIRONMENT)} FROM environments
          WHERE id = ${id} AND owner_id = ${accountId} AND end_user_id = ${endUserId}`
    })
    const byId = (partition: Partition, id: EnvironmentId) =>
      Effect.orDie(environmentById({ id, ...owner(partition) }))

    const environments = SqlSchema.findAll({
      Request: Schema.Struct({ ...Owner, limit: Schema.Number }),
      Result: EnvironmentRowSchema,
      execute: ({ accountId, endUserId, limit }) =>
        sql`
          SELECT ${sql.literal(ENVIRONMENT)} FROM environments
          WHERE owner_id = ${accountId} AND end_user_id = ${endUserId}
          ORDER BY created_at DESC, id LIMIT ${limit}`
    })
    const list = (partition: Partition, limit: number) => Effect.orDie(environments({ ...owner(partition), limit }))

    const lockEnvironment = SqlSchema.findOne({
      Request: OwnedEnvironment,
      Result: EnvironmentRowSchema,
      execute: ({ accountId, endUserId, id }) =>
        sql`
          SELECT ${sql.literal(ENVIRONMENT)} FROM environments
          WHERE id = ${id} AND owner_id = ${accountId} AND end_user_id = ${endUserId}
          FOR UPDATE`
    })
    const updateEnvironment = SqlSchema.single({
      Request: Schema.Struct({ id: EnvironmentId, ...Config }),
      Result: EnvironmentRowSchema,
      execute: (next) =>
        sql`
          UPDATE environments SET name = ${next.name}, description = ${next.description},
            packages = ${next.packages}::jsonb, env = ${next.env}::jsonb,
            files = ${next.files}::jsonb, setup_script = ${next.setupScript}, updated_at = now()
          WHERE id = ${next.id}
          RETURNING ${sql.literal(ENVIRONMENT)}`
    })
    /**
     * Reads the row locked, applies `change`, writes the result: concurrent edits apply one after the other. A
     * `change` that answers a string rejects the edit with that message.
     */
    const update = (partition: Partition, id: EnvironmentId, change: (current: EnvironmentRow) => EnvironmentConfig | string) =>
      sql.withTransaction(Effect.gen(function*() {
        const current = yield* lockEnvironment({ id, ...owner(partition) })
        if (Option.isNone(current)) return { _tag: "Missing" } as WriteResult
        const next = change(current.value)
        if (typeof next === "string") return { _tag: "Rejected", message: next } as WriteResult
        const unknown = yield* unknownFiles(partition, next.files)
        if (unknown.length > 0) return { _tag: "UnknownFiles", ids: unknown } as WriteResult
        const environment = yield* updateEnvironment({ id, ...next })
        return { _tag: "Written", environment } as WriteResult
      })).pipe(Effect.orDie, Effect.withSpan("EnvironmentsRepo.update"))

    const sessionCount = SqlSchema.single({
      Request: EnvironmentId,
      Result: Schema.Struct({ count: Schema.NumberFromString }),
      execute: (id) => sql`SELECT count(*)::text AS count FROM sessions WHERE environment_id = ${id}`
    })
    const lockOwned = SqlSchema.findOne({
      Request: OwnedEnvironment,
      Result: Schema.Struct({ id: EnvironmentId }),
      execute: ({ accountId, endUserId, id }) =>
        sql`
          SELECT id FROM environments
          WHERE id = ${id} AND owner_id = ${accountId} AND end_user_id = ${endUserId}
          FOR UPDATE`
    })
    const deleteEnvironment = SqlSchema.void({
      Request: EnvironmentId,
      execute: (id) => sql`DELETE FROM environments WHERE id = ${id}`
    })

    /** Deletes unless a session uses it; a foreign key from a session to the row also counts as "in use". */
    const remove = (partition: Partition, id: EnvironmentId) =>
      sql.withTransaction(Effect.gen(function*() {
        const locked = yield* lockOwned({ id, ...owner(partition) })
        if (Option.isNone(locked)) return { _tag: "Missing" } as const
        // Sessions on this environment: while any exists (whatever its state), the environment stays.
        const { count: sessions } = yield* sessionCount(id)
        if (sessions > 0) return { _tag: "InUse", sessions } as const
        yield* deleteEnvironment(id)
        return { _tag: "Deleted" } as const
      })).pipe(
        Effect.catchIf(isForeignKeyViolation, () => Effect.succeed({ _tag: "InUse", sessions: 1 } as const)),
        Effect.orDie,
        Effect.withSpan("EnvironmentsRepo.remove")
      )

    return { insert, byId, list, update, remove } as const
  })
}) {}
