import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Option, Schema } from "effect"
import type { Partition } from "../identity/Partition.js"
import { decodeFirst, decodeRows } from "../platform/Rows.js"

const FileRowSchema = Schema.Struct({
  id: Schema.String,
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

const firstFile = decodeFirst(FileRowSchema)

const FILE = "id, owner_id, end_user_id, filename, content_type, size::text, sha256, storage_key, created_at"

/** Files' records (their bytes are in object storage). SQL errors are defects here. */
export class FilesRepo extends Effect.Service<FilesRepo>()("atrium/files/FilesRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    /** Records a file once per stored object: registering the same upload twice yields the first record. */
    const insert = (file: Omit<FileRow, "createdAt">) =>
      Effect.gen(function*() {
        const inserted = yield* sql`
          INSERT INTO files (id, owner_id, end_user_id, filename, content_type, size, sha256, storage_key)
          VALUES (${file.id}, ${file.ownerId}, ${file.endUserId}, ${file.filename}, ${file.contentType},
                  ${String(file.size)}, ${file.sha256}, ${file.storageKey})
          ON CONFLICT (storage_key) DO NOTHING RETURNING ${sql.literal(FILE)}`
        const created = yield* firstFile(inserted)
        const row = Option.isSome(created)
          ? created
          : yield* Effect.flatMap(sql`SELECT ${sql.literal(FILE)} FROM files WHERE storage_key = ${file.storageKey}`, firstFile)
        return Option.getOrThrow(row)
      }).pipe(Effect.orDie, Effect.withSpan("FilesRepo.insert"))

    const byId = (partition: Partition, id: string) =>
      sql`
        SELECT ${sql.literal(FILE)} FROM files
        WHERE id = ${id} AND owner_id = ${partition.accountId} AND end_user_id = ${partition.endUserId}`.pipe(
        Effect.flatMap(firstFile),
        Effect.orDie
      )

    /**
     * Deletes a file unless an environment lists it. The file row is locked first and the environments read after,
     * in a statement of its own: an environment that took the file concurrently (it locks the row `FOR SHARE`) has
     * committed by then and is seen.
     */
    const remove = (partition: Partition, id: string) =>
      sql.withTransaction(Effect.gen(function*() {
        const locked = yield* sql`
          SELECT storage_key FROM files
          WHERE id = ${id} AND owner_id = ${partition.accountId} AND end_user_id = ${partition.endUserId}
          FOR UPDATE`.pipe(Effect.flatMap(decodeFirst(Schema.Struct({ storageKey: Schema.String }))))
        if (Option.isNone(locked)) return { _tag: "Missing" } as const
        const users = yield* sql`
          SELECT id FROM environments WHERE files @> ${JSON.stringify([id])}::jsonb ORDER BY created_at, id LIMIT 5`.pipe(
          Effect.flatMap(decodeRows(Schema.Struct({ id: Schema.String })))
        )
        if (users.length > 0) return { _tag: "InUse", environments: users.map((row) => row.id) } as const
        yield* sql`DELETE FROM files WHERE id = ${id}`
        return { _tag: "Deleted", storageKey: locked.value.storageKey } as const
      })).pipe(Effect.orDie, Effect.withSpan("FilesRepo.remove"))

    return { insert, byId, remove } as const
  })
}) {}
