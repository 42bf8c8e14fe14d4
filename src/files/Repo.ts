import { SqlClient } from "@effect/sql"
import { Effect, Option } from "effect"
import type { CallerIdentity } from "../identity/Authentication.js"

/**
 * Whose a file or an environment is: the account, and inside it the end user the caller acts for
 * (`X-End-User-Id`, '' when none is named). Everything is looked up within one partition; another one's rows are
 * simply not found (spec 2.7).
 */
export interface Partition {
  readonly ownerId: string
  readonly endUserId: string
}

export const partitionOf = (caller: CallerIdentity): Partition => ({
  ownerId: caller.userId,
  endUserId: Option.getOrElse(caller.endUserId, () => "")
})

export interface FileRow {
  readonly id: string
  readonly ownerId: string
  readonly endUserId: string
  readonly filename: string
  readonly contentType: string
  readonly size: number
  readonly sha256: string
  readonly storageKey: string
  readonly createdAt: Date
}

const toFile = (row: any): FileRow => ({
  id: row.id,
  ownerId: row.ownerId,
  endUserId: row.endUserId,
  filename: row.filename,
  contentType: row.contentType,
  size: Number(row.size),
  sha256: row.sha256,
  storageKey: row.storageKey,
  createdAt: row.createdAt
})

const FILE = "id, owner_id, end_user_id, filename, content_type, size, sha256, storage_key, created_at"

/** Files' records (their bytes are in object storage). SQL errors are defects here. */
export class FilesRepo extends Effect.Service<FilesRepo>()("atrium/files/FilesRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const first = (rows: ReadonlyArray<any>) => Option.map(Option.fromNullable(rows[0]), toFile)

    /** Records a file once per stored object: registering the same upload twice yields the first record. */
    const insert = (file: Omit<FileRow, "createdAt">) =>
      Effect.gen(function*() {
        const inserted = yield* sql`
          INSERT INTO files (id, owner_id, end_user_id, filename, content_type, size, sha256, storage_key)
          VALUES (${file.id}, ${file.ownerId}, ${file.endUserId}, ${file.filename}, ${file.contentType},
                  ${String(file.size)}, ${file.sha256}, ${file.storageKey})
          ON CONFLICT (storage_key) DO NOTHING RETURNING ${sql.literal(FILE)}`
        if (inserted.length > 0) return toFile(inserted[0])
        const existing = yield* sql`SELECT ${sql.literal(FILE)} FROM files WHERE storage_key = ${file.storageKey}`
        return toFile(existing[0])
      }).pipe(Effect.orDie, Effect.withSpan("FilesRepo.insert"))

    const byId = (partition: Partition, id: string) =>
      sql`
        SELECT ${sql.literal(FILE)} FROM files
        WHERE id = ${id} AND owner_id = ${partition.ownerId} AND end_user_id = ${partition.endUserId}`.pipe(
        Effect.map(first),
        Effect.orDie
      )

    /**
     * Deletes a file unless an environment lists it. The file row is locked first and the environments read after,
     * in a statement of its own: an environment that took the file concurrently (it locks the row `FOR SHARE`) has
     * committed by then and is seen.
     */
    const remove = (partition: Partition, id: string) =>
      sql.withTransaction(Effect.gen(function*() {
        const locked = yield* sql<{ storageKey: string }>`
          SELECT storage_key FROM files
          WHERE id = ${id} AND owner_id = ${partition.ownerId} AND end_user_id = ${partition.endUserId}
          FOR UPDATE`
        if (locked.length === 0) return { _tag: "Missing" } as const
        const users = yield* sql<{ id: string }>`
          SELECT id FROM environments WHERE files @> ${JSON.stringify([id])}::jsonb ORDER BY created_at, id LIMIT 5`
        if (users.length > 0) return { _tag: "InUse", environments: users.map((row) => row.id) } as const
        yield* sql`DELETE FROM files WHERE id = ${id}`
        return { _tag: "Deleted", storageKey: locked[0]!.storageKey } as const
      })).pipe(Effect.orDie, Effect.withSpan("FilesRepo.remove"))

    return { insert, byId, remove } as const
  })
}) {}
