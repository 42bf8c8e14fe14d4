import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import { Effect, Schema } from "effect"
import { Json } from "../platform/Rows.js"

const CreatorRowSchema = Schema.Struct({
  userId: Schema.String,
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

const CardFactsRow = Schema.Struct({
  identifier: Schema.String,
  creatorName: Schema.NullOr(Schema.String),
  conversations: Schema.Number,
  people: Schema.Number
})

const CREATOR = "user_id, display_name, bio, account_type, email, status, reason, applied_at, decided_at"

/** `%keyword%` for ILIKE, with the pattern characters of the keyword taken literally; null for no keyword. */
export const likePattern = (keyword: string | undefined) =>
  keyword === undefined || keyword.trim() === "" ? null : `%${keyword.trim().replace(/[%_\\]/g, "\\$&")}%`

/** Creator applications and the skills catalogue. SQL errors are defects here. */
export class MarketRepo extends Effect.Service<MarketRepo>()("atrium/market/MarketRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const creatorOf = SqlSchema.findOne({
      Request: Schema.String,
      Result: CreatorRowSchema,
      execute: (userId) => sql`SELECT ${sql.literal(CREATOR)} FROM creators WHERE user_id = ${userId}`
    })
    const creator = (userId: string) => Effect.orDie(creatorOf(userId))

    const fileApplication = SqlSchema.findOne({
      Request: Schema.Struct({
        userId: Schema.String,
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
      userId: string
      displayName: string
      bio: string
      accountType: string
      email: string
    }) => Effect.orDie(fileApplication(application))

    const decideApplication = SqlSchema.findOne({
      Request: Schema.Struct({
        userId: Schema.String,
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
    const decide = (userId: string, decision: "approved" | "rejected", reason: string | null) =>
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
     * Public usage leaves out the creator's own conversations (their test chats in the studio and the app): "1
     * conversation by 1 person" before any buyer was the creator (issue 48).
     */
    const others = sql`NOT (s.account_id = a.owner_id AND s.end_user_id = '')`
    const cardFactsOf = SqlSchema.findAll({
      Request: Schema.Array(Schema.String),
      Result: CardFactsRow,
      execute: (identifiers) =>
        sql`
          SELECT a.identifier, c.display_name AS creator_name,
            (SELECT count(*)::int FROM sessions s WHERE s.agent_id = a.id AND ${others}) AS conversations,
            (SELECT count(DISTINCT (s.account_id, s.end_user_id))::int FROM sessions s WHERE s.agent_id = a.id AND ${others}) AS people
          FROM agents a LEFT JOIN creators c ON c.user_id = a.owner_id AND c.status = 'approved'
          WHERE ${sql.in("a.identifier", identifiers)}`
    })
    /**
     * What a marketplace card shows beside the published profile, per identifier: the owner's display name when they
     * are an approved creator, and how much the expert is used (conversations, and the people who had them).
     */
    const cardFacts = (identifiers: ReadonlyArray<string>) =>
      identifiers.length === 0
        ? Effect.succeed(new Map<string, typeof CardFactsRow.Type>())
        : cardFactsOf(identifiers).pipe(
          Effect.map((rows) => new Map(rows.map((row) => [row.identifier, row]))),
          Effect.orDie
        )

    return { creator, apply, decide, pendingCreators, skills, cardFacts } as const
  })
}) {}
