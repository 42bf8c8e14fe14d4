import { HttpApiBuilder } from "@effect/platform"
import { Effect, Layer, Option } from "effect"
import { AtriumApi } from "../Api.js"
import { AuthenticationLive, Caller, CurrentUser } from "../identity/Authentication.js"
import { NotFound } from "../platform/Errors.js"
import { Creators } from "./Creators.js"
import { Market } from "./Market.js"
import { type Notification, Notifications } from "./Notifications.js"

const PAGE_SIZE = 20
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

export const MarketHttp = HttpApiBuilder.group(AtriumApi, "market", (handlers) =>
  Effect.gen(function*() {
    const market = yield* Market
    return handlers
      .handle("agents", ({ urlParams }) =>
        market.browse({
          keyword: urlParams.keyword,
          category: urlParams.category,
          page: urlParams.page ?? 1,
          pageSize: urlParams.pageSize ?? PAGE_SIZE
        }))
      .handle("agent", ({ path }) => market.page(path.identifier))
      .handle("categories", () => market.categories)
      .handle("skills", ({ urlParams }) => market.skills(urlParams.keyword))
  }))

export const CreatorsHttp = HttpApiBuilder.group(AtriumApi, "creators", (handlers) =>
  Effect.gen(function*() {
    const creators = yield* Creators
    return handlers
      .handle("profile", () => Effect.flatMap(CurrentUser, (user) => creators.profile(user.userId)))
      .handle("apply", ({ payload }) =>
        Effect.flatMap(CurrentUser, (user) => creators.apply({ userId: user.userId, ...payload })))
      .handle("earnings", () => Effect.flatMap(CurrentUser, (user) => creators.earnings(user.userId)))
  })).pipe(Layer.provide(AuthenticationLive))

export const NotificationsHttp = HttpApiBuilder.group(AtriumApi, "notifications", (handlers) =>
  Effect.gen(function*() {
    const notifications = yield* Notifications
    return handlers
      .handle("list", () =>
        Effect.gen(function*() {
          const user = yield* CurrentUser
          const rows = yield* notifications.list(user.userId, NOTIFICATIONS_SHOWN + 1)
          return {
            data: rows.slice(0, NOTIFICATIONS_SHOWN).map(notificationView),
            has_more: rows.length > NOTIFICATIONS_SHOWN,
            unread: yield* notifications.unread(user.userId)
          }
        }))
      .handle("read", ({ path }) =>
        Effect.gen(function*() {
          const user = yield* CurrentUser
          const read = yield* notifications.markRead(user.userId, path.id)
          if (Option.isNone(read)) return yield* new NotFound({ message: `No notification ${path.id}.` })
          return notificationView(read.value)
        }))
  })).pipe(Layer.provide(AuthenticationLive))

export const CreatorReviewsHttp = HttpApiBuilder.group(AtriumApi, "creatorReviews", (handlers) =>
  Effect.gen(function*() {
    const creators = yield* Creators
    return handlers
      .handle("approve", ({ path }) => creators.decide(path.id, "approved", null))
      .handle("reject", ({ path, payload }) => creators.decide(path.id, "rejected", payload.reason))
  }))

export const AgentSkillsHttp = HttpApiBuilder.group(AtriumApi, "agentSkills", (handlers) =>
  Effect.gen(function*() {
    const market = yield* Market
    return handlers.handle("list", ({ path }) =>
      Effect.flatMap(Caller, (caller) => market.agentSkills(path.identifier, caller.userId)))
  })).pipe(Layer.provide(AuthenticationLive))

export const MarketHttpLive = Layer.mergeAll(
  MarketHttp,
  CreatorsHttp,
  NotificationsHttp,
  CreatorReviewsHttp,
  AgentSkillsHttp
).pipe(Layer.provide([Market.Default, Creators.Default, Notifications.Default]))
