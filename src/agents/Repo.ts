import { SqlClient } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import { AgentConfig } from "./Agent.js"

export interface Submission {
  readonly id: string
  readonly version: number
  readonly status: "pending" | "approved" | "rejected" | "superseded"
  readonly reason: string | null
  readonly submittedAt: Date
  readonly decidedAt: Date | null
}

export interface AgentRow {
  readonly id: string
  readonly identifier: string
  readonly ownerId: string
  readonly draft: AgentConfig
  readonly publishedVersion: number | null
  readonly publishedAt: Date | null
  readonly createdAt: Date
  readonly updatedAt: Date
}

const decodeConfig = Schema.decodeUnknownSync(AgentConfig)
const json = (value: unknown) => (typeof value === "string" ? JSON.parse(value) : value)

const toAgent = (row: any): AgentRow => ({
  id: row.id,
  identifier: row.identifier,
  ownerId: row.ownerId,
  draft: decodeConfig(json(row.draft)),
  publishedVersion: row.publishedVersion,
  publishedAt: row.publishedAt,
  createdAt: row.createdAt,
  updatedAt: row.updatedAt
})

const toSubmission = (row: any): Submission => ({
  id: row.id,
  version: row.version,
  status: row.status,
  reason: row.reason,
  submittedAt: row.submittedAt,
  decidedAt: row.decidedAt
})

const AGENT = "id, identifier, owner_id, draft, published_version, published_at, created_at, updated_at"

/** Agents, their versions and review submissions. SQL errors are defects here. */
export class AgentsRepo extends Effect.Service<AgentsRepo>()("atrium/agents/AgentsRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const first = <A>(rows: ReadonlyArray<any>, f: (row: any) => A) => Option.map(Option.fromNullable(rows[0]), f)

    /** Inserts a draft; none when the identifier is taken. */
    const insert = (agent: { id: string; identifier: string; ownerId: string; draft: AgentConfig }) =>
      sql`
        INSERT INTO agents (id, identifier, owner_id, draft)
        VALUES (${agent.id}, ${agent.identifier}, ${agent.ownerId}, ${JSON.stringify(agent.draft)}::jsonb)
        ON CONFLICT (identifier) DO NOTHING RETURNING ${sql.literal(AGENT)}`.pipe(
        Effect.map((rows) => first(rows, toAgent)),
        Effect.orDie
      )

    const byIdentifier = (identifier: string) =>
      sql`SELECT ${sql.literal(AGENT)} FROM agents WHERE identifier = ${identifier}`.pipe(
        Effect.map((rows) => first(rows, toAgent)),
        Effect.orDie
      )

    const byOwner = (ownerId: string) =>
      sql`SELECT ${sql.literal(AGENT)} FROM agents WHERE owner_id = ${ownerId} ORDER BY created_at DESC, id`.pipe(
        Effect.map((rows) => rows.map(toAgent)),
        Effect.orDie
      )

    const updateDraft = (id: string, draft: AgentConfig) =>
      sql`
        UPDATE agents SET draft = ${JSON.stringify(draft)}::jsonb, updated_at = now()
        WHERE id = ${id} RETURNING ${sql.literal(AGENT)}`.pipe(
        Effect.map((rows) => toAgent(rows[0])),
        Effect.orDie
      )

    const version = (agentId: string, version: number) =>
      sql<{ config: unknown }>`SELECT config FROM agent_versions WHERE agent_id = ${agentId} AND version = ${version}`.pipe(
        Effect.map((rows) => first(rows, (row) => decodeConfig(json(row.config)))),
        Effect.orDie
      )

    /**
     * Freezes the draft as the next version and submits it; a submission still pending for an older version is
     * superseded (review looks at the newest). The published version is untouched.
     */
    const publish = (agentId: string, submissionId: string) =>
      sql.withTransaction(Effect.gen(function*() {
        const locked = yield* sql<{ draft: unknown }>`SELECT draft FROM agents WHERE id = ${agentId} FOR UPDATE`
        const next = yield* sql<{ version: number }>`
          SELECT COALESCE(MAX(version), 0) + 1 AS version FROM agent_versions WHERE agent_id = ${agentId}`
        const version = Number(next[0]!.version)
        yield* sql`
          INSERT INTO agent_versions (agent_id, version, config)
          VALUES (${agentId}, ${version}, ${JSON.stringify(json(locked[0]!.draft))}::jsonb)`
        yield* sql`
          UPDATE agent_submissions SET status = 'superseded', decided_at = now()
          WHERE agent_id = ${agentId} AND status = 'pending'`
        const rows = yield* sql`
          INSERT INTO agent_submissions (id, agent_id, version, status)
          VALUES (${submissionId}, ${agentId}, ${version}, 'pending')
          RETURNING id, version, status, reason, submitted_at, decided_at`
        return toSubmission(rows[0])
      })).pipe(Effect.orDie)

    const pendingSubmission = (agentId: string) =>
      sql`
        SELECT id, version, status, reason, submitted_at, decided_at FROM agent_submissions
        WHERE agent_id = ${agentId} AND status = 'pending'`.pipe(
        Effect.map((rows) => first(rows, toSubmission)),
        Effect.orDie
      )

    const latestSubmission = (agentId: string) =>
      sql`
        SELECT id, version, status, reason, submitted_at, decided_at FROM agent_submissions
        WHERE agent_id = ${agentId} ORDER BY submitted_at DESC, version DESC LIMIT 1`.pipe(
        Effect.map((rows) => first(rows, toSubmission)),
        Effect.orDie
      )

    const submission = (id: string) =>
      sql<any>`
        SELECT s.id, s.version, s.status, s.reason, s.submitted_at, s.decided_at, s.agent_id, a.identifier, a.owner_id
        FROM agent_submissions s JOIN agents a ON a.id = s.agent_id WHERE s.id = ${id}`.pipe(
        Effect.map((rows) =>
          first(rows, (row) => ({ ...toSubmission(row), agentId: row.agentId as string, identifier: row.identifier as string, ownerId: row.ownerId as string }))
        ),
        Effect.orDie
      )

    /** Decides a pending submission; approval makes its version the published one. None when it is not pending. */
    const decide = (id: string, decision: "approved" | "rejected", reason: string | null) =>
      sql.withTransaction(Effect.gen(function*() {
        const rows = yield* sql<any>`
          UPDATE agent_submissions SET status = ${decision}, reason = ${reason}, decided_at = now()
          WHERE id = ${id} AND status = 'pending'
          RETURNING id, version, status, reason, submitted_at, decided_at, agent_id`
        const row = rows[0]
        if (row === undefined) return Option.none()
        if (decision === "approved") {
          yield* sql`
            UPDATE agents SET published_version = ${row.version}, published_at = now(), updated_at = now()
            WHERE id = ${row.agentId}`
        }
        return Option.some({ ...toSubmission(row), agentId: row.agentId as string })
      })).pipe(Effect.orDie)

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
      sql<{ identifier: string; unlocks: string; gross: string; net: string }>`
        SELECT a.identifier, COUNT(p.user_id)::text AS unlocks,
               COALESCE(SUM(p.price), 0)::text AS gross, COALESCE(SUM(p.creator_share), 0)::text AS net
        FROM agents a LEFT JOIN purchases p ON p.agent_id = a.id
        WHERE a.owner_id = ${ownerId} GROUP BY a.id, a.identifier, a.created_at ORDER BY a.created_at, a.identifier`.pipe(
        Effect.map((rows) =>
          rows.map((row) => ({
            identifier: row.identifier,
            unlocks: Number(row.unlocks),
            gross: BigInt(row.gross),
            net: BigInt(row.net)
          }))
        ),
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
        const total = yield* sql<{ total: string }>`
          SELECT COUNT(*)::text AS total FROM agents a
          JOIN agent_versions v ON v.agent_id = a.id AND v.version = a.published_version WHERE ${where}`
        const rows = yield* sql<any>`
          SELECT a.identifier, v.config, a.published_at FROM agents a
          JOIN agent_versions v ON v.agent_id = a.id AND v.version = a.published_version
          WHERE ${where} ORDER BY a.published_at DESC, a.identifier LIMIT ${filter.limit} OFFSET ${filter.offset}`
        return {
          total: Number(total[0]!.total),
          agents: rows.map((row) => ({ identifier: row.identifier as string, config: decodeConfig(json(row.config)) }))
        }
      }).pipe(Effect.orDie)

    /** How many agents are published in each category (by the category of their published version). */
    const publishedCategories = sql<{ category: string; count: string }>`
      SELECT v.config->>'category' AS category, COUNT(*)::text AS count FROM agents a
      JOIN agent_versions v ON v.agent_id = a.id AND v.version = a.published_version
      GROUP BY v.config->>'category'`.pipe(
      Effect.map((rows) => new Map(rows.map((row) => [row.category, Number(row.count)]))),
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
      decide,
      hasPurchased,
      recordPurchase,
      earnings,
      published,
      publishedCategories
    } as const
  })
}) {}
