import * as SqlClient from "@effect/sql/SqlClient"
import type * as SqlError from "@effect/sql/SqlError"
import * as SqlSchema from "@effect/sql/SqlSchema"
import { Effect, Option, Schema } from "effect"
import { UserId } from "../platform/Ids.js"
import { Json } from "../platform/Rows.js"
import { RunId } from "../runtime/Domain.js"
import type { SpanRecord } from "../runtime/Tracing.js"
import type { Reader } from "./Policy.js"

/**
 * The stored traces (migration 0024): spans written in batches by the writer, one statement per batch whatever its
 * size (the batch goes as one JSON parameter), and a summary row per root run for search. SQL errors: the writer
 * keeps them (it retries a batch), the reads make them defects.
 */

const SpanRow = Schema.Struct({
  traceId: Schema.String,
  spanId: Schema.String,
  parentSpanId: Schema.NullOr(Schema.String),
  runId: Schema.String,
  name: Schema.String,
  kind: Schema.String,
  startTime: Schema.DateFromSelf,
  endTime: Schema.DateFromSelf,
  status: Schema.Literal("ok", "error"),
  attributes: Json(Schema.Record({ key: Schema.String, value: Schema.Unknown })),
  credits: Schema.BigInt
})
export type SpanRow = typeof SpanRow.Type

const SummaryRow = Schema.Struct({
  traceId: Schema.String,
  runId: Schema.String,
  agent: Schema.String,
  agentVersion: Schema.NullOr(Schema.Number),
  ownerId: Schema.String,
  payerId: Schema.String,
  endUserId: Schema.String,
  sessionId: Schema.NullOr(Schema.String),
  status: Schema.Literal("ok", "error"),
  errorType: Schema.NullOr(Schema.String),
  credits: Schema.BigInt,
  tools: Schema.Array(Schema.String),
  spanCount: Schema.Number,
  startedAt: Schema.DateFromSelf,
  endedAt: Schema.DateFromSelf
})
export type SummaryRow = typeof SummaryRow.Type


export interface Search {
  readonly agent: string | null
  readonly version: number | null
  readonly session: string | null
  readonly tool: string | null
  readonly status: "ok" | "error" | null
  readonly minCredits: bigint | null
  readonly maxCredits: bigint | null
  readonly startedAfter: Date | null
  readonly startedBefore: Date | null
  /** The last trace of the previous page. */
  readonly cursor: string | null
  readonly limit: number
}

const SUMMARY = `trace_id, run_id, agent, agent_version, owner_id, payer_id, end_user_id, session_id, status, error_type,
  credits::text AS credits, tools, span_count, started_at, ended_at`

/** Nanoseconds to microseconds, as text (JSON has no bigint). */
const micros = (ns: bigint) => (ns / 1000n).toString()

export class TracesRepo extends Effect.Service<TracesRepo>()("atrium/traces/TracesRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    /**
     * Writes a batch: its spans, then a summary for each root among them (from every span of its trace, so spans
     * written by earlier batches count, and a run executed again after a fault sums both attempts).
     */
    const write = (spans: ReadonlyArray<SpanRecord>) =>
      Effect.gen(function*() {
        const rows = spans.map((span) => ({
          trace_id: span.traceId,
          span_id: span.spanId,
          parent_span_id: span.parentSpanId,
          run_id: span.run.runId,
          name: span.name,
          kind: span.kind,
          start_us: micros(span.startTime),
          end_us: micros(span.endTime),
          status: span.status,
          attributes: span.attributes,
          credits: span.credits.toString()
        }))
        // A run executed again after a fault ends a root span per attempt, under one trace: its summary takes the last
        // that ended, from the first start (as when the attempts are written in two batches). Both in one statement,
        // PostgreSQL refused the whole batch (a row updated twice, error 21000), and the writer put it back in front:
        // no trace of this process was written again.
        const lastRoots = new Map<string, SpanRecord>()
        const firstStarts = new Map<string, bigint>()
        for (const span of spans) {
          if (span.parentSpanId !== null) continue
          const seen = lastRoots.get(span.traceId)
          if (seen === undefined || span.endTime >= seen.endTime) lastRoots.set(span.traceId, span)
          const start = firstStarts.get(span.traceId)
          if (start === undefined || span.startTime < start) firstStarts.set(span.traceId, span.startTime)
        }
        const roots = [...lastRoots.values()].map((span) => ({
          trace_id: span.traceId,
          run_id: span.run.runId,
          agent_id: span.run.agentId,
          agent: span.run.agent,
          agent_version: span.run.agentVersion,
          owner_id: span.run.ownerId,
          payer_id: span.run.payerId,
          end_user_id: span.run.endUserId,
          session_id: span.run.sessionId,
          status: span.status,
          error_type: (span.attributes["error.type"] as string | undefined) ?? null,
          start_us: micros(firstStarts.get(span.traceId)!),
          end_us: micros(span.endTime)
        }))
        const spansJson = JSON.stringify(rows)
        const insertSpans = sql`
          INSERT INTO trace_spans (trace_id, span_id, parent_span_id, run_id, name, kind, start_time, end_time, status, attributes, credits)
          SELECT trace_id, span_id, parent_span_id, run_id, name, kind,
            to_timestamp(start_us::double precision / 1000000), to_timestamp(end_us::double precision / 1000000),
            status, attributes, credits::bigint
          FROM jsonb_to_recordset(${spansJson}::jsonb) AS x(trace_id text, span_id text, parent_span_id text,
            run_id text, name text, kind text, start_us bigint, end_us bigint, status text, attributes jsonb, credits text)
          ON CONFLICT (trace_id, span_id) DO NOTHING
          RETURNING trace_id, credits, attributes->>'gen_ai.tool.name' AS tool`
        if (roots.length === 0) {
          yield* insertSpans
          return
        }
        // One statement (one round trip, no transaction): the summary reads the spans stored before and those this
        // statement inserts (a CTE's rows are not yet visible to the table in the same statement).
        yield* sql`
          WITH inserted AS (${insertSpans}),
          trace_rows AS (
            SELECT trace_id, credits, attributes->>'gen_ai.tool.name' AS tool FROM trace_spans
            WHERE trace_id IN (SELECT r.trace_id FROM jsonb_to_recordset(${JSON.stringify(roots)}::jsonb) AS r(trace_id text))
            UNION ALL SELECT trace_id, credits, tool FROM inserted
          )
          INSERT INTO traces (trace_id, run_id, agent_id, agent, agent_version, owner_id, payer_id, end_user_id, session_id,
            status, error_type, credits, tools, span_count, started_at, ended_at)
          SELECT r.trace_id, r.run_id, r.agent_id, r.agent, r.agent_version, r.owner_id, r.payer_id, r.end_user_id, r.session_id,
            r.status, r.error_type, s.credits, s.tools, s.span_count,
            to_timestamp(r.start_us::double precision / 1000000), to_timestamp(r.end_us::double precision / 1000000)
          FROM jsonb_to_recordset(${JSON.stringify(roots)}::jsonb) AS r(trace_id text, run_id text, agent_id text, agent text,
            agent_version integer, owner_id text, payer_id text, end_user_id text, session_id text, status text,
            error_type text, start_us bigint, end_us bigint)
          CROSS JOIN LATERAL (
            SELECT coalesce(sum(t.credits), 0)::bigint AS credits, count(*)::integer AS span_count,
              coalesce(array_agg(DISTINCT t.tool) FILTER (WHERE t.tool IS NOT NULL), '{}') AS tools
            FROM trace_rows t WHERE t.trace_id = r.trace_id
          ) s
          ON CONFLICT (trace_id) DO UPDATE SET status = excluded.status, error_type = excluded.error_type,
            credits = excluded.credits, tools = excluded.tools, span_count = excluded.span_count,
            started_at = least(traces.started_at, excluded.started_at), ended_at = excluded.ended_at`
      })

    /** The rule of `traces/Policy.ts` as a filter: own runs, or the expert's owner's view when `asCreator`. */
    // Given the request as encoded, where the account is a plain string.
    const readable = (reader: Omit<Reader, "accountId"> & { readonly accountId: string }) =>
      reader.asCreator
        ? sql`((payer_id = ${reader.accountId} AND end_user_id = ${reader.endUserId}) OR owner_id = ${reader.accountId})`
        : sql`(payer_id = ${reader.accountId} AND end_user_id = ${reader.endUserId})`

    const summaryOfRun = SqlSchema.findOne({
      Request: Schema.Struct({ runId: RunId, accountId: UserId, endUserId: Schema.String, asCreator: Schema.Boolean }),
      Result: SummaryRow,
      // A delegated run's spans live in its root run's trace: found through them.
      execute: (q) =>
        sql`
          SELECT ${sql.literal(SUMMARY)} FROM traces
          WHERE trace_id IN (
            SELECT trace_id FROM traces WHERE run_id = ${q.runId}
            UNION SELECT trace_id FROM trace_spans WHERE run_id = ${q.runId})
            AND ${readable(q)}
          LIMIT 1`
    })
    /** The trace `runId` belongs to, when `reader` may read it. */
    const byRun = (runId: RunId, reader: Reader) => Effect.orDie(summaryOfRun({ runId, ...reader }))

    const spansOf = SqlSchema.findAll({
      Request: Schema.String,
      Result: SpanRow,
      execute: (traceId) =>
        sql`
          SELECT trace_id, span_id, parent_span_id, run_id, name, kind, start_time, end_time, status, attributes,
            credits::text AS credits
          FROM trace_spans WHERE trace_id = ${traceId} ORDER BY start_time, span_id`
    })
    const spans = (traceId: string) => Effect.orDie(spansOf(traceId))

    const searchRows = SqlSchema.findAll({
      Request: Schema.Struct({
        accountId: UserId,
        endUserId: Schema.String,
        asCreator: Schema.Boolean,
        agent: Schema.NullOr(Schema.String),
        version: Schema.NullOr(Schema.Number),
        session: Schema.NullOr(Schema.String),
        tool: Schema.NullOr(Schema.String),
        status: Schema.NullOr(Schema.Literal("ok", "error")),
        minCredits: Schema.NullOr(Schema.BigIntFromSelf),
        maxCredits: Schema.NullOr(Schema.BigIntFromSelf),
        startedAfter: Schema.NullOr(Schema.DateFromSelf),
        startedBefore: Schema.NullOr(Schema.DateFromSelf),
        cursor: Schema.NullOr(Schema.String),
        limit: Schema.Number
      }),
      Result: SummaryRow,
      execute: (q) =>
        sql`
          SELECT ${sql.literal(SUMMARY)} FROM traces
          WHERE ${readable(q)}
            ${q.agent === null ? sql`` : sql`AND agent = ${q.agent}`}
            ${q.version === null ? sql`` : sql`AND agent_version = ${q.version}`}
            ${q.session === null ? sql`` : sql`AND session_id = ${q.session}`}
            ${q.tool === null ? sql`` : sql`AND tools @> ARRAY[${q.tool}]::text[]`}
            ${q.status === null ? sql`` : sql`AND status = ${q.status}`}
            ${q.minCredits === null ? sql`` : sql`AND credits >= ${q.minCredits.toString()}::bigint`}
            ${q.maxCredits === null ? sql`` : sql`AND credits <= ${q.maxCredits.toString()}::bigint`}
            ${q.startedAfter === null ? sql`` : sql`AND started_at >= ${q.startedAfter}`}
            ${q.startedBefore === null ? sql`` : sql`AND started_at < ${q.startedBefore}`}
            ${
            q.cursor === null ? sql`` : sql`AND (started_at, trace_id) < (SELECT started_at, trace_id FROM traces WHERE trace_id = ${q.cursor})`
          }
          ORDER BY started_at DESC, trace_id DESC LIMIT ${q.limit + 1}`
    })
    /** One page of `reader`'s traces, newest first. */
    const search = (reader: Reader, query: Search) =>
      searchRows({ ...reader, ...query }).pipe(
        Effect.map((rows) => ({ data: rows.slice(0, query.limit), hasMore: rows.length > query.limit })),
        Effect.orDie
      )

    const knownTrace = SqlSchema.findOne({
      Request: Schema.String,
      Result: Schema.Struct({ traceId: Schema.String }),
      execute: (traceId) => sql`SELECT trace_id FROM traces WHERE trace_id = ${traceId}`
    })
    const exists = (traceId: string) => Effect.map(Effect.orDie(knownTrace(traceId)), Option.isSome)

    /**
     * A refusal that waiting cannot mend: the statement's data was refused (SQLSTATE classes 21, 22 and 23:
     * cardinality, data, integrity), not the database's availability.
     */
    const refusedForGood = (error: SqlError.SqlError) => {
      const code = (error.cause as { code?: unknown } | undefined)?.code
      return typeof code === "string" && /^2[123]/.test(code)
    }

    return { write, byRun, spans, search, exists, refusedForGood } as const
  })
}) {}
