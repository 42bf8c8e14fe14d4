import { SqlClient } from "@effect/sql"
import { Effect, Option } from "effect"
import { randomBase62 } from "../platform/Ids.js"

export interface Notification {
  readonly id: string
  readonly kind: string
  readonly title: string
  readonly body: string
  readonly data: Record<string, unknown>
  readonly readAt: Date | null
  readonly createdAt: Date
}

/** In-app notifications (spec 4.10 rule 1: review outcomes arrive this way). */
export class Notifications extends Effect.Service<Notifications>()("atrium/market/Notifications", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const toNotification = (row: any): Notification => ({
      id: row.id,
      kind: row.kind,
      title: row.title,
      body: row.body,
      data: typeof row.data === "string" ? JSON.parse(row.data) : row.data,
      readAt: row.readAt,
      createdAt: row.createdAt
    })
    return {
      notify: (userId: string, kind: string, title: string, body: string, data: Record<string, unknown> = {}) =>
        sql`
          INSERT INTO notifications (id, user_id, kind, title, body, data)
          VALUES (${`ntf_${randomBase62(20)}`}, ${userId}, ${kind}, ${title}, ${body}, ${JSON.stringify(data)}::jsonb)`.pipe(
          Effect.asVoid,
          Effect.orDie,
          Effect.withSpan("Notifications.notify")
        ),
      list: (userId: string, limit = 100) =>
        sql`
          SELECT id, kind, title, body, data, read_at, created_at FROM notifications
          WHERE user_id = ${userId} ORDER BY created_at DESC, id LIMIT ${limit}`.pipe(
          Effect.map((rows) => rows.map(toNotification)),
          Effect.orDie
        ),
      unread: (userId: string) =>
        sql<{ count: string }>`
          SELECT COUNT(*)::text AS count FROM notifications WHERE user_id = ${userId} AND read_at IS NULL`.pipe(
          Effect.map((rows) => Number(rows[0]?.count ?? 0)),
          Effect.orDie
        ),
      /** Marks one as read (keeping the first time it was read); none when it is not the user's. */
      markRead: (userId: string, id: string) =>
        sql`
          UPDATE notifications SET read_at = COALESCE(read_at, now())
          WHERE id = ${id} AND user_id = ${userId}
          RETURNING id, kind, title, body, data, read_at, created_at`.pipe(
          Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), toNotification)),
          Effect.orDie
        )
    } as const
  })
}) {}
