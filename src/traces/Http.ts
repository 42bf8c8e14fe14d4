import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect, Layer, Option } from "effect"
import { AtriumApi } from "../Api.js"
import { AuthenticationLive } from "../identity/Authentication.js"
import { NotFound } from "../platform/Errors.js"
import { formatCredits, parseCredits } from "../platform/Money.js"
import { type SpanRow, type SummaryRow, TracesRepo } from "./Repo.js"
import { accessOf, endUserReader, type Reader, readerOf } from "./Policy.js"
import { Caller } from "../identity/Domain.js"

const spanView = (span: SpanRow) => ({
  span_id: span.spanId,
  parent_span_id: span.parentSpanId,
  run_id: span.runId,
  name: span.name,
  kind: span.kind,
  start_time: span.startTime.toISOString(),
  end_time: span.endTime.toISOString(),
  duration_ms: span.endTime.getTime() - span.startTime.getTime(),
  status: span.status,
  attributes: span.attributes,
  credits: formatCredits(span.credits)
})

const summaryView = (reader: Reader) => (row: SummaryRow) => ({
  trace_id: row.traceId,
  run_id: row.runId,
  agent: row.agent,
  version: row.agentVersion,
  session_id: row.sessionId,
  status: row.status,
  error_type: row.errorType,
  credits: formatCredits(row.credits),
  duration_ms: row.endedAt.getTime() - row.startedAt.getTime(),
  tools: row.tools,
  span_count: row.spanCount,
  started_at: row.startedAt.toISOString(),
  access: accessOf(reader, row)
})

/** `after` is a time when it reads as one (the shape), else the last trace of the previous page. */
const TIME = /^\d{4}-\d{2}-\d{2}(T[\d:.]+(Z|[+-]\d{2}:?\d{2})?)?$/

export const TracesHttp = HttpApiBuilder.group(AtriumApi, "traces", (handlers) =>
  Effect.gen(function*() {
    const repo = yield* TracesRepo
    return handlers
      .handle("runTrace", ({ path }) =>
        Effect.gen(function*() {
          const reader = readerOf(yield* Caller)
          const trace = yield* repo.byRun(path.id, reader)
          if (Option.isNone(trace)) return yield* new NotFound({ message: `No trace of run ${path.id}.` })
          const spans = yield* repo.spans(trace.value.traceId)
          return { trace_id: trace.value.traceId, run_id: trace.value.runId, spans: spans.map(spanView) }
        }))
      .handle("searchTraces", ({ urlParams }) =>
        Effect.gen(function*() {
          let reader = readerOf(yield* Caller)
          if (urlParams.end_user !== undefined) {
            const narrowed = endUserReader(reader, urlParams.end_user)
            if (Option.isNone(narrowed)) return { data: [], has_more: false }
            reader = narrowed.value
          }
          const after = urlParams.after
          const time = after !== undefined && TIME.test(after) ? new Date(after) : undefined
          const page = yield* repo.search(reader, {
            agent: urlParams.agent ?? null,
            version: urlParams.version ?? null,
            session: urlParams.session ?? null,
            tool: urlParams.tool ?? null,
            status: urlParams.status ?? null,
            minCredits: urlParams.min_credits === undefined ? null : parseCredits(urlParams.min_credits) ?? null,
            maxCredits: urlParams.max_credits === undefined ? null : parseCredits(urlParams.max_credits) ?? null,
            startedAfter: time !== undefined && !Number.isNaN(time.getTime()) ? time : null,
            startedBefore: urlParams.before ?? null,
            cursor: after !== undefined && time === undefined ? after : null,
            limit: urlParams.limit ?? 20
          })
          return { data: page.data.map(summaryView(reader)), has_more: page.hasMore }
        }))
  })).pipe(Layer.provide(AuthenticationLive))

export const TracesHttpLive = TracesHttp.pipe(Layer.provide(TracesRepo.Default))
