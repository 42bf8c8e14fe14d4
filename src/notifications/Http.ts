import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect, Layer, Option } from "effect"
import { AtriumApi } from "../Api.js"
import { AuthenticationLive } from "../identity/Authentication.js"
import { NotFound } from "../platform/Errors.js"
import { Notifications } from "./Notifications.js"
import { CurrentUser } from "../identity/Domain.js"
import type { Notification } from "./Repo.js"
import { ownedBy } from "./Policy.js"

const NOTIFICATIONS_SHOWN = 100

const notificationView = (n: Notification) => ({
  id: n.id,
  kind: n.kind,
  title: n.title,
  body: n.body,
  data: n.data,
  read: n.readAt !== null,
  read_at: n.readAt === null ? null : n.readAt.toISOString(),
  created_at: n.createdAt.toISOString()
})

export const NotificationsHttp = HttpApiBuilder.group(AtriumApi, "notifications", (handlers) =>
  Effect.gen(function*() {
    const notifications = yield* Notifications
    return handlers
      .handle("list", () =>
        Effect.gen(function*() {
          const user = yield* CurrentUser
          const rows = yield* notifications.list(ownedBy(user), NOTIFICATIONS_SHOWN + 1)
          return {
            data: rows.slice(0, NOTIFICATIONS_SHOWN).map(notificationView),
            has_more: rows.length > NOTIFICATIONS_SHOWN,
            unread: yield* notifications.unread(ownedBy(user))
          }
        }))
      .handle("read", ({ path }) =>
        Effect.gen(function*() {
          const user = yield* CurrentUser
          const read = yield* notifications.markRead(ownedBy(user), path.id)
          if (Option.isNone(read)) return yield* new NotFound({ message: `No notification ${path.id}.` })
          return notificationView(read.value)
        }))
  })).pipe(Layer.provide(AuthenticationLive))

export const NotificationsHttpLive = NotificationsHttp.pipe(Layer.provide(Notifications.Default))
