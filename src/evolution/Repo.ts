import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import { Effect, Option, Schema } from "effect"
import { AgentConfig } from "../agents/Agent.js"
import { SubmissionId } from "../agents/Domain.js"
import { AgentId, UserId } from "../platform/Ids.js"
import { Json } from "../platform/Rows.js"
import { type Candidate, type Kind, KINDS, type Outcomes } from "./Suggestions.js"
import { Change, SuggestionId } from "./Domain.js"

const SuggestionStatus = Schema.Literal("pending", "accepted", "dismissed")
export type SuggestionStatus = typeof SuggestionStatus.Type

/** A stored suggestion: the candidate as derived, and where it stands. */
const SuggestionRowSchema = Schema.Struct({
  id: SuggestionId,
  agentId: AgentId,
  kind: Schema.Literal(...KINDS),
  subject: Schema.String,
  title: Schema.String,
  rationale: Schema.String,
  change: Json(Change),
  evidence: Json(Schema.Record({ key: Schema.String, value: Schema.Number })),
  draftedBy: Schema.String,
  status: SuggestionStatus,
  appliedVersion: Schema.NullOr(Schema.Number),
  createdAt: Schema.DateFromSelf,
  updatedAt: Schema.DateFromSelf,
  acceptedAt: Schema.NullOr(Schema.DateFromSelf),
  dismissedAt: Schema.NullOr(Schema.DateFromSelf)
})
export type SuggestionRow = typeof SuggestionRowSchema.Type

const OwnedSuggestionRow = Schema.Struct({
  ...SuggestionRowSchema.fields,
  ownerId: UserId,
  identifier: Schema.String
})

const StatusRow = Schema.Struct({
  status: Schema.String,
  failureCode: Schema.NullOr(Schema.String),
  n: Schema.Number,
  deniedRuns: Schema.Number,
  deniedCalls: Schema.Number,
  trial: Schema.Number,
  empty: Schema.Number
})
const DeniedToolRow = Schema.Struct({ name: Schema.String, runs: Schema.Number, calls: Schema.Number })
const Window = Schema.Struct({
  agentId: AgentId,
  after: Schema.NullOr(Schema.DateFromSelf),
  until: Schema.NullOr(Schema.DateFromSelf)
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

    const window = ({ after, agentId, until }: typeof Window.Encoded) =>
      sql`
        agent_id = ${agentId} AND status <> 'running'
        AND (${after}::timestamptz IS NULL OR created_at > ${after}::timestamptz)
        AND (${until}::timestamptz IS NULL OR created_at <= ${until}::timestamptz)`
    const byStatus = SqlSchema.findAll({
      Request: Window,
      Result: StatusRow,
      execute: (request) =>
        sql`
          SELECT status, failure_code, count(*)::int AS n,
                 (count(*) FILTER (WHERE tools_denied > 0))::int AS denied_runs,
                 COALESCE(sum(tools_denied), 0)::int AS denied_calls,
                 (count(*) FILTER (WHERE status = 'completed' AND input_tokens = 0))::int AS trial,
                 (count(*) FILTER (
                   WHERE status = 'completed' AND input_tokens > 0
                     AND (answer_chars = 0 OR (answer_chars IS NULL AND output_tokens = 0))
                 ))::int AS empty
          FROM runs WHERE ${window(request)}
          GROUP BY status, failure_code`
    })
    const byTool = SqlSchema.findAll({
      Request: Window,
      Result: DeniedToolRow,
      execute: (request) =>
        sql`
          SELECT denied.name, count(DISTINCT runs.id)::int AS runs, count(*)::int AS calls
          FROM runs CROSS JOIN LATERAL jsonb_array_elements_text(runs.denied_tools) AS denied (name)
          WHERE ${window(request)}
          GROUP BY denied.name`
    })

    /**
     * Outcomes of the agent's finished runs created after `after` and up to `until` (either may be open). An answer
     * is empty when the run recorded no text (`answer_chars = 0`); runs from before the length was recorded
     * (`answer_chars` null) fall back to no output tokens.
     */
    const outcomes = (agentId: AgentId, after: Date | null, until: Date | null = null) =>
      Effect.map(
        Effect.all([byStatus({ agentId, after, until }), byTool({ agentId, after, until })]),
        ([rows, tools]): Outcomes => {
          const failures: Record<string, number> = {}
          let total = 0, completed = 0, failed = 0, cancelled = 0
          let deniedRuns = 0, deniedCalls = 0, trialExhausted = 0, emptyAnswers = 0
          for (const row of rows) {
            const n = row.n
            total += n
            deniedRuns += row.deniedRuns
            deniedCalls += row.deniedCalls
            trialExhausted += row.trial
            emptyAnswers += row.empty
            if (row.status === "completed") completed += n
            if (row.status === "cancelled") cancelled += n
            if (row.status === "failed") {
              failed += n
              const code = row.failureCode ?? "unknown"
              failures[code] = (failures[code] ?? 0) + n
            }
          }
          const deniedTools: Record<string, { runs: number; calls: number }> = {}
          for (const tool of tools) deniedTools[tool.name] = { runs: tool.runs, calls: tool.calls }
          return { total, completed, failed, cancelled, failures, deniedRuns, deniedCalls, deniedTools, trialExhausted, emptyAnswers }
        }
      ).pipe(Effect.orDie)

    const decided = SqlSchema.findAll({
      Request: AgentId,
      Result: Schema.Struct({ kind: Schema.String, subject: Schema.String, decidedAt: Schema.DateFromSelf }),
      execute: (agentId) =>
        sql`
          SELECT kind, subject, max(COALESCE(accepted_at, dismissed_at)) AS decided_at
          FROM evolution_suggestions WHERE agent_id = ${agentId} AND status <> 'pending'
          GROUP BY kind, subject`
    })
    /** When a suggestion of each kind and subject was last accepted or dismissed. */
    const lastDecided = (agentId: AgentId) =>
      Effect.map(
        decided(agentId),
        (rows) => new Map(rows.map((row) => [`${row.kind}\u0000${row.subject}`, row.decidedAt]))
      ).pipe(Effect.orDie)

    const upsertSuggestion = SqlSchema.single({
      Request: Schema.Struct({
        id: SuggestionId,
        agentId: AgentId,
        kind: Schema.String,
        subject: Schema.String,
        title: Schema.String,
        rationale: Schema.String,
        change: Schema.parseJson(Change),
        evidence: Schema.parseJson(Schema.Record({ key: Schema.String, value: Schema.Number })),
        draftedBy: Schema.String
      }),
      Result: SuggestionRowSchema,
      execute: (row) =>
        sql`
          INSERT INTO evolution_suggestions (id, agent_id, kind, subject, title, rationale, change, evidence, drafted_by)
          VALUES (${row.id}, ${row.agentId}, ${row.kind}, ${row.subject}, ${row.title}, ${row.rationale},
                  ${row.change}::jsonb, ${row.evidence}::jsonb, ${row.draftedBy})
          ON CONFLICT (agent_id, kind, subject) WHERE status = 'pending'
          DO UPDATE SET title = EXCLUDED.title, rationale = EXCLUDED.rationale, evidence = EXCLUDED.evidence,
            change = CASE WHEN evolution_suggestions.drafted_by = 'template'
                          THEN EXCLUDED.change ELSE evolution_suggestions.change END,
            drafted_by = CASE WHEN evolution_suggestions.drafted_by = 'template'
                              THEN EXCLUDED.drafted_by ELSE evolution_suggestions.drafted_by END,
            updated_at = CASE WHEN evolution_suggestions.evidence = EXCLUDED.evidence
                              THEN evolution_suggestions.updated_at ELSE now() END
          RETURNING ${sql.literal(SUGGESTION)}`
    })
    /**
     * Writes `candidate` as the agent's open suggestion of its kind and subject: a new one with `id`, or the open one
     * updated in place (fresh evidence and wording), keeping its id. A change whose text a model drafted is kept.
     */
    const upsert = (agentId: AgentId, id: SuggestionId, candidate: Candidate, draftedBy: string) =>
      Effect.orDie(upsertSuggestion({
        id,
        agentId,
        kind: candidate.kind,
        subject: candidate.subject,
        title: candidate.title,
        rationale: candidate.rationale,
        change: candidate.change,
        evidence: candidate.evidence,
        draftedBy
      }))

    const listed = SqlSchema.findAll({
      Request: AgentId,
      Result: SuggestionRowSchema,
      execute: (agentId) =>
        sql`
          SELECT ${sql.literal(SUGGESTION)} FROM evolution_suggestions WHERE agent_id = ${agentId}
          ORDER BY created_at DESC, id`
    })
    const list = (agentId: AgentId) => Effect.orDie(listed(agentId))

    const owned = SqlSchema.findOne({
      Request: SuggestionId,
      Result: OwnedSuggestionRow,
      execute: (id) =>
        sql`
          SELECT a.owner_id, a.identifier, ${sql.literal(SUGGESTION.split(", ").map((c) => `s.${c}`).join(", "))}
          FROM evolution_suggestions s JOIN agents a ON a.id = s.agent_id WHERE s.id = ${id}`
    })
    const byId = (id: SuggestionId) =>
      owned(id).pipe(
        Effect.map(Option.map(({ identifier, ownerId, ...suggestion }) => ({ suggestion, ownerId, identifier }))),
        Effect.orDie
      )

    const dismissed = SqlSchema.void({
      Request: Schema.Array(SuggestionId),
      execute: (ids) =>
        sql`
          UPDATE evolution_suggestions SET status = 'dismissed', dismissed_at = now(), updated_at = now()
          WHERE status = 'pending' AND ${sql.in("id", ids)}`
    })
    /** Marks open suggestions dismissed (no longer applicable, or the alternative of an accepted one). */
    const dismiss = (ids: ReadonlyArray<SuggestionId>) => ids.length === 0 ? Effect.void : Effect.orDie(dismissed(ids))

    const counts = SqlSchema.findAll({
      Request: AgentId,
      Result: Schema.Struct({ status: Schema.String, n: Schema.Number, lastAccepted: Schema.NullOr(Schema.DateFromSelf) }),
      execute: (agentId) =>
        sql`
          SELECT status, count(*)::int AS n, max(accepted_at) AS last_accepted
          FROM evolution_suggestions WHERE agent_id = ${agentId} GROUP BY status`
    })
    /** Counts of the agent's suggestions by status, and when the last one was accepted. */
    const summary = (agentId: AgentId) =>
      Effect.map(
        counts(agentId),
        (rows) => {
          const by = (status: string) => rows.find((row) => row.status === status)?.n ?? 0
          return {
            made: rows.reduce((sum, row) => sum + row.n, 0),
            pending: by("pending"),
            accepted: by("accepted"),
            dismissed: by("dismissed"),
            lastAcceptedAt: rows.find((row) => row.status === "accepted")?.lastAccepted ?? null
          }
        }
      ).pipe(Effect.orDie)

    const claim = SqlSchema.findOne({
      Request: SuggestionId,
      Result: SuggestionRowSchema,
      execute: (id) =>
        sql`
          UPDATE evolution_suggestions SET status = 'accepted', accepted_at = now(), updated_at = now()
          WHERE id = ${id} AND status = 'pending'
          RETURNING ${sql.literal(SUGGESTION)}`
    })
    const lockAgent = SqlSchema.single({
      Request: AgentId,
      Result: Schema.Struct({ draft: Json(AgentConfig), publishedVersion: Schema.NullOr(Schema.Number) }),
      execute: (agentId) => sql`SELECT draft, published_version FROM agents WHERE id = ${agentId} FOR UPDATE`
    })
    const AgentVersion = Schema.Struct({ agentId: AgentId, version: Schema.Number })
    const versionConfig = SqlSchema.single({
      Request: AgentVersion,
      Result: Schema.Struct({ config: Json(AgentConfig) }),
      execute: ({ agentId, version }) =>
        sql`SELECT config FROM agent_versions WHERE agent_id = ${agentId} AND version = ${version}`
    })
    const nextVersion = SqlSchema.single({
      Request: AgentId,
      Result: Schema.Struct({ version: Schema.Number }),
      execute: (agentId) =>
        sql`SELECT (COALESCE(MAX(version), 0) + 1)::int AS version FROM agent_versions WHERE agent_id = ${agentId}`
    })
    const writeDraft = SqlSchema.void({
      Request: Schema.Struct({ agentId: AgentId, draft: Schema.parseJson(AgentConfig) }),
      execute: ({ agentId, draft }) =>
        sql`UPDATE agents SET draft = ${draft}::jsonb, updated_at = now() WHERE id = ${agentId}`
    })
    const insertVersion = SqlSchema.void({
      Request: Schema.Struct({ ...AgentVersion.fields, config: Schema.parseJson(AgentConfig) }),
      execute: ({ agentId, config, version }) =>
        sql`INSERT INTO agent_versions (agent_id, version, config) VALUES (${agentId}, ${version}, ${config}::jsonb)`
    })
    // `published_at` is left alone: an evolution is not a new release and does not move the agent up the market.
    const publishVersion = SqlSchema.void({
      Request: AgentVersion,
      execute: ({ agentId, version }) =>
        sql`UPDATE agents SET published_version = ${version}, updated_at = now() WHERE id = ${agentId}`
    })
    const supersede = SqlSchema.findAll({
      Request: AgentId,
      Result: Schema.Struct({ id: SubmissionId }),
      execute: (agentId) =>
        sql`
          UPDATE agent_submissions SET status = 'superseded', decided_at = now()
          WHERE agent_id = ${agentId} AND status = 'pending' RETURNING id`
    })
    const submit = SqlSchema.void({
      Request: Schema.Struct({ ...AgentVersion.fields, id: SubmissionId }),
      execute: ({ agentId, id, version }) =>
        sql`
          INSERT INTO agent_submissions (id, agent_id, version, status)
          VALUES (${id}, ${agentId}, ${version}, 'pending')`
    })
    const markApplied = SqlSchema.void({
      Request: Schema.Struct({ id: SuggestionId, version: Schema.Number }),
      execute: ({ id, version }) => sql`UPDATE evolution_suggestions SET applied_version = ${version} WHERE id = ${id}`
    })
    const dismissAlternatives = SqlSchema.void({
      Request: Schema.Struct({ agentId: AgentId, subject: Schema.String, kinds: Schema.Array(Schema.String) }),
      execute: ({ agentId, kinds, subject }) =>
        sql`
          UPDATE evolution_suggestions SET status = 'dismissed', dismissed_at = now(), updated_at = now()
          WHERE agent_id = ${agentId} AND subject = ${subject} AND status = 'pending'
            AND ${sql.in("kind", kinds)}`
    })

    /**
     * Accepts a pending suggestion and applies `apply` to the agent at once, without review (spec 4.10 rule 9): the
     * draft gets the change; when a version is published, the published configuration with the change becomes a new
     * version that is made the published one directly; a submission waiting for review (a snapshot of the draft
     * before the change) is superseded by a submission of the changed draft, so approving it later cannot undo the
     * change. None when the suggestion is not pending any more (decided meanwhile).
     */
    const accept = (
      suggestionId: SuggestionId,
      apply: (config: AgentConfig) => AgentConfig,
      dismissAlso: ReadonlyArray<Kind>,
      submissionId: SubmissionId
    ) =>
      sql.withTransaction(Effect.gen(function*() {
        const claimed = yield* claim(suggestionId)
        if (Option.isNone(claimed)) return Option.none<Applied>()
        const suggestion = claimed.value
        const agentId = suggestion.agentId
        const agent = yield* lockAgent(agentId)
        const draft = apply(agent.draft)
        yield* writeDraft({ agentId, draft })

        let appliedVersion: number | null = null
        let resubmittedVersion: number | null = null
        if (agent.publishedVersion !== null) {
          const current = yield* versionConfig({ agentId, version: agent.publishedVersion })
          const live = apply(current.config)
          appliedVersion = (yield* nextVersion(agentId)).version
          yield* insertVersion({ agentId, version: appliedVersion, config: live })
          yield* publishVersion({ agentId, version: appliedVersion })
          const pending = yield* supersede(agentId)
          if (pending.length > 0) {
            resubmittedVersion = appliedVersion + 1
            yield* insertVersion({ agentId, version: resubmittedVersion, config: draft })
            yield* submit({ agentId, version: resubmittedVersion, id: submissionId })
          }
          yield* markApplied({ id: suggestionId, version: appliedVersion })
        }
        if (dismissAlso.length > 0) {
          yield* dismissAlternatives({ agentId, subject: suggestion.subject, kinds: dismissAlso })
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
