import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect, Layer } from "effect"
import { AtriumApi } from "../Api.js"
import { AuthenticationLive } from "../identity/Authentication.js"
import { Creators } from "./Creators.js"
import { Market } from "./Market.js"
import { Review } from "./Review.js"
import { pageOf } from "../platform/http/Lists.js"
import { Caller, CurrentUser } from "../identity/Domain.js"

const PAGE_SIZE = 20

/**
 * An icon's answer: its type as sniffed at upload (or SVG for one we drew), never guessed by the browser (`nosniff`),
 * and no script or outside fetch even when opened on its own (the CSP, for the drawn SVG). Cached for a day: the URL
 * the cards give carries the icon's version, and `ETag` lets a revalidation answer 304.
 */
const iconResponse = (icon: { contentType: string; bytes: Uint8Array; version: string }, revalidate: boolean) =>
  Effect.map(HttpServerRequest.HttpServerRequest, (request) => {
    const etag = `"${icon.version}"`
    const headers = {
      "cache-control": revalidate ? "private, no-cache" : "public, max-age=86400",
      etag,
      "x-content-type-options": "nosniff",
      "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; sandbox"
    }
    return request.headers["if-none-match"] === etag
      ? HttpServerResponse.empty({ status: 304, headers })
      : HttpServerResponse.uint8Array(icon.bytes, { contentType: icon.contentType, headers })
  })

export const MarketHttp = HttpApiBuilder.group(AtriumApi, "market", (handlers) =>
  Effect.gen(function*() {
    const market = yield* Market
    return handlers
      .handle("agents", ({ urlParams }) =>
        market.browse({
          keyword: urlParams.keyword,
          category: urlParams.category,
          featured: urlParams.featured === "true",
          sort: urlParams.sort,
          page: urlParams.page ?? 1,
          pageSize: urlParams.pageSize ?? PAGE_SIZE
        }))
      .handle("front", () => market.front())
      .handle("agent", ({ path }) => market.page(path.identifier))
      .handle("reviews", ({ path, urlParams }) => market.reviews(path.identifier, urlParams))
      .handle("icon", ({ path }) => Effect.flatMap(market.icon(path.identifier), (icon) => iconResponse(icon, false)))
      .handle("creator", ({ path }) => market.creatorPage(path.id))
      .handle("categories", () => market.categories)
      .handle("skills", ({ urlParams }) =>
        Effect.flatMap(market.skills(urlParams.keyword), (all) => pageOf(all.data, urlParams, (skill) => skill.name)))
  }))

export const MarketReviewsHttp = HttpApiBuilder.group(AtriumApi, "marketReviews", (handlers) =>
  Effect.gen(function*() {
    const market = yield* Market
    return handlers
      .handle("mine", ({ path }) => Effect.flatMap(CurrentUser, (user) => market.myReview(path.identifier, user.userId)))
      .handle("put", ({ path, payload }) =>
        Effect.flatMap(CurrentUser, (user) => market.putReview(path.identifier, user.userId, payload)))
      .handle("delete", ({ path }) => Effect.flatMap(CurrentUser, (user) => market.deleteReview(path.identifier, user.userId)))
  })).pipe(Layer.provide(AuthenticationLive))

export const AgentIconsHttp = HttpApiBuilder.group(AtriumApi, "agentIcons", (handlers) =>
  Effect.gen(function*() {
    const market = yield* Market
    return handlers
      .handle("get", ({ path }) =>
        Effect.flatMap(Caller, (caller) =>
          Effect.flatMap(market.icon(path.identifier, caller.userId), (icon) => iconResponse(icon, true))))
      .handle("put", ({ path, payload }) =>
        Effect.flatMap(Caller, (caller) => market.putIcon(path.identifier, caller.userId, payload.image)))
      .handle("delete", ({ path }) => Effect.flatMap(Caller, (caller) => market.removeIcon(path.identifier, caller.userId)))
  })).pipe(Layer.provide(AuthenticationLive))

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
    const market = yield* Market
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
      .handle("feature", ({ path }) => asOperator(market.setFeatured(path.identifier, true)))
      .handle("unfeature", ({ path }) => asOperator(market.setFeatured(path.identifier, false)))
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
  MarketReviewsHttp,
  AgentIconsHttp,
  CreatorsHttp,
  CreatorReviewsHttp,
  AdminHttp,
  ProfileHttp,
  AgentSkillsHttp
).pipe(Layer.provide([Market.Default, Creators.Default, Review.Default]))
