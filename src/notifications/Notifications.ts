import { Effect } from "effect"
import type { UserId } from "../platform/Ids.js"
import { NotificationId } from "./Api.js"
import { NotificationsRepo } from "./Repo.js"


/**
 * In-app notifications (spec 4.10 rule 1: review outcomes arrive this way). A layer of its own, below agents and
 * market, because both tell their users things.
 */
export class Notifications extends Effect.Service<Notifications>()("atrium/notifications/Notifications", {
  effect: Effect.gen(function*() {
    const repo = yield* NotificationsRepo
    return {
      notify: Effect.fn("Notifications.notify")(
        function*(userId: UserId, kind: string, title: string, body: string, data: Record<string, unknown> = {}) {
          yield* repo.insert({ id: NotificationId.random(), userId, kind, title, body, data })
        }
      ),
      list: (userId: UserId, limit = 100) => repo.list(userId, limit),
      unread: (userId: UserId) => repo.unread(userId),
      /** Marks one as read (keeping the first time it was read); none when it is not the user's. */
      markRead: (userId: UserId, id: NotificationId) => repo.markRead(userId, id)
    } as const
  }),
  dependencies: [NotificationsRepo.Default]
}) {}
