import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import { Effect, Option, Schema } from "effect"
import { EnvironmentId, UserId } from "../platform/Ids.js"
import type { Partition } from "../identity/Partition.js"
import { FileId } from "./Domain.js"

const FileRowSchema = Schema.Struct({
  id: FileId,
  ownerId: Schema.String,
  endUserId: Schema.String,
  filename: Schema.String,
  contentType: Schema.String,
  /** Bytes; a bigint column, selected as text. */
  size: Schema.NumberFromString,
  sha256: Schema.String,
  storageKey: Schema.String,
  createdAt: Schema.DateFromSelf
})
export type FileRow = typeof FileRowSchema.Type

const FILE = "id, owner_id, end_user_id, filename, content_type, size::text AS size, sha256, storage_key, created_at"

const OwnedFile = Schema.Struct({ id: FileId, accountId: UserId, endUserId: Schema.String })

/** Files' records (their bytes are in object storage). SQL errors are defects here. */
export class FilesRepo extends Effect.Service<FilesRepo>()("atrium/files/FilesRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const insertFile = SqlSchema.findOne({
      Request: FileRowSchema.pipe(Schema.omit("createdAt")),
      Result: FileRowSchema,
      execute: (file) =>
        sql`
          INSERT INTO files (id, owner_id, end_user_id, filename, content_type, size, sha256, storage_key)
          VALUES (${file.id}, ${file.ownerId}, ${file.endUserId}, ${file.filename}, ${file.contentType},
                  ${file.size}, ${file.sha256}, ${file.storageKey})
          ON CONFLICT (storage_key) DO NOTHING RETURNING ${sql.literal(FILE)}`
    })
    const byStorageKey = SqlSchema.single({
      Request: Schema.String,
      Result: FileRowSchema,
      execute: (storageKey) => sql`SELECT ${sql.literal(FILE)} FROM files WHERE storage_key = ${storageKey}`
    })
    /** Records a file once per stored object: registering the same upload twice yields the first record. */
    const insert = (file: Omit<FileRow, "createdAt">) =>
      Effect.gen(function*() {
        const created = yield* insertFile(file)
        return Option.isSome(created) ? created.value : yield* byStorageKey(file.storageKey)
      }).pipe(Effect.orDie, Effect.withSpan("FilesRepo.insert"))

    const fileById = SqlSchema.findOne({
      Request: OwnedFile,
      Result: FileRowSchema,
      execute: ({ accountId, endUserId, id }) =>
        sql`
          SELECT ${sql.literal(FILE)} FROM files
          WHERE id = ${id} AND owner_id = ${accountId} AND end_user_id = ${endUserId}`
    })
    const byId = (partition: Partition, id: FileId) =>
      Effect.orDie(fileById({ id, accountId: partition.accountId, endUserId: partition.endUserId }))

    const lockFile = SqlSchema.findOne({
      Request: OwnedFile,
      Result: Schema.Struct({ storageKey: Schema.String }),
      execute: ({ accountId, endUserId, id }) =>
        sql`
          SELECT storage_key FROM files
          WHERE id = ${id} AND owner_id = ${accountId} AND end_user_id = ${endUserId}
          FOR UPDATE`
    })
    const environmentsUsing = SqlSchema.findAll({
      Request: Schema.parseJson(Schema.Array(FileId)),
      Result: Schema.Struct({ id: EnvironmentId }),
      execute: (ids) =>
        sql`SELECT id FROM environments WHERE files @> ${ids}::jsonb ORDER BY created_at, id LIMIT 5`
    })
    const deleteFile = SqlSchema.void({
      Request: FileId,
      execute: (id) => sql`DELETE FROM files WHERE id = ${id}`
    })

    /**
     * Deletes a file unless an environment lists it. The file row is locked first and the environments read after,
     * in a statement of its own: an environment that took the file concurrently (it locks the row `FOR SHARE`) has
     * committed by then and is seen.
     */
    const remove = (partition: Partition, id: FileId) =>
      sql.withTransaction(Effect.gen(function*() {
        const locked = yield* lockFile({ id, accountId: partition.accountId, endUserId: partition.endUserId })
        if (Option.isNone(locked)) return { _tag: "Missing" } as const
        const users = yield* environmentsUsing([id])
        if (users.length > 0) return { _tag: "InUse", environments: users.map((row) => row.id) } as const
        yield* deleteFile(id)
        return { _tag: "Deleted", storageKey: locked.value.storageKey } as const
      })).pipe(Effect.orDie, Effect.withSpan("FilesRepo.remove"))

    const PageRequest = Schema.Struct({
      accountId: UserId,
      endUserId: Schema.String,
      after: Schema.NullOr(FileId),
      limit: Schema.Int
    })
    /**
     * One page of a partition's files, newest first (OpenAI's default order). `after` is read inside the same
     * partition: another partition's id pages nothing, it is a 404 above.
     */
    const filesPage = SqlSchema.findAll({
      Request: PageRequest,
      Result: FileRowSchema,
      execute: ({ accountId, after, endUserId, limit }) =>
        after === null
          ? sql`
            SELECT ${sql.literal(FILE)} FROM files
            WHERE owner_id = ${accountId} AND end_user_id = ${endUserId}
            ORDER BY created_at DESC, id DESC LIMIT ${limit}`
          : sql`
            SELECT ${sql.literal(FILE)} FROM files
            WHERE owner_id = ${accountId} AND end_user_id = ${endUserId}
              AND (created_at, id) < (SELECT created_at, id FROM files
                                      WHERE id = ${after} AND owner_id = ${accountId} AND end_user_id = ${endUserId})
            ORDER BY created_at DESC, id DESC LIMIT ${limit}`
    })
    /** Up to `limit` + 1 rows: the extra one says there are more. */
    const list = (partition: Partition, page: { readonly after: FileId | null; readonly limit: number }) =>
      filesPage({ accountId: partition.accountId, endUserId: partition.endUserId, after: page.after, limit: page.limit + 1 }).pipe(
        Effect.orDie,
        Effect.withSpan("FilesRepo.list")
      )

    return { insert, byId, list, remove } as const
  })
}) {}
