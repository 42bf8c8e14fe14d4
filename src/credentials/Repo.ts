import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import { Effect, Schema } from "effect"
import { UserId } from "../platform/Ids.js"
import { CredentialId } from "./Api.js"

export const CredentialRow = Schema.Struct({
  id: CredentialId,
  accountId: UserId,
  endUserId: Schema.String,
  serverUrl: Schema.String,
  secret: Schema.String,
  hint: Schema.String,
  createdAt: Schema.DateFromSelf
})
export type CredentialRow = typeof CredentialRow.Type

const Owner = Schema.Struct({ accountId: UserId, endUserId: Schema.String })
const COLUMNS = "id, account_id, end_user_id, server_url, secret, hint, created_at"

/** Stored credentials (the secret encrypted). SQL errors are defects here. */
export class CredentialsRepo extends Effect.Service<CredentialsRepo>()("atrium/credentials/CredentialsRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    /** One credential per (account, end user, server): a new one replaces the old. */
    const upsert = SqlSchema.single({
      Request: Schema.Struct({ ...Owner.fields, id: CredentialId, serverUrl: Schema.String, secret: Schema.String, hint: Schema.String }),
      Result: CredentialRow,
      execute: (row) =>
        sql`
          INSERT INTO credentials (id, account_id, end_user_id, server_url, secret, hint)
          VALUES (${row.id}, ${row.accountId}, ${row.endUserId}, ${row.serverUrl}, ${row.secret}, ${row.hint})
          ON CONFLICT (account_id, end_user_id, server_url)
          DO UPDATE SET secret = EXCLUDED.secret, hint = EXCLUDED.hint, created_at = now()
          RETURNING ${sql.literal(COLUMNS)}`
    })

    const list = SqlSchema.findAll({
      Request: Owner,
      Result: CredentialRow,
      execute: (owner) =>
        sql`
          SELECT ${sql.literal(COLUMNS)} FROM credentials
          WHERE account_id = ${owner.accountId} AND end_user_id = ${owner.endUserId}
          ORDER BY created_at DESC, id LIMIT 500`
    })

    const forServer = SqlSchema.findOne({
      Request: Schema.Struct({ ...Owner.fields, serverUrl: Schema.String }),
      Result: CredentialRow,
      execute: (key) =>
        sql`
          SELECT ${sql.literal(COLUMNS)} FROM credentials
          WHERE account_id = ${key.accountId} AND end_user_id = ${key.endUserId} AND server_url = ${key.serverUrl}`
    })

    const remove = SqlSchema.findAll({
      Request: Schema.Struct({ ...Owner.fields, id: CredentialId }),
      Result: Schema.Struct({ id: CredentialId }),
      execute: (key) =>
        sql`
          DELETE FROM credentials WHERE id = ${key.id} AND account_id = ${key.accountId} AND end_user_id = ${key.endUserId}
          RETURNING id`
    })

    return {
      upsert: (row: Parameters<typeof upsert>[0]) => Effect.orDie(upsert(row)),
      list: (owner: typeof Owner.Type) => Effect.orDie(list(owner)),
      forServer: (key: Parameters<typeof forServer>[0]) => Effect.orDie(forServer(key)),
      remove: (key: Parameters<typeof remove>[0]) => Effect.map(Effect.orDie(remove(key)), (rows) => rows.length > 0)
    } as const
  })
}) {}
