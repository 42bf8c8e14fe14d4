import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import { Effect, Option, Schema } from "effect"
import { AgentId, EvalDatasetId, UserId } from "../platform/Ids.js"
import { RunId } from "../runtime/Domain.js"
import { storableValue } from "../platform/Storable.js"
import { EvalRowId, EvalRunId } from "./Domain.js"
import type { Expectations } from "./Graders.js"
import type { StoredInput, StoredRow } from "./Rows.js"

/** Datasets, rows, eval runs and their results (migration 0028). SQL errors are defects here. */

/** JSON columns come back parsed from PostgreSQL and as text from some drivers. */
const Json = Schema.transform(Schema.Unknown, Schema.Unknown, {
  decode: (value) => (typeof value === "string" ? JSON.parse(value) : value),
  encode: (value) => value
})

export const DatasetRow = Schema.Struct({
  id: EvalDatasetId,
  agentId: AgentId,
  agent: Schema.String,
  ownerId: UserId,
  name: Schema.String,
  rows: Schema.Number,
  createdAt: Schema.DateFromSelf
})
export type DatasetRow = typeof DatasetRow.Type

export const EvalRowRow = Schema.Struct({
  id: EvalRowId,
  position: Schema.Number,
  input: Json,
  expected: Json,
  source: Schema.String,
  createdAt: Schema.DateFromSelf
})
export type EvalRowRow = typeof EvalRowRow.Type

export const EvalRunRow = Schema.Struct({
  id: EvalRunId,
  datasetId: EvalDatasetId,
  agentId: AgentId,
  agent: Schema.String,
  version: Schema.NullOr(Schema.Number),
  configHash: Schema.String,
  ownerId: UserId,
  graders: Json,
  concurrency: Schema.Number,
  status: Schema.Literal("running", "completed", "failed", "cancelled"),
  estimateMicros: Schema.BigInt,
  rowsTotal: Schema.Number,
  rowsDone: Schema.Number,
  rowsPassed: Schema.Number,
  credits: Schema.BigInt,
  meanLatencyMs: Schema.NullOr(Schema.Number),
  createdAt: Schema.DateFromSelf,
  finishedAt: Schema.NullOr(Schema.DateFromSelf)
})
export type EvalRunRow = typeof EvalRunRow.Type

export const ResultRow = Schema.Struct({
  position: Schema.Number,
  rowId: EvalRowId,
  runId: RunId,
  /** `cancelled` is never stored: a row of a cancelled eval run that was not graded is shown so (Evals.results). */
  status: Schema.Literal("pending", "running", "judging", "graded", "cancelled"),
  passed: Schema.NullOr(Schema.Boolean),
  score: Schema.NullOr(Schema.Number),
  explanation: Schema.NullOr(Schema.String),
  grades: Schema.NullOr(Json),
  credits: Schema.BigInt,
  latencyMs: Schema.NullOr(Schema.Number),
  output: Schema.NullOr(Schema.String),
  traceId: Schema.NullOr(Schema.String)
})
export type ResultRow = typeof ResultRow.Type

/** A result not graded yet, with its row and the state of its run (and its judge's run). */
export const OpenResult = Schema.Struct({
  position: Schema.Number,
  rowId: EvalRowId,
  runId: RunId,
  judgeRunId: Schema.NullOr(RunId),
  status: Schema.Literal("pending", "running", "judging"),
  startedAt: Schema.NullOr(Schema.DateFromSelf),
  grades: Schema.NullOr(Json),
  input: Json,
  expected: Json,
  runStatus: Schema.NullOr(Schema.String),
  runOutput: Schema.NullOr(Schema.String),
  runCredits: Schema.NullOr(Schema.BigInt),
  runFailure: Schema.NullOr(Schema.String),
  runStartedAt: Schema.NullOr(Schema.DateFromSelf),
  runFinishedAt: Schema.NullOr(Schema.DateFromSelf),
  judgeStatus: Schema.NullOr(Schema.String),
  judgeOutput: Schema.NullOr(Schema.String),
  judgeCredits: Schema.NullOr(Schema.BigInt)
})
export type OpenResult = typeof OpenResult.Type & { readonly input: StoredInput; readonly expected: Expectations }

const runColumns = (sql: SqlClient.SqlClient) =>
  sql`e.id, e.dataset_id, e.agent_id, e.agent, e.version, e.config_hash, e.owner_id, e.graders, e.concurrency, e.status,
      e.estimate_micros, e.rows_total, e.created_at, e.finished_at,
      (SELECT count(*) FROM eval_results x WHERE x.eval_run_id = e.id AND x.status = 'graded')::int AS rows_done,
      (SELECT count(*) FROM eval_results x WHERE x.eval_run_id = e.id AND x.passed)::int AS rows_passed,
      (SELECT coalesce(sum(CASE WHEN x.status = 'graded' THEN x.credits
                                ELSE coalesce(r.credits_charged, 0) + coalesce(j.credits_charged, 0) END), 0)
         FROM eval_results x LEFT JOIN runs r ON r.id = x.run_id LEFT JOIN runs j ON j.id = x.judge_run_id
         WHERE x.eval_run_id = e.id)::bigint AS credits,
      (SELECT avg(x.latency_ms) FROM eval_results x WHERE x.eval_run_id = e.id AND x.status = 'graded')::float8 AS mean_latency_ms`

export class EvalsRepo extends Effect.Service<EvalsRepo>()("atrium/evals/EvalsRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const datasetColumns = sql`d.id, d.agent_id, a.identifier AS agent, d.owner_id, d.name, d.created_at,
      (SELECT count(*) FROM eval_rows r WHERE r.dataset_id = d.id)::int AS rows`

    const insertDataset = SqlSchema.void({
      Request: Schema.Struct({ id: EvalDatasetId, agentId: AgentId, ownerId: UserId, name: Schema.String }),
      execute: (d) => sql`INSERT INTO eval_datasets (id, agent_id, owner_id, name) VALUES (${d.id}, ${d.agentId}, ${d.ownerId}, ${d.name})`
    })

    // The owner is in the statement: another account's dataset is simply not found.
    const dataset = SqlSchema.findOne({
      Request: Schema.Struct({ id: EvalDatasetId, ownerId: UserId }),
      Result: DatasetRow,
      execute: ({ id, ownerId }) =>
        sql`SELECT ${datasetColumns} FROM eval_datasets d JOIN agents a ON a.id = d.agent_id WHERE d.id = ${id} AND d.owner_id = ${ownerId}`
    })

    const datasets = SqlSchema.findAll({
      Request: Schema.Struct({ ownerId: UserId, agentId: Schema.NullOr(AgentId), after: Schema.NullOr(EvalDatasetId), limit: Schema.Number }),
      Result: DatasetRow,
      execute: (q) =>
        sql`
          SELECT ${datasetColumns} FROM eval_datasets d JOIN agents a ON a.id = d.agent_id
          WHERE d.owner_id = ${q.ownerId}
            ${q.agentId === null ? sql`` : sql`AND d.agent_id = ${q.agentId}`}
            ${q.after === null ? sql`` : sql`AND (d.created_at, d.id) < (SELECT created_at, id FROM eval_datasets WHERE id = ${q.after} AND owner_id = ${q.ownerId})`}
          ORDER BY d.created_at DESC, d.id DESC LIMIT ${q.limit + 1}`
    })

    const deleteDataset = SqlSchema.findAll({
      Request: Schema.Struct({ id: EvalDatasetId, ownerId: UserId }),
      Result: Schema.Struct({ id: EvalDatasetId }),
      execute: ({ id, ownerId }) => sql`DELETE FROM eval_datasets WHERE id = ${id} AND owner_id = ${ownerId} RETURNING id`
    })

    /**
     * Rows appended after the dataset's last, in one statement; a row whose `source_ref` the dataset has already
     * (a thumbs-down imported before) is left out. Answers the ids written.
     */
    const insertRows = (datasetId: EvalDatasetId, rows: ReadonlyArray<StoredRow & { id: EvalRowId; sourceRef?: string | undefined }>, source: string) =>
      Effect.gen(function*() {
        if (rows.length === 0) return [] as Array<EvalRowId>
        const values = rows.map((row, i) => ({
          id: row.id,
          dataset_id: datasetId,
          offset: i,
          input: JSON.stringify(row.input),
          expected: JSON.stringify(row.expected),
          source,
          source_ref: row.sourceRef ?? null
        }))
        // The ids returned are among those given.
        const written = yield* sql<{ id: EvalRowId }>`
          INSERT INTO eval_rows (id, dataset_id, position, input, expected, source, source_ref)
          SELECT v.id, v.dataset_id,
                 (SELECT coalesce(max(position), 0) FROM eval_rows WHERE dataset_id = ${datasetId}) + 1 + v.offset,
                 v.input::jsonb, v.expected::jsonb, v.source, v.source_ref
          FROM jsonb_to_recordset(${JSON.stringify(values)}::jsonb)
            AS v(id text, dataset_id text, "offset" int, input text, expected text, source text, source_ref text)
          ON CONFLICT (dataset_id, source_ref) WHERE source_ref IS NOT NULL DO NOTHING
          RETURNING id`
        return written.map((row) => row.id)
      }).pipe(Effect.orDie)

    const rowsPage = SqlSchema.findAll({
      Request: Schema.Struct({ datasetId: EvalDatasetId, after: Schema.NullOr(EvalRowId), limit: Schema.Number }),
      Result: EvalRowRow,
      execute: (q) =>
        sql`
          SELECT id, position::int AS position, input, expected, source, created_at FROM eval_rows
          WHERE dataset_id = ${q.datasetId}
            ${q.after === null ? sql`` : sql`AND position > (SELECT position FROM eval_rows WHERE id = ${q.after} AND dataset_id = ${q.datasetId})`}
          ORDER BY position LIMIT ${q.limit + 1}`
    })

    const rowExists = SqlSchema.findOne({
      Request: Schema.Struct({ datasetId: EvalDatasetId, id: EvalRowId }),
      Result: Schema.Struct({ id: EvalRowId }),
      execute: (q) => sql`SELECT id FROM eval_rows WHERE dataset_id = ${q.datasetId} AND id = ${q.id}`
    })

    const allRows = SqlSchema.findAll({
      Request: EvalDatasetId,
      Result: EvalRowRow,
      execute: (datasetId) =>
        sql`SELECT id, position::int AS position, input, expected, source, created_at FROM eval_rows WHERE dataset_id = ${datasetId} ORDER BY position`
    })

    /** An eval run and one pending result per row, in one transaction. */
    const insertRun = (run: {
      id: EvalRunId
      datasetId: EvalDatasetId
      agentId: AgentId
      agent: string
      version: number | null
      configHash: string
      ownerId: UserId
      graders: unknown
      concurrency: number
      estimateMicros: bigint
      results: ReadonlyArray<{ position: number; rowId: EvalRowId; runId: RunId }>
    }) =>
      sql.withTransaction(Effect.gen(function*() {
        yield* sql`
          INSERT INTO eval_runs (id, dataset_id, agent_id, agent, version, config_hash, owner_id, graders, concurrency, status,
                                 estimate_micros, rows_total)
          VALUES (${run.id}, ${run.datasetId}, ${run.agentId}, ${run.agent}, ${run.version}, ${run.configHash}, ${run.ownerId},
                  ${JSON.stringify(run.graders)}::jsonb, ${run.concurrency}, 'running', ${run.estimateMicros.toString()}, ${run.results.length})`
        for (let at = 0; at < run.results.length; at += 500) {
          const chunk = run.results.slice(at, at + 500).map((r) => ({ position: r.position, row_id: r.rowId, run_id: r.runId }))
          yield* sql`
            INSERT INTO eval_results (eval_run_id, position, row_id, run_id, status)
            SELECT ${run.id}, v.position, v.row_id, v.run_id, 'pending'
            FROM jsonb_to_recordset(${JSON.stringify(chunk)}::jsonb) AS v(position int, row_id text, run_id text)`
        }
      })).pipe(Effect.orDie)

    const evalRun = SqlSchema.findOne({
      Request: Schema.Struct({ id: EvalRunId, ownerId: UserId }),
      Result: EvalRunRow,
      execute: ({ id, ownerId }) => sql`SELECT ${runColumns(sql)} FROM eval_runs e WHERE e.id = ${id} AND e.owner_id = ${ownerId}`
    })

    const evalRuns = SqlSchema.findAll({
      Request: Schema.Struct({
        ownerId: UserId,
        datasetId: Schema.NullOr(EvalDatasetId),
        agent: Schema.NullOr(Schema.String),
        after: Schema.NullOr(EvalRunId),
        limit: Schema.Number
      }),
      Result: EvalRunRow,
      execute: (q) =>
        sql`
          SELECT ${runColumns(sql)} FROM eval_runs e
          WHERE e.owner_id = ${q.ownerId}
            ${q.datasetId === null ? sql`` : sql`AND e.dataset_id = ${q.datasetId}`}
            ${q.agent === null ? sql`` : sql`AND e.agent = ${q.agent}`}
            ${q.after === null ? sql`` : sql`AND (e.created_at, e.id) < (SELECT created_at, id FROM eval_runs WHERE id = ${q.after} AND owner_id = ${q.ownerId})`}
          ORDER BY e.created_at DESC, e.id DESC LIMIT ${q.limit + 1}`
    })

    const active = SqlSchema.findAll({
      Request: Schema.Number,
      Result: EvalRunRow,
      execute: (limit) => sql`SELECT ${runColumns(sql)} FROM eval_runs e WHERE e.status = 'running' ORDER BY e.created_at LIMIT ${limit}`
    })

    const open = SqlSchema.findAll({
      Request: EvalRunId,
      Result: OpenResult,
      execute: (evalRunId) =>
        sql`
          SELECT x.position, x.row_id, x.run_id, x.judge_run_id, x.status, x.started_at, x.grades, w.input, w.expected,
                 r.status AS run_status, r.output AS run_output, r.credits_charged AS run_credits,
                 r.failure_code AS run_failure, r.started_at AS run_started_at, r.finished_at AS run_finished_at,
                 j.status AS judge_status, j.output AS judge_output, j.credits_charged AS judge_credits
          FROM eval_results x
          JOIN eval_rows w ON w.id = x.row_id
          LEFT JOIN runs r ON r.id = x.run_id
          LEFT JOIN runs j ON j.id = x.judge_run_id
          WHERE x.eval_run_id = ${evalRunId} AND x.status <> 'graded'
          ORDER BY x.position`
    })

    // Both marks hold only while the eval run is running: a cancelled one starts nothing more (Evals.cancelRun).
    const markRunning = SqlSchema.findAll({
      Request: Schema.Struct({ evalRunId: EvalRunId, position: Schema.Number }),
      Result: Schema.Struct({ position: Schema.Number }),
      execute: (q) =>
        sql`
          UPDATE eval_results SET status = 'running', started_at = now()
          WHERE eval_run_id = ${q.evalRunId} AND position = ${q.position} AND status = 'pending'
            AND EXISTS (SELECT 1 FROM eval_runs e WHERE e.id = ${q.evalRunId} AND e.status = 'running')
          RETURNING position`
    })

    const markJudging = SqlSchema.findAll({
      Request: Schema.Struct({ evalRunId: EvalRunId, position: Schema.Number, judgeRunId: RunId, grades: Schema.Unknown }),
      Result: Schema.Struct({ position: Schema.Number }),
      execute: (q) =>
        sql`
          UPDATE eval_results SET status = 'judging', judge_run_id = ${q.judgeRunId}, grades = ${JSON.stringify(storableValue(q.grades))}::jsonb
          WHERE eval_run_id = ${q.evalRunId} AND position = ${q.position} AND status = 'running'
            AND EXISTS (SELECT 1 FROM eval_runs e WHERE e.id = ${q.evalRunId} AND e.status = 'running')
          RETURNING position`
    })

    /** Cancels a running eval run of `ownerId`'s; answers whether this call did (false: not running, or not theirs). */
    const cancel = SqlSchema.findAll({
      Request: Schema.Struct({ id: EvalRunId, ownerId: UserId }),
      Result: Schema.Struct({ id: EvalRunId }),
      execute: (q) =>
        sql`UPDATE eval_runs SET status = 'cancelled', finished_at = now() WHERE id = ${q.id} AND owner_id = ${q.ownerId} AND status = 'running' RETURNING id`
    })

    /** The runs under way of an eval run's rows: each row's run, and its judge's run once started. */
    const inFlight = SqlSchema.findAll({
      Request: EvalRunId,
      Result: Schema.Struct({ runId: RunId, judgeRunId: Schema.NullOr(RunId) }),
      execute: (evalRunId) =>
        sql`SELECT run_id, judge_run_id FROM eval_results WHERE eval_run_id = ${evalRunId} AND status IN ('running', 'judging')`
    })

    const status = SqlSchema.findOne({
      Request: EvalRunId,
      Result: Schema.Struct({ status: Schema.String }),
      execute: (id) => sql`SELECT status FROM eval_runs WHERE id = ${id}`
    })

    const grade = SqlSchema.void({
      Request: Schema.Struct({
        evalRunId: EvalRunId,
        position: Schema.Number,
        passed: Schema.Boolean,
        score: Schema.Number,
        explanation: Schema.String,
        grades: Schema.Unknown,
        credits: Schema.BigIntFromSelf,
        latencyMs: Schema.NullOr(Schema.Number),
        output: Schema.NullOr(Schema.String)
      }),
      execute: (q) =>
        sql`
          UPDATE eval_results SET status = 'graded', passed = ${q.passed}, score = ${q.score}, explanation = ${q.explanation},
                 grades = ${JSON.stringify(storableValue(q.grades))}::jsonb, credits = ${q.credits.toString()}, latency_ms = ${q.latencyMs},
                 output = ${q.output}
          WHERE eval_run_id = ${q.evalRunId} AND position = ${q.position} AND status <> 'graded'`
    })

    const finish = SqlSchema.void({
      Request: Schema.Struct({ id: EvalRunId, status: Schema.Literal("completed", "failed", "cancelled") }),
      execute: (q) => sql`UPDATE eval_runs SET status = ${q.status}, finished_at = now() WHERE id = ${q.id} AND status = 'running'`
    })

    const results = SqlSchema.findAll({
      Request: Schema.Struct({ evalRunId: EvalRunId, after: Schema.Number, limit: Schema.Number }),
      Result: ResultRow,
      execute: (q) =>
        sql`
          SELECT x.position, x.row_id, x.run_id, x.status, x.passed, x.score, x.explanation, x.grades, x.credits, x.latency_ms,
                 x.output, t.trace_id
          FROM eval_results x LEFT JOIN traces t ON t.run_id = x.run_id
          WHERE x.eval_run_id = ${q.evalRunId} AND x.position > ${q.after}
          ORDER BY x.position LIMIT ${q.limit + 1}`
    })

    const allResults = SqlSchema.findAll({
      Request: EvalRunId,
      Result: ResultRow,
      execute: (evalRunId) =>
        sql`
          SELECT x.position, x.row_id, x.run_id, x.status, x.passed, x.score, x.explanation, x.grades, x.credits, x.latency_ms,
                 x.output, NULL::text AS trace_id
          FROM eval_results x WHERE x.eval_run_id = ${evalRunId} ORDER BY x.position`
    })

    /**
     * The pass rate the gate reads (docs/evals.md, "Publish gate"): the latest completed run of `datasetId` on this
     * version, or on the draft whose configuration has this fingerprint.
     */
    const latestCompleted = SqlSchema.findOne({
      Request: Schema.Struct({
        datasetId: EvalDatasetId,
        agentId: AgentId,
        version: Schema.NullOr(Schema.Number),
        configHash: Schema.NullOr(Schema.String)
      }),
      Result: EvalRunRow,
      execute: (q) =>
        sql`
          SELECT ${runColumns(sql)} FROM eval_runs e
          WHERE e.dataset_id = ${q.datasetId} AND e.agent_id = ${q.agentId} AND e.status = 'completed'
            AND ${q.version === null ? sql`e.version IS NULL AND e.config_hash = ${q.configHash ?? ""}` : sql`e.version = ${q.version}`}
          ORDER BY e.finished_at DESC LIMIT 1`
    })

    /** The actual credits over the estimate of the expert's latest completed eval run: the estimate's calibration. */
    const calibration = SqlSchema.findOne({
      Request: AgentId,
      Result: Schema.Struct({ estimateMicros: Schema.BigInt, credits: Schema.BigInt }),
      execute: (agentId) =>
        sql`
          SELECT e.estimate_micros, (SELECT coalesce(sum(x.credits), 0) FROM eval_results x WHERE x.eval_run_id = e.id)::bigint AS credits
          FROM eval_runs e WHERE e.agent_id = ${agentId} AND e.status = 'completed' AND e.estimate_micros > 0
          ORDER BY e.finished_at DESC LIMIT 1`
    })

    /**
     * Thumbs-down answers of an expert whose end users shared them (issue 48's `shared`): only those rows are read,
     * the statement's own condition, so feedback not shared never leaves the database.
     */
    const sharedThumbsDown = SqlSchema.findAll({
      Request: Schema.Struct({ agentId: AgentId, limit: Schema.Number }),
      Result: Schema.Struct({
        sessionId: Schema.String,
        turn: Schema.Number,
        reason: Schema.NullOr(Schema.String),
        messages: Json
      }),
      execute: (q) =>
        sql`
          SELECT f.session_id, f.turn, f.reason, t.messages
          FROM turn_feedback f JOIN session_turns t ON t.session_id = f.session_id AND t.turn = f.turn
          WHERE f.agent_id = ${q.agentId} AND f.rating = 'down' AND f.shared
          ORDER BY f.updated_at DESC LIMIT ${q.limit}`
    })

    return {
      sharedThumbsDown: (agentId: AgentId, limit: number) => Effect.orDie(sharedThumbsDown({ agentId, limit })),
      insertDataset: (d: Parameters<typeof insertDataset>[0]) => Effect.orDie(insertDataset(d)),
      dataset: (id: EvalDatasetId, ownerId: UserId) => Effect.orDie(dataset({ id, ownerId })),
      datasets: (q: Parameters<typeof datasets>[0]) => Effect.orDie(datasets(q)),
      deleteDataset: (id: EvalDatasetId, ownerId: UserId) => Effect.map(Effect.orDie(deleteDataset({ id, ownerId })), (rows) => rows.length > 0),
      insertRows,
      rowsPage: (q: Parameters<typeof rowsPage>[0]) => Effect.orDie(rowsPage(q)),
      rowExists: (datasetId: EvalDatasetId, id: EvalRowId) => Effect.orDie(rowExists({ datasetId, id })),
      allRows: (datasetId: EvalDatasetId) => Effect.orDie(allRows(datasetId)),
      insertRun,
      evalRun: (id: EvalRunId, ownerId: UserId) => Effect.orDie(evalRun({ id, ownerId })),
      evalRuns: (q: Parameters<typeof evalRuns>[0]) => Effect.orDie(evalRuns(q)),
      active: (limit: number) => Effect.orDie(active(limit)),
      open: (evalRunId: EvalRunId) => Effect.map(Effect.orDie(open(evalRunId)), (rows) => rows as ReadonlyArray<OpenResult>),
      markRunning: (evalRunId: EvalRunId, position: number) => Effect.map(Effect.orDie(markRunning({ evalRunId, position })), (rows) => rows.length > 0),
      markJudging: (q: Parameters<typeof markJudging>[0]) => Effect.map(Effect.orDie(markJudging(q)), (rows) => rows.length > 0),
      cancel: (id: EvalRunId, ownerId: UserId) => Effect.map(Effect.orDie(cancel({ id, ownerId })), (rows) => rows.length > 0),
      inFlight: (evalRunId: EvalRunId) => Effect.orDie(inFlight(evalRunId)),
      isRunning: (id: EvalRunId) => Effect.map(Effect.orDie(status(id)), (row) => Option.isSome(row) && row.value.status === "running"),
      grade: (q: Parameters<typeof grade>[0]) => Effect.orDie(grade(q)),
      finish: (id: EvalRunId, status: "completed" | "failed" | "cancelled") => Effect.orDie(finish({ id, status })),
      results: (q: Parameters<typeof results>[0]) => Effect.orDie(results(q)),
      allResults: (evalRunId: EvalRunId) => Effect.orDie(allResults(evalRunId)),
      latestCompleted: (q: Parameters<typeof latestCompleted>[0]) => Effect.orDie(latestCompleted(q)),
      calibration: (agentId: AgentId) => Effect.orDie(calibration(agentId))
    } as const
  })
}) {}
