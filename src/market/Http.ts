import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect, Layer } from "effect"
import { AtriumApi } from "../Api.js"
import { AuthenticationLive, Caller, CurrentUser } from "../identity/Authentication.js"
import { Creators } from "./Creators.js"
import { Market } from "./Market.js"
import { Review } from "./Review.js"
import { pageOf } from "../platform/http/Lists.js"

const PAGE_SIZE = 20

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
      .handle("skills", ({ urlParams }) =>
        Effect.flatMap(market.skills(urlParams.keyword), (all) => pageOf(all.data, urlParams, (skill) => skill.name)))
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

export const CreatorReviewsHttp = HttpApiBuilder.group(AtriumApi, "creatorReviews", (handlers) =>
  Effect.gen(function*() {
    const creators = yield* Creators
    return handlers
      .handle("approve", ({ path }) => creators.decide(path.id, "approved", null))
      .handle("reject", ({ path, payload }) => creators.decide(path.id, "rejected", payload.reason))
  }))

/** The review console: every route first checks that the caller is an operator (404 otherwise). */
export const AdminHttp = HttpApiBuilder.group(AtriumApi, "admin", (handlers) =>
  Effect.gen(function*() {
    const review = yield* Review
    const asOperator = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
      Effect.flatMap(CurrentUser, (user) => Effect.zipRight(review.operator(user.phone), effect))
    const decision = (s: { id: string; version: number; status: string }) => ({ id: s.id, version: s.version, status: s.status })
    return handlers
      .handle("queue", () => asOperator(review.queue()))
      .handle("submission", ({ path }) => asOperator(review.submission(path.id)))
      .handle("approveSubmission", ({ path }) =>
        asOperator(Effect.map(review.decideSubmission(path.id, "approved", null), decision)))
      .handle("rejectSubmission", ({ path, payload }) =>
        asOperator(Effect.map(review.decideSubmission(path.id, "rejected", payload.reason), decision)))
      .handle("approveApplication", ({ path }) => asOperator(review.decideApplication(path.id, "approved", null)))
      .handle("rejectApplication", ({ path, payload }) =>
        asOperator(review.decideApplication(path.id, "rejected", payload.reason)))
  })).pipe(Layer.provide(AuthenticationLive))

export const ProfileHttp = HttpApiBuilder.group(AtriumApi, "profile", (handlers) =>
  Effect.gen(function*() {
    const review = yield* Review
    return handlers.handle("me", () =>
      Effect.map(CurrentUser, (user) => ({ id: user.userId, phone: user.phone, may_review: review.mayReview(user.phone) })))
  })).pipe(Layer.provide(AuthenticationLive))

export const AgentSkillsHttp = HttpApiBuilder.group(AtriumApi, "agentSkills", (handlers) =>
  Effect.gen(function*() {
    const market = yield* Market
    return handlers.handle("list", ({ path, urlParams }) =>
      Effect.flatMap(
        Effect.flatMap(Caller, (caller) => market.agentSkills(path.identifier, caller.userId)),
        (all) => pageOf(all.data, urlParams, (skill) => skill.name)
      ))
  })).pipe(Layer.provide(AuthenticationLive))

export const MarketHttpLive = Layer.mergeAll(
  MarketHttp,
  CreatorsHttp,
  CreatorReviewsHttp,
  AdminHttp,
  ProfileHttp,
  AgentSkillsHttp
).pipe(Layer.provide([Market.Default, Creators.Default, Review.Default]))
