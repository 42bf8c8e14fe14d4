import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Option, Schema } from "effect"
import { decodeFirst, decodeRows, Json } from "../platform/Rows.js"
import { AgentConfig } from "./Agent.js"

const SubmissionRow = Schema.Struct({
  id: Schema.String,
  version: Schema.Number,
  status: Schema.Literal("pending", "approved", "rejected", "superseded"),
  reason: Schema.NullOr(Schema.String),
  submittedAt: Schema.DateFromSelf,
  decidedAt: Schema.NullOr(Schema.DateFromSelf)
})
export type Submission = typeof SubmissionRow.Type

const AgentRowSchema = Schema.Struct({
  id: Schema.String,
  identifier: Schema.String,
  ownerId: Schema.String,
  draft: Json(AgentConfig),
  publishedVersion: Schema.NullOr(Schema.Number),
  publishedAt: Schema.NullOr(Schema.DateFromSelf),
  createdAt: Schema.DateFromSelf,
  updatedAt: Schema.DateFromSelf
})
export type AgentRow = typeof AgentRowSchema.Type

const Config = Schema.Struct({ config: Json(AgentConfig) })
const Owned = Schema.Struct({ agentId: Schema.String, identifier: Schema.String, ownerId: Schema.String })
const Decided = Schema.Struct({ ...SubmissionRow.fields, agentId: Schema.String })

const Earnings = Schema.Struct({
  identifier: Schema.String,
  unlocks: Schema.NumberFromString,
  gross: Schema.BigInt,
  net: Schema.BigInt
})

const agentRows = decodeRows(AgentRowSchema)
const firstAgent = decodeFirst(AgentRowSchema)
const firstSubmission = decodeFirst(SubmissionRow)

const AGENT = "id, identifier, owner_id, draft, published_version, published_at, created_at, updated_at"

/** Agents, their versions and review submissions. SQL errors are defects here. */
export class AgentsRepo extends Effect.Service<AgentsRepo>()("atrium/agents/AgentsRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    /** Inserts a draft; none when the identifier is taken. */
    const insert = (agent: { id: string; identifier: string; ownerId: string; draft: AgentConfig }) =>
      sql`
        INSERT INTO agents (id, identifier, owner_id, draft)
        VALUES (${agent.id}, ${agent.identifier}, ${agent.ownerId}, ${JSON.stringify(agent.draft)}::jsonb)
        ON CONFLICT (identifier) DO NOTHING RETURNING ${sql.literal(AGENT)}`.pipe(
        Effect.flatMap(firstAgent),
        Effect.orDie
      )

    const byIdentifier = (identifier: string) =>
      sql`SELECT ${sql.literal(AGENT)} FROM agents WHERE identifier = ${identifier}`.pipe(
        Effect.flatMap(firstAgent),
        Effect.orDie
      )

    const byOwner = (ownerId: string) =>
      sql`SELECT ${sql.literal(AGENT)} FROM agents WHERE owner_id = ${ownerId} ORDER BY created_at DESC, id`.pipe(
        Effect.flatMap(agentRows),
        Effect.orDie
      )

    const updateDraft = (id: string, draft: AgentConfig) =>
      sql`
        UPDATE agents SET draft = ${JSON.stringify(draft)}::jsonb, updated_at = now()
        WHERE id = ${id} RETURNING ${sql.literal(AGENT)}`.pipe(
        Effect.flatMap(firstAgent),
        Effect.map(Option.getOrThrow),
        Effect.orDie
      )

    const version = (agentId: string, version: number) =>
      sql`SELECT config FROM agent_versions WHERE agent_id = ${agentId} AND version = ${version}`.pipe(
        Effect.flatMap(decodeFirst(Config)),
        Effect.map(Option.map((row) => row.config)),
        Effect.orDie
      )

    /**
     * Freezes the draft as the next version and submits it; a submission still pending for an older version is
     * superseded (review looks at the newest). The published version is untouched.
     */
    const publish = (agentId: string, submissionId: string) =>
      sql.withTransaction(Effect.gen(function*() {
        // The draft is copied inside the database, under the row lock, exactly as stored.
        yield* sql`SELECT 1 FROM agents WHERE id = ${agentId} FOR UPDATE`
        const next = yield* sql`
          SELECT COALESCE(MAX(version), 0) + 1 AS version FROM agent_versions WHERE agent_id = ${agentId}`.pipe(
          Effect.flatMap(decodeFirst(Schema.Struct({ version: Schema.Number })))
        )
        const version = Option.getOrThrow(next).version
        yield* sql`
          INSERT INTO agent_versions (agent_id, version, config)
          SELECT ${agentId}, ${version}, draft FROM agents WHERE id = ${agentId}`
        yield* sql`
          UPDATE agent_submissions SET status = 'superseded', decided_at = now()
          WHERE agent_id = ${agentId} AND status = 'pending'`
        const rows = yield* sql`
          INSERT INTO agent_submissions (id, agent_id, version, status)
          VALUES (${submissionId}, ${agentId}, ${version}, 'pending')
          RETURNING id, version, status, reason, submitted_at, decided_at`
        return Option.getOrThrow(yield* firstSubmission(rows))
      })).pipe(Effect.orDie)

    const pendingSubmission = (agentId: string) =>
      sql`
        SELECT id, version, status, reason, submitted_at, decided_at FROM agent_submissions
        WHERE agent_id = ${agentId} AND status = 'pending'`.pipe(
        Effect.flatMap(firstSubmission),
        Effect.orDie
      )

    const latestSubmission = (agentId: string) =>
      sql`
        SELECT id, version, status, reason, submitted_at, decided_at FROM agent_submissions
        WHERE agent_id = ${agentId} ORDER BY submitted_at DESC, version DESC LIMIT 1`.pipe(
        Effect.flatMap(firstSubmission),
        Effect.orDie
      )

    const submission = (id: string) =>
      sql`
        SELECT s.id, s.version, s.status, s.reason, s.submitted_at, s.decided_at, s.agent_id, a.identifier, a.owner_id
        FROM agent_submissions s JOIN agents a ON a.id = s.agent_id WHERE s.id = ${id}`.pipe(
        Effect.flatMap(decodeFirst(Schema.Struct({ ...SubmissionRow.fields, ...Owned.fields }))),
        Effect.orDie
      )

    /** Decides a pending submission; approval makes its version the published one. None when it is not pending. */
    const decide = (id: string, decision: "approved" | "rejected", reason: string | null) =>
      sql.withTransaction(Effect.gen(function*() {
        const decided = yield* sql`
          UPDATE agent_submissions SET status = ${decision}, reason = ${reason}, decided_at = now()
          WHERE id = ${id} AND status = 'pending'
          RETURNING id, version, status, reason, submitted_at, decided_at, agent_id`.pipe(Effect.flatMap(decodeFirst(Decided)))
        if (Option.isNone(decided)) return decided
        if (decision === "approved") {
          yield* sql`
            UPDATE agents SET published_version = ${decided.value.version}, published_at = now(), updated_at = now()
            WHERE id = ${decided.value.agentId}`
        }
        return decided
      })).pipe(Effect.orDie)

    /** Every submission waiting for review, oldest first, with what the reviewer needs to place it. */
    const pendingSubmissions = sql`
      SELECT s.id, s.version, s.status, s.reason, s.submitted_at, s.decided_at, s.agent_id, a.identifier, a.owner_id,
             a.published_version, v.config
      FROM agent_submissions s JOIN agents a ON a.id = s.agent_id
      JOIN agent_versions v ON v.agent_id = s.agent_id AND v.version = s.version
      WHERE s.status = 'pending' ORDER BY s.submitted_at, s.id`.pipe(
      Effect.flatMap(decodeRows(Schema.Struct({
        ...SubmissionRow.fields,
        ...Owned.fields,
        publishedVersion: Schema.NullOr(Schema.Number),
        ...Config.fields
      }))),
      Effect.orDie
    )

    /** The review history of an agent, newest first. */
    const submissions = (agentId: string) =>
      sql`
        SELECT id, version, status, reason, submitted_at, decided_at FROM agent_submissions
        WHERE agent_id = ${agentId} ORDER BY submitted_at DESC, version DESC LIMIT 50`.pipe(
        Effect.flatMap(decodeRows(SubmissionRow)),
        Effect.orDie
      )

    const hasPurchased = (userId: string, agentId: string) =>
      sql`SELECT 1 FROM purchases WHERE user_id = ${userId} AND agent_id = ${agentId}`.pipe(
        Effect.map((rows) => rows.length > 0),
        Effect.orDie
      )

    /** Records an unlock once (the charge behind it is idempotent too). */
    const recordPurchase = (purchase: { userId: string; agentId: string; price: bigint; creatorShare: bigint }) =>
      sql`
        INSERT INTO purchases (user_id, agent_id, price, creator_share)
        VALUES (${purchase.userId}, ${purchase.agentId}, ${String(purchase.price)}, ${String(purchase.creatorShare)})
        ON CONFLICT (user_id, agent_id) DO NOTHING`.pipe(Effect.asVoid, Effect.orDie)

    /** Unlocks, gross and the creator's share, per agent of `ownerId`. */
    const earnings = (ownerId: string) =>
      sql`
        SELECT a.identifier, COUNT(p.user_id)::text AS unlocks,
               COALESCE(SUM(p.price), 0)::text AS gross, COALESCE(SUM(p.creator_share), 0)::text AS net
        FROM agents a LEFT JOIN purchases p ON p.agent_id = a.id
        WHERE a.owner_id = ${ownerId} GROUP BY a.id, a.identifier, a.created_at ORDER BY a.created_at, a.identifier`.pipe(
        Effect.flatMap(decodeRows(Earnings)),
        Effect.orDie
      )

    /** Published agents for the marketplace, newest first, with a total for paging. */
    const published = (filter: { keyword?: string | undefined; category?: string | undefined; offset: number; limit: number }) =>
      Effect.gen(function*() {
        const keyword = filter.keyword === undefined || filter.keyword === "" ? null : `%${filter.keyword.replace(/[%_\\]/g, "\\$&")}%`
        const where = sql`
          a.published_version IS NOT NULL
          AND (${keyword}::text IS NULL OR v.config->>'name' ILIKE ${keyword} OR v.config->>'description' ILIKE ${keyword})
          AND (${filter.category ?? null}::text IS NULL OR v.config->>'category' = ${filter.category ?? null})`
        const total = yield* sql`
          SELECT COUNT(*)::text AS total FROM agents a
          JOIN agent_versions v ON v.agent_id = a.id AND v.version = a.published_version WHERE ${where}`.pipe(
          Effect.flatMap(decodeFirst(Schema.Struct({ total: Schema.NumberFromString })))
        )
        const rows = yield* sql`
          SELECT a.identifier, v.config, a.published_at FROM agents a
          JOIN agent_versions v ON v.agent_id = a.id AND v.version = a.published_version
          WHERE ${where} ORDER BY a.published_at DESC, a.identifier LIMIT ${filter.limit} OFFSET ${filter.offset}`.pipe(
          Effect.flatMap(decodeRows(Schema.Struct({ identifier: Schema.String, ...Config.fields })))
        )
        return { total: Option.getOrThrow(total).total, agents: rows }
      }).pipe(Effect.orDie)

    /** How many agents are published in each category (by the category of their published version). */
    const publishedCategories = sql`
      SELECT v.config->>'category' AS category, COUNT(*)::text AS count FROM agents a
      JOIN agent_versions v ON v.agent_id = a.id AND v.version = a.published_version
      GROUP BY v.config->>'category'`.pipe(
      Effect.flatMap(decodeRows(Schema.Struct({ category: Schema.String, count: Schema.NumberFromString }))),
      Effect.map((rows) => new Map(rows.map((row) => [row.category, row.count]))),
      Effect.orDie
    )

    return {
      insert,
      byIdentifier,
      byOwner,
      updateDraft,
      version,
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
