import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import { Effect, Schema } from "effect"
import { AgentId } from "../platform/Ids.js"

/**
 * What the MCP resources read that no service of another domain answers (src/mcp/Resources.ts): an expert's versions
 * with their review state, and its last runs. Reads only; the owner check happens before, in `Agents.owned`.
 */

const VersionRow = Schema.Struct({
  version: Schema.Number,
  config: Schema.Unknown,
  createdAt: Schema.DateFromSelf,
  submissionId: Schema.NullOr(Schema.String),
  submissionStatus: Schema.NullOr(Schema.String),
  reason: Schema.NullOr(Schema.String),
  submittedAt: Schema.NullOr(Schema.DateFromSelf),
  decidedAt: Schema.NullOr(Schema.DateFromSelf)
})

const RunRow = Schema.Struct({
  id: Schema.String,
  agentVersion: Schema.NullOr(Schema.Number),
  status: Schema.String,
  failureCode: Schema.NullOr(Schema.String),
  failureMessage: Schema.NullOr(Schema.String),
  payerId: Schema.String,
  sessionId: Schema.NullOr(Schema.String),
  inputTokens: Schema.Number,
  outputTokens: Schema.Number,
  creditsCharged: Schema.String,
  createdAt: Schema.DateFromSelf,
  finishedAt: Schema.NullOr(Schema.DateFromSelf)
})

export class McpRepo extends Effect.Service<McpRepo>()("atrium/mcp/McpRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const versions = SqlSchema.findAll({
      Request: AgentId,
      Result: VersionRow,
      execute: (agentId) => sql`
        SELECT v.version, v.config, v.created_at, s.id AS submission_id, s.status AS submission_status, s.reason,
               s.submitted_at, s.decided_at
        FROM agent_versions v
        LEFT JOIN agent_submissions s ON s.agent_id = v.agent_id AND s.version = v.version
        WHERE v.agent_id = ${agentId} ORDER BY v.version DESC LIMIT 100`
    })

    const lastRuns = SqlSchema.findAll({
      Request: Schema.Struct({ agentId: AgentId, limit: Schema.Number }),
      Result: RunRow,
      execute: ({ agentId, limit }) => sql`
        SELECT id, agent_version, status, failure_code, failure_message, payer_id, session_id, input_tokens,
               output_tokens, credits_charged::text AS credits_charged, created_at, finished_at
        FROM runs WHERE agent_id = ${agentId} ORDER BY created_at DESC, id DESC LIMIT ${limit}`
    })

    return {
      versions: (agentId: AgentId) => Effect.orDie(versions(agentId)),
      lastRuns: (agentId: AgentId, limit: number) => Effect.orDie(lastRuns({ agentId, limit }))
    } as const
  })
}) {}
