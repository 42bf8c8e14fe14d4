import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import { Effect, Option, Schema } from "effect"
import { AgentId, UserId } from "../platform/Ids.js"
import { Json } from "../platform/Rows.js"
import { AgentConfig } from "./Agent.js"
import { SubmissionId } from "./Domain.js"

const SubmissionRow = Schema.Struct({
  id: SubmissionId,
  version: Schema.Number,
  status: Schema.Literal("pending", "approved", "rejected", "superseded"),
  reason: Schema.NullOr(Schema.String),
  submittedAt: Schema.DateFromSelf,
  decidedAt: Schema.NullOr(Schema.DateFromSelf)
})
export type Submission = typeof SubmissionRow.Type

const AgentRowSchema = Schema.Struct({
  id: AgentId,
  identifier: Schema.String,
  ownerId: UserId,
  draft: Json(AgentConfig),
  publishedVersion: Schema.NullOr(Schema.Number),
  publishedAt: Schema.NullOr(Schema.DateFromSelf),
  createdAt: Schema.DateFromSelf,
  updatedAt: Schema.DateFromSelf
})
export type AgentRow = typeof AgentRowSchema.Type

const Config = Schema.Struct({ config: Json(AgentConfig) })
const Owned = Schema.Struct({ agentId: AgentId, identifier: Schema.String, ownerId: UserId })
const Decided = Schema.Struct({ ...SubmissionRow.fields, agentId: AgentId })

const Earnings = Schema.Struct({
  identifier: Schema.String,
  unlocks: Schema.NumberFromString,
  gross: Schema.BigInt,
  net: Schema.BigInt
})

const AGENT = "id, identifier, owner_id, draft, published_version, published_at, created_at, updated_at"

const SUBMISSION = "id, version, status, reason, submitted_at, decided_at"
const AgentVersion = Schema.Struct({ agentId: AgentId, version: Schema.Number })
const PendingReview = Schema.Struct({
  ...SubmissionRow.fields,
  ...Owned.fields,
  publishedVersion: Schema.NullOr(Schema.Number),
  ...Config.fields
})
const Purchase = Schema.Struct({ userId: UserId, agentId: AgentId })
const MarketFilter = Schema.Struct({
  keyword: Schema.NullOr(Schema.String),
  category: Schema.NullOr(Schema.String),
  offset: Schema.Number,
  limit: Schema.Number
})

/** Agents, their versions and review submissions. SQL errors are defects here. */
export class AgentsRepo extends Effect.Service<AgentsRepo>()("atrium/agents/AgentsRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const insertAgent = SqlSchema.findOne({
      Request: Schema.Struct({ id: AgentId, identifier: Schema.String, ownerId: UserId, draft: Schema.parseJson(AgentConfig) }),
      Result: AgentRowSchema,
      execute: (agent) =>
        sql`
          INSERT INTO agents (id, identifier, owner_id, draft)
          VALUES (${agent.id}, ${agent.identifier}, ${agent.ownerId}, ${agent.draft}::jsonb)
          ON CONFLICT (identifier) DO NOTHING RETURNING ${sql.literal(AGENT)}`
    })
    /** Inserts a draft; none when the identifier is taken. */
    const insert = (agent: { id: AgentId; identifier: string; ownerId: UserId; draft: AgentConfig }) =>
      Effect.orDie(insertAgent(agent))

    const agentByIdentifier = SqlSchema.findOne({
      Request: Schema.String,
      Result: AgentRowSchema,
      execute: (identifier) => sql`SELECT ${sql.literal(AGENT)} FROM agents WHERE identifier = ${identifier}`
    })
    const byIdentifier = (identifier: string) => Effect.orDie(agentByIdentifier(identifier))

    const agentsOf = SqlSchema.findAll({
      Request: UserId,
      Result: AgentRowSchema,
      execute: (ownerId) =>
        sql`SELECT ${sql.literal(AGENT)} FROM agents WHERE owner_id = ${ownerId} ORDER BY created_at DESC, id`
    })
    const byOwner = (ownerId: UserId) => Effect.orDie(agentsOf(ownerId))

    const writeDraft = SqlSchema.single({
      Request: Schema.Struct({ id: AgentId, draft: Schema.parseJson(AgentConfig) }),
      Result: AgentRowSchema,
      execute: ({ draft, id }) =>
        sql`
          UPDATE agents SET draft = ${draft}::jsonb, updated_at = now()
          WHERE id = ${id} RETURNING ${sql.literal(AGENT)}`
    })
    const updateDraft = (id: AgentId, draft: AgentConfig) => Effect.orDie(writeDraft({ id, draft }))

    const versionConfig = SqlSchema.findOne({
      Request: AgentVersion,
      Result: Config,
      execute: ({ agentId, version }) =>
        sql`SELECT config FROM agent_versions WHERE agent_id = ${agentId} AND version = ${version}`
    })
    const version = (agentId: AgentId, version: number) =>
      versionConfig({ agentId, version }).pipe(Effect.map(Option.map((row) => row.config)), Effect.orDie)

    const VersionSummary = Schema.Struct({
      version: Schema.Number,
      createdAt: Schema.DateFromSelf,
      status: Schema.NullOr(Schema.String),
      reason: Schema.NullOr(Schema.String)
    })
    const versionRows = SqlSchema.findAll({
      Request: AgentId,
      Result: VersionSummary,
      execute: (agentId) =>
        sql`
          SELECT v.version, v.created_at, s.status, s.reason
          FROM agent_versions v
          LEFT JOIN agent_submissions s ON s.agent_id = v.agent_id AND s.version = v.version
          WHERE v.agent_id = ${agentId} ORDER BY v.version DESC`
    })
    /** Every frozen version of an agent, newest first, with its review's outcome (a version is made by a publish). */
    const versions = (agentId: AgentId) => Effect.orDie(versionRows(agentId))

    const versionDetailRow = SqlSchema.findOne({
      Request: AgentVersion,
      Result: Schema.Struct({ ...VersionSummary.fields, config: Config.fields.config }),
      execute: ({ agentId, version }) =>
        sql`
          SELECT v.version, v.created_at, s.status, s.reason, v.config
          FROM agent_versions v
          LEFT JOIN agent_submissions s ON s.agent_id = v.agent_id AND s.version = v.version
          WHERE v.agent_id = ${agentId} AND v.version = ${version}`
    })
    /** One frozen version with its review's outcome, in one read. */
    const versionDetail = (agentId: AgentId, version: number) =>
      Effect.orDie(versionDetailRow({ agentId, version }))

    const lockAgent = SqlSchema.void({
      Request: AgentId,
      execute: (agentId) => sql`SELECT 1 FROM agents WHERE id = ${agentId} FOR UPDATE`
    })
    const nextVersion = SqlSchema.single({
      Request: AgentId,
      Result: Schema.Struct({ version: Schema.Number }),
      execute: (agentId) =>
        sql`SELECT (COALESCE(MAX(version), 0) + 1)::int AS version FROM agent_versions WHERE agent_id = ${agentId}`
    })
    const freezeDraft = SqlSchema.void({
      Request: AgentVersion,
      execute: ({ agentId, version }) =>
        sql`
          INSERT INTO agent_versions (agent_id, version, config)
          SELECT ${agentId}, ${version}, draft FROM agents WHERE id = ${agentId}`
    })
    const supersede = SqlSchema.void({
      Request: AgentId,
      execute: (agentId) =>
        sql`
          UPDATE agent_submissions SET status = 'superseded', decided_at = now()
          WHERE agent_id = ${agentId} AND status = 'pending'`
    })
    const submit = SqlSchema.single({
      Request: Schema.Struct({ ...AgentVersion.fields, id: Schema.String }),
      Result: SubmissionRow,
      execute: ({ agentId, id, version }) =>
        sql`
          INSERT INTO agent_submissions (id, agent_id, version, status)
          VALUES (${id}, ${agentId}, ${version}, 'pending')
          RETURNING ${sql.literal(SUBMISSION)}`
    })

    /**
     * Freezes the draft as the next version and submits it; a submission still pending for an older version is
     * superseded (review looks at the newest). The published version is untouched.
     */
    const publish = (agentId: AgentId, submissionId: SubmissionId) =>
      sql.withTransaction(Effect.gen(function*() {
        // The draft is copied inside the database, under the row lock, exactly as stored.
        yield* lockAgent(agentId)
        const { version } = yield* nextVersion(agentId)
        yield* freezeDraft({ agentId, version })
        yield* supersede(agentId)
        return yield* submit({ agentId, version, id: submissionId })
      })).pipe(Effect.orDie)

    const pending = SqlSchema.findOne({
      Request: AgentId,
      Result: SubmissionRow,
      execute: (agentId) =>
        sql`
          SELECT ${sql.literal(SUBMISSION)} FROM agent_submissions
          WHERE agent_id = ${agentId} AND status = 'pending'`
    })
    const pendingSubmission = (agentId: AgentId) => Effect.orDie(pending(agentId))

    const latest = SqlSchema.findOne({
      Request: AgentId,
      Result: SubmissionRow,
      execute: (agentId) =>
        sql`
          SELECT ${sql.literal(SUBMISSION)} FROM agent_submissions
          WHERE agent_id = ${agentId} ORDER BY submitted_at DESC, version DESC LIMIT 1`
    })
    const latestSubmission = (agentId: AgentId) => Effect.orDie(latest(agentId))

    const submissionById = SqlSchema.findOne({
      Request: Schema.String,
      Result: Schema.Struct({ ...SubmissionRow.fields, ...Owned.fields }),
      execute: (id) =>
        sql`
          SELECT s.id, s.version, s.status, s.reason, s.submitted_at, s.decided_at, s.agent_id, a.identifier, a.owner_id
          FROM agent_submissions s JOIN agents a ON a.id = s.agent_id WHERE s.id = ${id}`
    })
    const submission = (id: SubmissionId) => Effect.orDie(submissionById(id))

    const decideSubmission = SqlSchema.findOne({
      Request: Schema.Struct({
        id: Schema.String,
        decision: Schema.Literal("approved", "rejected"),
        reason: Schema.NullOr(Schema.String)
      }),
      Result: Decided,
      execute: ({ decision, id, reason }) =>
        sql`
          UPDATE agent_submissions SET status = ${decision}, reason = ${reason}, decided_at = now()
          WHERE id = ${id} AND status = 'pending'
          RETURNING ${sql.literal(SUBMISSION)}, agent_id`
    })
    const publishVersion = SqlSchema.void({
      Request: AgentVersion,
      execute: ({ agentId, version }) =>
        sql`
          UPDATE agents SET published_version = ${version}, published_at = now(), updated_at = now()
          WHERE id = ${agentId}`
    })
    /** Decides a pending submission; approval makes its version the published one. None when it is not pending. */
    const decide = (id: SubmissionId, decision: "approved" | "rejected", reason: string | null) =>
      sql.withTransaction(Effect.gen(function*() {
        const decided = yield* decideSubmission({ id, decision, reason })
        if (Option.isNone(decided)) return decided
        if (decision === "approved") {
          yield* publishVersion({ agentId: decided.value.agentId, version: decided.value.version })
        }
        return decided
      })).pipe(Effect.orDie)

    /** Every submission waiting for review, oldest first, with what the reviewer needs to place it. */
    const pendingSubmissions = SqlSchema.findAll({
      Request: Schema.Void,
      Result: PendingReview,
      execute: () =>
        sql`
          SELECT s.id, s.version, s.status, s.reason, s.submitted_at, s.decided_at, s.agent_id, a.identifier, a.owner_id,
                 a.published_version, v.config
          FROM agent_submissions s JOIN agents a ON a.id = s.agent_id
          JOIN agent_versions v ON v.agent_id = s.agent_id AND v.version = s.version
          WHERE s.status = 'pending' ORDER BY s.submitted_at, s.id`
    })(undefined).pipe(Effect.orDie)

    const history = SqlSchema.findAll({
      Request: AgentId,
      Result: SubmissionRow,
      execute: (agentId) =>
        sql`
          SELECT ${sql.literal(SUBMISSION)} FROM agent_submissions
          WHERE agent_id = ${agentId} ORDER BY submitted_at DESC, version DESC LIMIT 50`
    })
    /** The review history of an agent, newest first. */
    const submissions = (agentId: AgentId) => Effect.orDie(history(agentId))

    const purchased = SqlSchema.findOne({
      Request: Purchase,
      Result: Schema.Struct({ found: Schema.Literal(1) }),
      execute: ({ agentId, userId }) =>
        sql`SELECT 1 AS found FROM purchases WHERE user_id = ${userId} AND agent_id = ${agentId}`
    })
    const hasPurchased = (userId: UserId, agentId: AgentId) =>
      purchased({ userId, agentId }).pipe(Effect.map(Option.isSome), Effect.orDie)

    const insertPurchase = SqlSchema.void({
      Request: Schema.Struct({ ...Purchase.fields, price: Schema.BigInt, creatorShare: Schema.BigInt }),
      execute: (purchase) =>
        sql`
          INSERT INTO purchases (user_id, agent_id, price, creator_share)
          VALUES (${purchase.userId}, ${purchase.agentId}, ${purchase.price}, ${purchase.creatorShare})
          ON CONFLICT (user_id, agent_id) DO NOTHING`
    })
    /** Records an unlock once (the charge behind it is idempotent too). */
    const recordPurchase = (purchase: { userId: UserId; agentId: AgentId; price: bigint; creatorShare: bigint }) =>
      Effect.orDie(insertPurchase(purchase))

    const earningsOf = SqlSchema.findAll({
      Request: UserId,
      Result: Earnings,
      execute: (ownerId) =>
        sql`
          SELECT a.identifier, COUNT(p.user_id)::text AS unlocks,
                 COALESCE(SUM(p.price), 0)::text AS gross, COALESCE(SUM(p.creator_share), 0)::text AS net
          FROM agents a LEFT JOIN purchases p ON p.agent_id = a.id
          WHERE a.owner_id = ${ownerId} GROUP BY a.id, a.identifier, a.created_at ORDER BY a.created_at, a.identifier`
    })
    /** Unlocks, gross and the creator's share, per agent of `ownerId`. */
    const earnings = (ownerId: UserId) => Effect.orDie(earningsOf(ownerId))

    const where = (filter: typeof MarketFilter.Encoded) =>
      sql`
        a.published_version IS NOT NULL
        AND (${filter.keyword}::text IS NULL OR v.config->>'name' ILIKE ${filter.keyword} OR v.config->>'description' ILIKE ${filter.keyword})
        AND (${filter.category}::text IS NULL OR v.config->>'category' = ${filter.category})`
    const publishedTotal = SqlSchema.single({
      Request: MarketFilter,
      Result: Schema.Struct({ total: Schema.NumberFromString }),
      execute: (filter) =>
        sql`
          SELECT COUNT(*)::text AS total FROM agents a
          JOIN agent_versions v ON v.agent_id = a.id AND v.version = a.published_version WHERE ${where(filter)}`
    })
    const publishedPage = SqlSchema.findAll({
      Request: MarketFilter,
      Result: Schema.Struct({ identifier: Schema.String, ...Config.fields }),
      execute: (filter) =>
        sql`
          SELECT a.identifier, v.config, a.published_at FROM agents a
          JOIN agent_versions v ON v.agent_id = a.id AND v.version = a.published_version
          WHERE ${where(filter)} ORDER BY a.published_at DESC, a.identifier LIMIT ${filter.limit} OFFSET ${filter.offset}`
    })
    /** Published agents for the marketplace, newest first, with a total for paging. */
    const published = (filter: { keyword?: string | undefined; category?: string | undefined; offset: number; limit: number }) =>
      Effect.gen(function*() {
        const request = {
          keyword: filter.keyword === undefined || filter.keyword === "" ? null : `%${filter.keyword.replace(/[%_\\]/g, "\\$&")}%`,
          category: filter.category ?? null,
          offset: filter.offset,
          limit: filter.limit
        }
        const { total } = yield* publishedTotal(request)
        const agents = yield* publishedPage(request)
        return { total, agents }
      }).pipe(Effect.orDie)

    /** How many agents are published in each category (by the category of their published version). */
    const publishedCategories = SqlSchema.findAll({
      Request: Schema.Void,
      Result: Schema.Struct({ category: Schema.String, count: Schema.NumberFromString }),
      execute: () =>
        sql`
          SELECT v.config->>'category' AS category, COUNT(*)::text AS count FROM agents a
          JOIN agent_versions v ON v.agent_id = a.id AND v.version = a.published_version
          GROUP BY v.config->>'category'`
    })(undefined).pipe(
      Effect.map((rows) => new Map(rows.map((row) => [row.category, row.count]))),
      Effect.orDie
    )

    return {
      insert,
      byIdentifier,
      byOwner,
      updateDraft,
      version,
      versions,
      versionDetail,
      publish,
      pendingSubmission,
      latestSubmission,
      submission,
      pendingSubmissions,
      submissions,
      decide,
      hasPurchased,
      recordPurchase,
      earnings,
      published,
      publishedCategories
    } as const
  })
}) {}
