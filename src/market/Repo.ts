import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import { Effect, Option, Schema } from "effect"
import { AgentConfig } from "../agents/Agent.js"
import { Json } from "../platform/Rows.js"
import { AgentId, UserId } from "../platform/Ids.js"

const CreatorRowSchema = Schema.Struct({
  userId: UserId,
  displayName: Schema.String,
  bio: Schema.String,
  accountType: Schema.String,
  email: Schema.String,
  status: Schema.Literal("pending", "approved", "rejected"),
  reason: Schema.NullOr(Schema.String),
  appliedAt: Schema.DateFromSelf,
  decidedAt: Schema.NullOr(Schema.DateFromSelf)
})
export type CreatorRow = typeof CreatorRowSchema.Type
export type CreatorStatus = CreatorRow["status"]

const SkillRow = Schema.Struct({
  name: Schema.String,
  title: Schema.String,
  description: Schema.String,
  tools: Json(Schema.Array(Schema.String))
})
export type Skill = typeof SkillRow.Type

/** How the marketplace list may be ordered (docs/marketplace.md "Sorting"). */
export const SORTS = ["new", "popular", "rating", "price"] as const
export type Sort = (typeof SORTS)[number]

/**
 * ORDER BY per sort, each ending in the newest and then the identifier so pages never overlap. Popular: different
 * accounts that ran it in the last 30 days, then all-time people; rating: the average, unrated last, more reviews
 * first among equals; price: cheapest first (FREE is 0).
 */
const ORDER: Record<Sort, string> = {
  new: "l.published_at DESC, l.identifier",
  popular: "recent_people DESC, people DESC, l.published_at DESC, l.identifier",
  rating: "rating_average DESC NULLS LAST, rating_count DESC, l.published_at DESC, l.identifier",
  price: "l.price ASC, l.published_at DESC, l.identifier"
}

const ListingRow = Schema.Struct({
  id: Schema.String,
  identifier: Schema.String,
  ownerId: UserId,
  config: Json(AgentConfig),
  publishedAt: Schema.NullOr(Schema.DateFromSelf),
  creatorName: Schema.NullOr(Schema.String),
  conversations: Schema.Number,
  people: Schema.Number,
  recentPeople: Schema.Number,
  ratingAverage: Schema.NullOr(Schema.Number),
  ratingCount: Schema.Number,
  featured: Schema.Boolean,
  iconAt: Schema.NullOr(Schema.DateFromSelf)
})
export type ListingRow = typeof ListingRow.Type

const ListingFilter = Schema.Struct({
  keyword: Schema.NullOr(Schema.String),
  category: Schema.NullOr(Schema.String),
  owner: Schema.NullOr(Schema.String),
  identifier: Schema.NullOr(Schema.String),
  featured: Schema.Boolean,
  sort: Schema.Literal(...SORTS),
  offset: Schema.Number,
  limit: Schema.Number
})

const ReviewRow = Schema.Struct({
  id: Schema.String,
  agentId: AgentId,
  userId: UserId,
  rating: Schema.Number,
  text: Schema.String,
  createdAt: Schema.DateFromSelf,
  updatedAt: Schema.DateFromSelf
})
export type ReviewRow = typeof ReviewRow.Type

const IconRow = Schema.Struct({ contentType: Schema.String, data: Schema.String, updatedAt: Schema.DateFromSelf })

const CREATOR = "user_id, display_name, bio, account_type, email, status, reason, applied_at, decided_at"

/** `%keyword%` for ILIKE, with the pattern characters of the keyword taken literally; null for no keyword. */
export const likePattern = (keyword: string | undefined) =>
  keyword === undefined || keyword.trim() === "" ? null : `%${keyword.trim().replace(/[%_\\]/g, "\\$&")}%`

/** Creator applications and the skills catalogue. SQL errors are defects here. */
export class MarketRepo extends Effect.Service<MarketRepo>()("atrium/market/MarketRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const creatorOf = SqlSchema.findOne({
      Request: UserId,
      Result: CreatorRowSchema,
      execute: (userId) => sql`SELECT ${sql.literal(CREATOR)} FROM creators WHERE user_id = ${userId}`
    })
    const creator = (userId: UserId) => Effect.orDie(creatorOf(userId))

    const fileApplication = SqlSchema.findOne({
      Request: Schema.Struct({
        userId: UserId,
        displayName: Schema.String,
        bio: Schema.String,
        accountType: Schema.String,
        email: Schema.String
      }),
      Result: CreatorRowSchema,
      execute: (application) =>
        sql`
          INSERT INTO creators (user_id, display_name, bio, account_type, email, status)
          VALUES (${application.userId}, ${application.displayName}, ${application.bio}, ${application.accountType},
                  ${application.email}, 'pending')
          ON CONFLICT (user_id) DO UPDATE SET
            display_name = EXCLUDED.display_name, bio = EXCLUDED.bio, account_type = EXCLUDED.account_type,
            email = EXCLUDED.email, status = 'pending', reason = NULL, applied_at = now(), decided_at = NULL
          WHERE creators.status = 'rejected'
          RETURNING ${sql.literal(CREATOR)}`
    })
    /**
     * Files an application, or sends a rejected one again (back to pending, the old reason cleared). None when the
     * user's application is pending or approved: those are not overwritten.
     */
    const apply = (application: {
      userId: UserId
      displayName: string
      bio: string
      accountType: string
      email: string
    }) => Effect.orDie(fileApplication(application))

    const decideApplication = SqlSchema.findOne({
      Request: Schema.Struct({
        userId: UserId,
        decision: Schema.Literal("approved", "rejected"),
        reason: Schema.NullOr(Schema.String)
      }),
      Result: CreatorRowSchema,
      execute: ({ decision, reason, userId }) =>
        sql`
          UPDATE creators SET status = ${decision}, reason = ${reason}, decided_at = now()
          WHERE user_id = ${userId} AND status = 'pending'
          RETURNING ${sql.literal(CREATOR)}`
    })
    /** Decides a pending application; none when it is not pending. */
    const decide = (userId: UserId, decision: "approved" | "rejected", reason: string | null) =>
      Effect.orDie(decideApplication({ userId, decision, reason }))

    /** Applications waiting for review, oldest first. */
    const pendingCreators = SqlSchema.findAll({
      Request: Schema.Void,
      Result: CreatorRowSchema,
      execute: () => sql`
        SELECT ${sql.literal(CREATOR)} FROM creators WHERE status = 'pending' ORDER BY applied_at, user_id`
    })(undefined).pipe(Effect.orDie)

    const skillsLike = SqlSchema.findAll({
      Request: Schema.NullOr(Schema.String),
      Result: SkillRow,
      execute: (pattern) =>
        sql`
          SELECT name, title, description, tools FROM skills
          WHERE ${pattern}::text IS NULL OR name ILIKE ${pattern} OR title ILIKE ${pattern} OR description ILIKE ${pattern}
          ORDER BY name`
    })
    const skills = (keyword: string | undefined) => Effect.orDie(skillsLike(likePattern(keyword)))

    /**
     * Public usage leaves out everything the creator's own account did: their test chats in the studio and the app
     * ("1 conversation by 1 person" before any buyer was the creator, issue 48), and their API key's end users, whose
     * ids the caller chooses and so could be made up by the dozen.
     */
    const published = (filter: typeof ListingFilter.Type) =>
      sql`
        SELECT a.id, a.identifier, a.owner_id, a.published_at, v.config,
               (v.config->'billing'->>'price')::numeric AS price
        FROM agents a JOIN agent_versions v ON v.agent_id = a.id AND v.version = a.published_version
        WHERE a.published_version IS NOT NULL
          AND (${filter.keyword}::text IS NULL OR v.config->>'name' ILIKE ${filter.keyword} OR v.config->>'description' ILIKE ${filter.keyword})
          AND (${filter.category}::text IS NULL OR v.config->>'category' = ${filter.category})
          AND (${filter.owner}::text IS NULL OR a.owner_id = ${filter.owner})
          AND (${filter.identifier}::text IS NULL OR a.identifier = ${filter.identifier})
          AND (NOT ${filter.featured}::boolean OR EXISTS (SELECT 1 FROM agent_featured f WHERE f.agent_id = a.id))`
    const listingPage = SqlSchema.findAll({
      Request: ListingFilter,
      Result: ListingRow,
      execute: (filter) =>
        sql`
          SELECT l.id, l.identifier, l.owner_id, l.config, l.published_at, c.display_name AS creator_name,
            (SELECT count(*)::int FROM sessions s WHERE s.agent_id = l.id AND s.account_id <> l.owner_id) AS conversations,
            (SELECT count(DISTINCT (s.account_id, s.end_user_id))::int FROM sessions s
              WHERE s.agent_id = l.id AND s.account_id <> l.owner_id) AS people,
            (SELECT count(DISTINCT r.payer_id)::int FROM runs r
              WHERE r.agent_id = l.id AND r.payer_id <> l.owner_id AND r.created_at > now() - interval '30 days') AS recent_people,
            rv.average AS rating_average, rv.count AS rating_count,
            f.agent_id IS NOT NULL AS featured, ic.updated_at AS icon_at
          FROM (${published(filter)}) l
          LEFT JOIN creators c ON c.user_id = l.owner_id AND c.status = 'approved'
          LEFT JOIN LATERAL (
            SELECT round(avg(r.rating), 2)::float8 AS average, count(*)::int AS count FROM agent_reviews r
            WHERE r.agent_id = l.id AND r.user_id <> l.owner_id
          ) rv ON true
          LEFT JOIN agent_featured f ON f.agent_id = l.id
          LEFT JOIN agent_icons ic ON ic.agent_id = l.id
          ORDER BY ${sql.literal(ORDER[filter.sort])}
          LIMIT ${filter.limit} OFFSET ${filter.offset}`
    })
    const listingTotal = SqlSchema.single({
      Request: ListingFilter,
      Result: Schema.Struct({ total: Schema.Number }),
      execute: (filter) => sql`SELECT count(*)::int AS total FROM (${published(filter)}) l`
    })
    /**
     * Published experts as the marketplace shows them (the published version's profile, usage without the creator's
     * own, the rating, featured, the icon's date), in the sort's order, with the total for paging.
     */
    const listing = (filter: {
      readonly keyword?: string | undefined
      readonly category?: string | undefined
      readonly owner?: string | undefined
      readonly identifier?: string | undefined
      readonly featured?: boolean | undefined
      readonly sort: Sort
      readonly offset: number
      readonly limit: number
    }) => {
      const request = {
        keyword: likePattern(filter.keyword),
        category: filter.category ?? null,
        owner: filter.owner ?? null,
        identifier: filter.identifier ?? null,
        featured: filter.featured ?? false,
        sort: filter.sort,
        offset: filter.offset,
        limit: filter.limit
      }
      return Effect.all({ rows: listingPage(request), total: Effect.map(listingTotal(request), (r) => r.total) }).pipe(Effect.orDie)
    }

    /** Whether `userId` ran the expert themselves at least once (a login's run: no end user of an API key). */
    const ranOf = SqlSchema.findAll({
      Request: Schema.Struct({ agentId: AgentId, userId: UserId }),
      Result: Schema.Struct({ one: Schema.Number }),
      execute: ({ agentId, userId }) =>
        sql`SELECT 1 AS one FROM runs WHERE agent_id = ${agentId} AND payer_id = ${userId} AND end_user_id = '' LIMIT 1`
    })
    const hasRun = (agentId: AgentId, userId: UserId) =>
      Effect.map(Effect.orDie(ranOf({ agentId, userId })), (rows) => rows.length > 0)

    const REVIEW = "id, agent_id, user_id, rating, text, created_at, updated_at"
    const upsertReview = SqlSchema.single({
      Request: Schema.Struct({ id: Schema.String, agentId: AgentId, userId: UserId, rating: Schema.Number, text: Schema.String }),
      Result: ReviewRow,
      execute: (r) =>
        sql`
          INSERT INTO agent_reviews (id, agent_id, user_id, rating, text)
          VALUES (${r.id}, ${r.agentId}, ${r.userId}, ${r.rating}, ${r.text})
          ON CONFLICT (agent_id, user_id) DO UPDATE SET rating = EXCLUDED.rating, text = EXCLUDED.text, updated_at = now()
          RETURNING ${sql.literal(REVIEW)}`
    })
    /** Writes the user's one review of an expert, or replaces its rating and text (the id and date stay). */
    const putReview = (review: { id: string; agentId: AgentId; userId: UserId; rating: number; text: string }) =>
      Effect.orDie(upsertReview(review))

    const reviewOfUser = SqlSchema.findOne({
      Request: Schema.Struct({ agentId: AgentId, userId: UserId }),
      Result: ReviewRow,
      execute: ({ agentId, userId }) =>
        sql`SELECT ${sql.literal(REVIEW)} FROM agent_reviews WHERE agent_id = ${agentId} AND user_id = ${userId}`
    })
    const reviewOf = (agentId: AgentId, userId: UserId) => Effect.orDie(reviewOfUser({ agentId, userId }))

    const deleteReviewOf = SqlSchema.findAll({
      Request: Schema.Struct({ agentId: AgentId, userId: UserId }),
      Result: Schema.Struct({ id: Schema.String }),
      execute: ({ agentId, userId }) =>
        sql`DELETE FROM agent_reviews WHERE agent_id = ${agentId} AND user_id = ${userId} RETURNING id`
    })
    /** Deletes the user's own review (the only one this can reach); whether there was one. */
    const deleteReview = (agentId: AgentId, userId: UserId) =>
      Effect.map(Effect.orDie(deleteReviewOf({ agentId, userId })), (rows) => rows.length > 0)

    const reviewById = SqlSchema.findOne({
      Request: Schema.Struct({ agentId: AgentId, id: Schema.String }),
      Result: ReviewRow,
      execute: ({ agentId, id }) => sql`SELECT ${sql.literal(REVIEW)} FROM agent_reviews WHERE agent_id = ${agentId} AND id = ${id}`
    })
    const reviewsAfter = SqlSchema.findAll({
      Request: Schema.Struct({
        agentId: AgentId,
        ownerId: UserId,
        afterAt: Schema.NullOr(Schema.DateFromSelf),
        afterId: Schema.String,
        limit: Schema.Number
      }),
      Result: ReviewRow,
      execute: (q) =>
        sql`
          SELECT ${sql.literal(REVIEW)} FROM agent_reviews
          WHERE agent_id = ${q.agentId} AND user_id <> ${q.ownerId}
            AND (${q.afterAt}::timestamptz IS NULL OR (created_at, id) < (${q.afterAt}::timestamptz, ${q.afterId}))
          ORDER BY created_at DESC, id DESC LIMIT ${q.limit}`
    })
    /** Reviews of an expert, newest first, one page after the review `after` (none: not a review of this expert). */
    const reviews = (agentId: AgentId, ownerId: UserId, after: string | undefined, limit: number) =>
      Effect.gen(function*() {
        let afterAt: Date | null = null
        if (after !== undefined) {
          const found = yield* reviewById({ agentId, id: after })
          if (Option.isNone(found)) return Option.none<ReadonlyArray<ReviewRow>>()
          afterAt = found.value.createdAt
        }
        return Option.some(yield* reviewsAfter({ agentId, ownerId, afterAt, afterId: after ?? "", limit: limit + 1 }))
      }).pipe(Effect.orDie)

    const iconOf = SqlSchema.findOne({
      Request: AgentId,
      Result: IconRow,
      execute: (agentId) =>
        sql`SELECT content_type, encode(bytes, 'base64') AS data, updated_at FROM agent_icons WHERE agent_id = ${agentId}`
    })
    /** The uploaded icon (its sniffed type, its bytes as base64: both drivers agree on text where they differ on bytea). */
    const icon = (agentId: AgentId) => Effect.orDie(iconOf(agentId))
    const putIcon = (agentId: AgentId, contentType: string, base64: string) =>
      Effect.orDie(sql`
        INSERT INTO agent_icons (agent_id, content_type, bytes) VALUES (${agentId}, ${contentType}, decode(${base64}, 'base64'))
        ON CONFLICT (agent_id) DO UPDATE SET content_type = EXCLUDED.content_type, bytes = EXCLUDED.bytes, updated_at = now()`)
    const removeIcon = (agentId: AgentId) => Effect.orDie(sql`DELETE FROM agent_icons WHERE agent_id = ${agentId}`)

    const feature = (agentId: AgentId) =>
      Effect.orDie(sql`INSERT INTO agent_featured (agent_id) VALUES (${agentId}) ON CONFLICT (agent_id) DO NOTHING`)
    const unfeature = (agentId: AgentId) => Effect.orDie(sql`DELETE FROM agent_featured WHERE agent_id = ${agentId}`)

    return {
      creator,
      apply,
      decide,
      pendingCreators,
      skills,
      listing,
      hasRun,
      putReview,
      reviewOf,
      deleteReview,
      reviews,
      icon,
      putIcon,
      removeIcon,
      feature,
      unfeature
    } as const
  })
}) {}
