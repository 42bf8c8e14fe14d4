import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import { Effect, Schema } from "effect"
import { UserId } from "../platform/Ids.js"
import { NotificationId } from "./Api.js"

/** A notification row; `data` is jsonb (an object from node-postgres, a string from some drivers). */
const NotificationRow = Schema.Struct({
  id: NotificationId,
  kind: Schema.String,
  title: Schema.String,
  body: Schema.String,
  data: Schema.Union(Schema.parseJson(Schema.Record({ key: Schema.String, value: Schema.Unknown })), Schema.Record({ key: Schema.String, value: Schema.Unknown })),
  readAt: Schema.NullOr(Schema.DateFromSelf),
  createdAt: Schema.DateFromSelf
})

export type Notification = typeof NotificationRow.Type

const COLUMNS = "id, kind, title, body, data, read_at, created_at"

/** In-app notifications' SQL. SQL errors are defects here. */
export class NotificationsRepo extends Effect.Service<NotificationsRepo>()("atrium/notifications/NotificationsRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const insert = SqlSchema.void({
      Request: Schema.Struct({
        id: NotificationId,
        userId: UserId,
        kind: Schema.String,
        title: Schema.String,
        body: Schema.String,
        data: Schema.Record({ key: Schema.String, value: Schema.Unknown })
      }),
      execute: (n) =>
        sql`
          INSERT INTO notifications (id, user_id, kind, title, body, data)
          VALUES (${n.id}, ${n.userId}, ${n.kind}, ${n.title}, ${n.body}, ${JSON.stringify(n.data)}::jsonb)`
    })

    const list = SqlSchema.findAll({
      Request: Schema.Struct({ userId: UserId, limit: Schema.Int }),
      Result: NotificationRow,
      execute: ({ limit, userId }) =>
        sql`
          SELECT ${sql.literal(COLUMNS)} FROM notifications
          WHERE user_id = ${userId} ORDER BY created_at DESC, id LIMIT ${limit}`
    })

    const unread = SqlSchema.single({
      Request: UserId,
      Result: Schema.Struct({ count: Schema.NumberFromString }),
      execute: (userId) => sql`SELECT COUNT(*)::text AS count FROM notifications WHERE user_id = ${userId} AND read_at IS NULL`
    })

    const markRead = SqlSchema.findOne({
      Request: Schema.Struct({ userId: UserId, id: NotificationId }),
      Result: NotificationRow,
      execute: ({ id, userId }) =>
        sql`
          UPDATE notifications SET read_at = COALESCE(read_at, now())
          WHERE id = ${id} AND user_id = ${userId}
          RETURNING ${sql.literal(COLUMNS)}`
    })

    return {
      insert: (n: Parameters<typeof insert>[0]) => Effect.orDie(insert(n)),
      list: (userId: UserId, limit: number) => Effect.orDie(list({ userId, limit })),
      unread: (userId: UserId) => Effect.orDie(Effect.map(unread(userId), (row) => row.count)),
      markRead: (userId: UserId, id: NotificationId) => Effect.orDie(markRead({ userId, id }))
    } as const
  })
}) {}
