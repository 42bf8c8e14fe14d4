import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import { Effect, Option, Schema } from "effect"
import { InvalidRequest } from "../platform/Errors.js"
import type { AgentId, EvalDatasetId, UserId } from "../platform/Ids.js"
import type { AgentConfig } from "./Agent.js"
import { EvalGateFailed } from "./Domain.js"
import { configHash } from "./Fingerprint.js"

/**
 * The eval gate on publishing (issue 46, docs/evals.md "Publish gate"). Every path that publishes (the API, the MCP
 * `publish_agent` tool, the studio through the API) goes through `Agents.publish`, which asks this before the draft
 * is frozen as a version: the gate is server-side by construction.
 *
 * "A version's pass rate" is the pass rate of the latest completed eval run of the gate's dataset on it: for the live
 * version, a run with that `version` or a run of a draft whose configuration that version froze; for the draft about
 * to be submitted, a run of the draft whose configuration is the draft's now (its fingerprint: a draft edited after
 * its run needs a new run). With no live version (a first
 * publish) there is nothing to fall below. When either run is missing the gate refuses and says which eval run to
 * start; when the draft's rate is below the live one's by more than the threshold, it refuses with both rates.
 *
 * Agents sit below evaluations in the layers (evals run experts as background runs), so these two reads of the
 * evaluation tables (migration 0028) are made here rather than through the evals domain.
 */

const Completed = Schema.Struct({
  id: Schema.String,
  version: Schema.NullOr(Schema.Number),
  rowsTotal: Schema.Number,
  rowsPassed: Schema.Number,
  credits: Schema.BigInt,
  finishedAt: Schema.NullOr(Schema.DateFromSelf)
})

export class EvalGate extends Effect.Service<EvalGate>()("atrium/agents/EvalGate", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    /** The latest completed run of the dataset on this version, or on a draft whose configuration was the same. */
    const latest = SqlSchema.findOne({
      Request: Schema.Struct({ datasetId: Schema.String, agentId: Schema.String, version: Schema.NullOr(Schema.Number), configHash: Schema.String }),
      Result: Completed,
      execute: (q) =>
        sql`
          SELECT e.id, e.version, e.rows_total, e.finished_at,
                 (SELECT count(*) FROM eval_results x WHERE x.eval_run_id = e.id AND x.passed)::int AS rows_passed,
                 (SELECT coalesce(sum(x.credits), 0) FROM eval_results x WHERE x.eval_run_id = e.id)::bigint AS credits
          FROM eval_runs e
          WHERE e.dataset_id = ${q.datasetId} AND e.agent_id = ${q.agentId} AND e.status = 'completed'
            AND ((e.version IS NULL AND e.config_hash = ${q.configHash}) ${q.version === null ? sql`` : sql`OR e.version = ${q.version}`})
          ORDER BY e.finished_at DESC LIMIT 1`
    })

    const versionConfig = SqlSchema.findOne({
      Request: Schema.Struct({ agentId: Schema.String, version: Schema.Number }),
      Result: Schema.Struct({ config: Schema.Unknown }),
      execute: (q) => sql`SELECT config FROM agent_versions WHERE agent_id = ${q.agentId} AND version = ${q.version}`
    })

    const datasetOf = SqlSchema.findOne({
      Request: Schema.Struct({ id: Schema.String, agentId: Schema.String, ownerId: Schema.String }),
      Result: Schema.Struct({ id: Schema.String, name: Schema.String }),
      execute: (q) => sql`SELECT id, name FROM eval_datasets WHERE id = ${q.id} AND agent_id = ${q.agentId} AND owner_id = ${q.ownerId}`
    })

    const rate = (run: typeof Completed.Type) => (run.rowsTotal === 0 ? 0 : run.rowsPassed / run.rowsTotal)

    /** A gate's dataset must be one of this expert's. */
    const validate = (agentId: AgentId, ownerId: UserId, datasetId: EvalDatasetId) =>
      Effect.flatMap(Effect.orDie(datasetOf({ id: datasetId, agentId, ownerId })), (found) =>
        Option.isSome(found)
          ? Effect.void
          : Effect.fail(new InvalidRequest({ message: `Invalid request: eval_gate.dataset: no dataset ${datasetId} of this expert` })))

    /** Refuses the draft when it falls below the live version on the gate's dataset, or cannot be compared yet. */
    const check = Effect.fn("EvalGate.check")(function*(agent: {
      readonly id: AgentId
      readonly identifier: string
      readonly publishedVersion: number | null
      readonly draft: AgentConfig
    }) {
      const gate = agent.draft.eval_gate
      if (gate == null || agent.publishedVersion === null) return
      const candidate = yield* Effect.orDie(latest({ datasetId: gate.dataset, agentId: agent.id, version: null, configHash: configHash(agent.draft) }))
      // The live version's own runs, or a draft's whose configuration it froze (evaluated before it was published).
      const frozen = yield* Effect.orDie(versionConfig({ agentId: agent.id, version: agent.publishedVersion }))
      const liveHash = Option.match(frozen, {
        onNone: () => "",
        onSome: ({ config }) => configHash((typeof config === "string" ? JSON.parse(config) : config) as AgentConfig)
      })
      const live = yield* Effect.orDie(latest({ datasetId: gate.dataset, agentId: agent.id, version: agent.publishedVersion, configHash: liveHash }))
      const details = {
        dataset: gate.dataset,
        threshold: gate.threshold,
        pass_rate: Option.isSome(candidate) ? rate(candidate.value) : null,
        live_pass_rate: Option.isSome(live) ? rate(live.value) : null,
        live_version: agent.publishedVersion,
        eval_run: Option.isSome(candidate) ? candidate.value.id : null,
        live_eval_run: Option.isSome(live) ? live.value.id : null
      }
      if (Option.isNone(candidate)) {
        return yield* new EvalGateFailed({
          message: `The eval gate of ${agent.identifier} needs a completed eval run of dataset ${gate.dataset} on the draft as it is now ` +
            `(POST /v1/evals/runs {"dataset": "${gate.dataset}", "agent": "${agent.identifier}"}) before it can be submitted.`,
          details
        })
      }
      if (Option.isNone(live)) {
        return yield* new EvalGateFailed({
          message: `The eval gate of ${agent.identifier} compares with the live version ${agent.publishedVersion}, which has no completed ` +
            `eval run of dataset ${gate.dataset} (POST /v1/evals/runs with "version": ${agent.publishedVersion}).`,
          details
        })
      }
      const drop = rate(live.value) - rate(candidate.value)
      // A float's last bit must not refuse a drop that equals the threshold.
      if (drop > gate.threshold + 1e-9) {
        return yield* new EvalGateFailed({
          message: `The draft of ${agent.identifier} passes ${(rate(candidate.value) * 100).toFixed(1)}% of dataset ${gate.dataset}, ` +
            `below the live version's ${(rate(live.value) * 100).toFixed(1)}% by more than the gate's threshold of ${(gate.threshold * 100).toFixed(1)} points.`,
          details
        })
      }
    })

    const hashOf = (config: unknown) => configHash((typeof config === "string" ? JSON.parse(config) : config) as AgentConfig)

    /** The eval run a version is measured by: one of that version, or of a draft whose configuration it froze. */
    const measured = (agentId: AgentId, datasetId: EvalDatasetId, version: number) =>
      Effect.gen(function*() {
        const frozen = yield* Effect.orDie(versionConfig({ agentId, version }))
        const hash = Option.match(frozen, { onNone: () => "", onSome: ({ config }) => hashOf(config) })
        const run = yield* Effect.orDie(latest({ datasetId, agentId, version, configHash: hash }))
        return Option.match(run, {
          onNone: () => null,
          onSome: (r) => ({
            eval_run: r.id,
            pass_rate: rate(r),
            rows_total: r.rowsTotal,
            rows_passed: r.rowsPassed,
            credits: r.credits,
            finished_at: r.finishedAt?.toISOString() ?? null
          })
        })
      })

    /**
     * The gate's scorecard of a submitted version for the review console (docs/evals.md, "Publish gate"): the gate's
     * dataset and threshold, and the pass rates the gate compared, each with its eval run and what it cost. Null when
     * the expert has no gate. The same reads as `check`, by version: what the creator's submission passed.
     */
    const scorecard = Effect.fn("EvalGate.scorecard")(function*(agent: {
      readonly id: AgentId
      readonly ownerId: UserId
      readonly publishedVersion: number | null
      readonly draft: AgentConfig
    }, submittedVersion: number) {
      const gate = agent.draft.eval_gate
      if (gate == null) return null
      const dataset = yield* Effect.orDie(datasetOf({ id: gate.dataset, agentId: agent.id, ownerId: agent.ownerId }))
      const submitted = yield* measured(agent.id, gate.dataset, submittedVersion)
      const live = agent.publishedVersion === null || agent.publishedVersion === submittedVersion
        ? null
        : yield* measured(agent.id, gate.dataset, agent.publishedVersion)
      return {
        dataset: gate.dataset,
        dataset_name: Option.match(dataset, { onNone: () => null, onSome: (d) => d.name }),
        threshold: gate.threshold,
        submitted, live, live_version: agent.publishedVersion === submittedVersion ? null : agent.publishedVersion }
    })

    return { check, validate, scorecard } as const
  })
}) {}
