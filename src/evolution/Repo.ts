import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Option, Schema } from "effect"
import { AgentConfig } from "../agents/Agent.js"
import { type Candidate, Change, type Kind, type Outcomes } from "./Suggestions.js"

export type SuggestionStatus = "pending" | "accepted" | "dismissed"

/** A stored suggestion: the candidate as derived, and where it stands. */
export interface SuggestionRow extends Candidate {
  readonly id: string
  readonly agentId: string
  readonly draftedBy: string
  readonly status: SuggestionStatus
  readonly appliedVersion: number | null
  readonly createdAt: Date
  readonly updatedAt: Date
  readonly acceptedAt: Date | null
  readonly dismissedAt: Date | null
}

const json = (value: unknown) => (typeof value === "string" ? JSON.parse(value) : value)
const decodeChange = Schema.decodeUnknownSync(Change)
const decodeConfig = Schema.decodeUnknownSync(AgentConfig)

const toSuggestion = (row: any): SuggestionRow => ({
  id: row.id,
  agentId: row.agentId,
  kind: row.kind,
  subject: row.subject,
  title: row.title,
  rationale: row.rationale,
  change: decodeChange(json(row.change)),
  evidence: json(row.evidence),
  draftedBy: row.draftedBy,
  status: row.status,
  appliedVersion: row.appliedVersion,
  createdAt: row.createdAt,
  updatedAt: row.updatedAt,
  acceptedAt: row.acceptedAt,
  dismissedAt: row.dismissedAt
})

const SUGGESTION =
  "id, agent_id, kind, subject, title, rationale, change, evidence, drafted_by, status, applied_version, created_at, " +
  "updated_at, accepted_at, dismissed_at"

/** What accepting wrote: the draft, and the version made the published one (none when nothing was published). */
export interface Applied {
  readonly suggestion: SuggestionRow
  readonly draft: AgentConfig
  readonly publishedVersion: number | null
  /** The version that went live at once (rule 9), when the agent had a published version. */
  readonly appliedVersion: number | null
  /** A submission still waiting for review was replaced by one of the changed draft (its version). */
  readonly resubmittedVersion: number | null
}

/**
 * Suggestions, and the run outcomes they are derived from. Accepting writes the agent's draft and versions here, in
 * one transaction with the suggestion, because it must bypass review (spec 4.10 rule 9), which `AgentsRepo` has no
 * way to do. SQL errors are defects here.
 */
export class EvolutionRepo extends Effect.Service<EvolutionRepo>()("atrium/evolution/EvolutionRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    /**
     * Outcomes of the agent's finished runs created after `after` and up to `until` (either may be open). An answer
     * is empty when the run recorded no text (`answer_chars = 0`); runs from before the length was recorded
     * (`answer_chars` null) fall back to no output tokens.
     */
    const outcomes = (agentId: string, after: Date | null, until: Date | null = null) => {
      const window = sql`
        agent_id = ${agentId} AND status <> 'running'
        AND (${after}::timestamptz IS NULL OR created_at > ${after}::timestamptz)
        AND (${until}::timestamptz IS NULL OR created_at <= ${until}::timestamptz)`
      const byStatus = sql<{
        status: string
        failureCode: string | null
        n: number
        deniedRuns: number
        deniedCalls: number
        trial: number
        empty: number
      }>`
        SELECT status, failure_code, count(*)::int AS n,
               (count(*) FILTER (WHERE tools_denied > 0))::int AS denied_runs,
               COALESCE(sum(tools_denied), 0)::int AS denied_calls,
               (count(*) FILTER (WHERE status = 'completed' AND input_tokens = 0))::int AS trial,
               (count(*) FILTER (
                 WHERE status = 'completed' AND input_tokens > 0
                   AND (answer_chars = 0 OR (answer_chars IS NULL AND output_tokens = 0))
               ))::int AS empty
        FROM runs WHERE ${window}
        GROUP BY status, failure_code`
      const byTool = sql<{ name: string; runs: number; calls: number }>`
        SELECT denied.name, count(DISTINCT runs.id)::int AS runs, count(*)::int AS calls
        FROM runs CROSS JOIN LATERAL jsonb_array_elements_text(runs.denied_tools) AS denied (name)
        WHERE ${window}
        GROUP BY denied.name`
      return Effect.map(
        Effect.all([byStatus, byTool]),
        ([rows, tools]): Outcomes => {
          const failures: Record<string, number> = {}
          let total = 0, completed = 0, failed = 0, cancelled = 0
          let deniedRuns = 0, deniedCalls = 0, trialExhausted = 0, emptyAnswers = 0
          for (const row of rows) {
            const n = Number(row.n)
            total += n
            deniedRuns += Number(row.deniedRuns)
            deniedCalls += Number(row.deniedCalls)
            trialExhausted += Number(row.trial)
            emptyAnswers += Number(row.empty)
            if (row.status === "completed") completed += n
            if (row.status === "cancelled") cancelled += n
            if (row.status === "failed") {
              failed += n
              const code = row.failureCode ?? "unknown"
              failures[code] = (failures[code] ?? 0) + n
            }
          }
          const deniedTools: Record<string, { runs: number; calls: number }> = {}
          for (const tool of tools) deniedTools[tool.name] = { runs: Number(tool.runs), calls: Number(tool.calls) }
          return { total, completed, failed, cancelled, failures, deniedRuns, deniedCalls, deniedTools, trialExhausted, emptyAnswers }
        }
      ).pipe(Effect.orDie)
    }

    /** When a suggestion of each kind and subject was last accepted or dismissed. */
    const lastDecided = (agentId: string) =>
      Effect.map(
        sql<{ kind: string; subject: string; decidedAt: Date }>`
          SELECT kind, subject, max(COALESCE(accepted_at, dismissed_at)) AS decided_at
          FROM evolution_suggestions WHERE agent_id = ${agentId} AND status <> 'pending'
          GROUP BY kind, subject`,
        (rows) => new Map(rows.map((row) => [`${row.kind}\u0000${row.subject}`, new Date(row.decidedAt)]))
      ).pipe(Effect.orDie)

    /**
     * Writes `candidate` as the agent's open suggestion of its kind and subject: a new one with `id`, or the open one
     * updated in place (fresh evidence and wording), keeping its id. A change whose text a model drafted is kept.
     */
    const upsert = (agentId: string, id: string, candidate: Candidate, draftedBy: string) =>
      sql`
        INSERT INTO evolution_suggestions (id, agent_id, kind, subject, title, rationale, change, evidence, drafted_by)
        VALUES (${id}, ${agentId}, ${candidate.kind}, ${candidate.subject}, ${candidate.title}, ${candidate.rationale},
                ${JSON.stringify(candidate.change)}::jsonb, ${JSON.stringify(candidate.evidence)}::jsonb, ${draftedBy})
        ON CONFLICT (agent_id, kind, subject) WHERE status = 'pending'
        DO UPDATE SET title = EXCLUDED.title, rationale = EXCLUDED.rationale, evidence = EXCLUDED.evidence,
          change = CASE WHEN evolution_suggestions.drafted_by = 'template'
                        THEN EXCLUDED.change ELSE evolution_suggestions.change END,
          drafted_by = CASE WHEN evolution_suggestions.drafted_by = 'template'
                            THEN EXCLUDED.drafted_by ELSE evolution_suggestions.drafted_by END,
          updated_at = CASE WHEN evolution_suggestions.evidence = EXCLUDED.evidence
                            THEN evolution_suggestions.updated_at ELSE now() END
        RETURNING ${sql.literal(SUGGESTION)}`.pipe(
        Effect.map((rows) => toSuggestion(rows[0])),
        Effect.orDie
      )

    const list = (agentId: string) =>
      sql`
        SELECT ${sql.literal(SUGGESTION)} FROM evolution_suggestions WHERE agent_id = ${agentId}
        ORDER BY created_at DESC, id`.pipe(Effect.map((rows) => rows.map(toSuggestion)), Effect.orDie)

    const byId = (id: string) =>
      sql`
        SELECT a.owner_id, a.identifier, ${sql.literal(SUGGESTION.split(", ").map((c) => `s.${c}`).join(", "))}
        FROM evolution_suggestions s JOIN agents a ON a.id = s.agent_id WHERE s.id = ${id}`.pipe(
        Effect.map((rows) =>
          Option.map(Option.fromNullable(rows[0]), (row: any) => ({
            suggestion: toSuggestion(row),
            ownerId: row.ownerId as string,
            identifier: row.identifier as string
          }))
        ),
        Effect.orDie
      )

    /** Marks open suggestions dismissed (no longer applicable, or the alternative of an accepted one). */
    const dismiss = (ids: ReadonlyArray<string>) =>
      ids.length === 0
        ? Effect.void
        : sql`
          UPDATE evolution_suggestions SET status = 'dismissed', dismissed_at = now(), updated_at = now()
          WHERE status = 'pending' AND ${sql.in("id", ids)}`.pipe(Effect.asVoid, Effect.orDie)

    /** Counts of the agent's suggestions by status, and when the last one was accepted. */
    const summary = (agentId: string) =>
      Effect.map(
        sql<{ status: string; n: number; lastAccepted: Date | null }>`
          SELECT status, count(*)::int AS n, max(accepted_at) AS last_accepted
          FROM evolution_suggestions WHERE agent_id = ${agentId} GROUP BY status`,
        (rows) => {
          const by = (status: string) => Number(rows.find((row) => row.status === status)?.n ?? 0)
          const accepted = rows.find((row) => row.status === "accepted")?.lastAccepted ?? null
          return {
            made: rows.reduce((sum, row) => sum + Number(row.n), 0),
            pending: by("pending"),
            accepted: by("accepted"),
            dismissed: by("dismissed"),
            lastAcceptedAt: accepted === null ? null : new Date(accepted)
          }
        }
      ).pipe(Effect.orDie)

    /**
     * Accepts a pending suggestion and applies `apply` to the agent at once, without review (spec 4.10 rule 9): the
     * draft gets the change; when a version is published, the published configuration with the change becomes a new
     * version that is made the published one directly; a submission waiting for review (a snapshot of the draft
     * before the change) is superseded by a submission of the changed draft, so approving it later cannot undo the
     * change. None when the suggestion is not pending any more (decided meanwhile).
     */
    const accept = (
      suggestionId: string,
      apply: (config: AgentConfig) => AgentConfig,
      dismissAlso: ReadonlyArray<Kind>,
      submissionId: string
    ) =>
      sql.withTransaction(Effect.gen(function*() {
        const claimed = yield* sql`
          UPDATE evolution_suggestions SET status = 'accepted', accepted_at = now(), updated_at = now()
          WHERE id = ${suggestionId} AND status = 'pending'
          RETURNING ${sql.literal(SUGGESTION)}`
        if (claimed.length === 0) return Option.none<Applied>()
        const suggestion = toSuggestion(claimed[0])
        const agents = yield* sql<{ draft: unknown; publishedVersion: number | null }>`
          SELECT draft, published_version FROM agents WHERE id = ${suggestion.agentId} FOR UPDATE`
        const agent = agents[0]!
        const draft = apply(decodeConfig(json(agent.draft)))
        yield* sql`
          UPDATE agents SET draft = ${JSON.stringify(draft)}::jsonb, updated_at = now() WHERE id = ${suggestion.agentId}`

        let appliedVersion: number | null = null
        let resubmittedVersion: number | null = null
        if (agent.publishedVersion !== null) {
          const current = yield* sql<{ config: unknown }>`
            SELECT config FROM agent_versions WHERE agent_id = ${suggestion.agentId} AND version = ${agent.publishedVersion}`
          const live = apply(decodeConfig(json(current[0]!.config)))
          const next = yield* sql<{ version: number }>`
            SELECT COALESCE(MAX(version), 0) + 1 AS version FROM agent_versions WHERE agent_id = ${suggestion.agentId}`
          appliedVersion = Number(next[0]!.version)
          yield* sql`
            INSERT INTO agent_versions (agent_id, version, config)
            VALUES (${suggestion.agentId}, ${appliedVersion}, ${JSON.stringify(live)}::jsonb)`
          // `published_at` is left alone: an evolution is not a new release and does not move the agent up the market.
          yield* sql`
            UPDATE agents SET published_version = ${appliedVersion}, updated_at = now() WHERE id = ${suggestion.agentId}`
          const pending = yield* sql`
            UPDATE agent_submissions SET status = 'superseded', decided_at = now()
            WHERE agent_id = ${suggestion.agentId} AND status = 'pending' RETURNING id`
          if (pending.length > 0) {
            resubmittedVersion = appliedVersion + 1
            yield* sql`
              INSERT INTO agent_versions (agent_id, version, config)
              VALUES (${suggestion.agentId}, ${resubmittedVersion}, ${JSON.stringify(draft)}::jsonb)`
            yield* sql`
              INSERT INTO agent_submissions (id, agent_id, version, status)
              VALUES (${submissionId}, ${suggestion.agentId}, ${resubmittedVersion}, 'pending')`
          }
          yield* sql`UPDATE evolution_suggestions SET applied_version = ${appliedVersion} WHERE id = ${suggestionId}`
        }
        if (dismissAlso.length > 0) {
          yield* sql`
            UPDATE evolution_suggestions SET status = 'dismissed', dismissed_at = now(), updated_at = now()
            WHERE agent_id = ${suggestion.agentId} AND subject = ${suggestion.subject} AND status = 'pending'
              AND ${sql.in("kind", dismissAlso)}`
        }
        return Option.some<Applied>({
          suggestion: { ...suggestion, appliedVersion },
          draft,
          publishedVersion: appliedVersion ?? agent.publishedVersion,
          appliedVersion,
          resubmittedVersion
        })
      })).pipe(Effect.orDie)

    return { outcomes, lastDecided, upsert, list, byId, dismiss, summary, accept } as const
  })
}) {}
