import { Clock, Duration, Effect, Metric, Option, Queue, Redacted } from "effect"
import { AgentsRepo } from "../agents/Repo.js"
import { SecretBox } from "../credentials/SecretBox.js"
import type { SpanRecord } from "../runtime/Tracing.js"
import { SafeFetch } from "../runtime/tools/Outbound.js"
import { formatCredits } from "../platform/Money.js"

/**
 * Per-expert OTLP export (docs/traces.md, "OTLP export"): the spans of an expert whose creator set `otlp_export` are
 * also POSTed, as OTLP/HTTP JSON, to the creator's endpoint (Langfuse, Phoenix, LangSmith and any collector accept
 * it), through the outbound rule of tool traffic. Best effort and off the trace's own path: after a batch is stored,
 * its spans are grouped by expert and sent by a fiber of their own; a refused export is logged, not retried.
 */

/** How long an expert's export setting is trusted before it is read again (a change applies within this). */
export const SETTING_TTL = Duration.seconds(5)
/** Batches waiting to be exported; past this the oldest are dropped (the stored traces are complete regardless). */
const MAX_WAITING = 1_000
const EXPORT_TIMEOUT = Duration.seconds(10)

const exported = Metric.counter("atrium_trace_spans_exported_total", { description: "Spans sent to creators' OTLP endpoints" })
const refused = Metric.counter("atrium_trace_exports_failed_total", { description: "OTLP exports to creators' endpoints that failed" })

interface Target {
  readonly endpoint: string
  readonly headers: Record<string, string>
}

const KIND: Record<string, number> = { internal: 1, server: 2, client: 3, producer: 4, consumer: 5 }

const anyValue = (value: unknown): Record<string, unknown> => {
  if (typeof value === "string") return { stringValue: value }
  if (typeof value === "boolean") return { boolValue: value }
  if (typeof value === "number") return Number.isInteger(value) ? { intValue: String(value) } : { doubleValue: value }
  if (typeof value === "bigint") return { intValue: value.toString() }
  if (Array.isArray(value)) return { arrayValue: { values: value.map(anyValue) } }
  return { stringValue: JSON.stringify(value) ?? "" }
}

/** Spans as an OTLP `ExportTraceServiceRequest` in its JSON form (ids in hex, times in nanoseconds as strings). */
export const otlpRequest = (spans: ReadonlyArray<SpanRecord>) => ({
  resourceSpans: [{
    resource: { attributes: [{ key: "service.name", value: { stringValue: "atrium" } }] },
    scopeSpans: [{
      scope: { name: "atrium" },
      spans: spans.map((span) => ({
        traceId: span.traceId,
        spanId: span.spanId,
        ...(span.parentSpanId === null ? {} : { parentSpanId: span.parentSpanId }),
        name: span.name,
        kind: KIND[span.kind] ?? 1,
        startTimeUnixNano: span.startTime.toString(),
        endTimeUnixNano: span.endTime.toString(),
        attributes: [
          ...Object.entries(span.attributes).map(([key, value]) => ({ key, value: anyValue(value) })),
          { key: "atrium.credits", value: { stringValue: formatCredits(span.credits) } },
          { key: "atrium.run.id", value: { stringValue: span.run.runId } }
        ],
        status: span.status === "error" ? { code: 2 } : { code: 1 }
      }))
    }]
  }]
})

export const makeExporter = Effect.gen(function*() {
  const agents = yield* AgentsRepo
  const box = yield* SecretBox
  const fetchSafely = yield* SafeFetch
  const waiting = yield* Queue.sliding<ReadonlyArray<SpanRecord>>(MAX_WAITING)
  const settings = new Map<string, { readonly at: number; readonly target: Option.Option<Target> }>()

  /** The expert's export target now (read from its draft, the live setting), cached for `SETTING_TTL`. */
  const targetOf = (identifier: string) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const cached = settings.get(identifier)
      if (cached !== undefined && now - cached.at < Duration.toMillis(SETTING_TTL)) return cached.target
      const agent = yield* agents.byIdentifier(identifier)
      const setting = Option.flatMap(agent, (row) => Option.fromNullable(row.draft.otlp_export))
      const target = Option.flatMap(setting, (setting): Option.Option<Target> => {
        if (setting.headers_sealed === null) return Option.some({ endpoint: setting.endpoint, headers: {} })
        // Sealed under another key (SECRETS_KEY rotated): nothing is sent rather than a request without its credentials.
        return Option.map(box.open(setting.headers_sealed), (opened) => ({
          endpoint: setting.endpoint,
          headers: JSON.parse(Redacted.value(opened)) as Record<string, string>
        }))
      })
      settings.set(identifier, { at: now, target })
      return target
    })

  const send = (target: Target, spans: ReadonlyArray<SpanRecord>) =>
    Effect.tryPromise({
      try: async (signal) => {
        const response = await fetchSafely(target.endpoint, {
          method: "POST",
          headers: { ...target.headers, "content-type": "application/json" },
          body: JSON.stringify(otlpRequest(spans)),
          signal
        })
        await response.body?.cancel()
        if (!response.ok) throw new Error(`answered ${response.status}`)
      },
      catch: (error) => error instanceof Error ? error.message : String(error)
    }).pipe(
      Effect.timeoutFail({ duration: EXPORT_TIMEOUT, onTimeout: () => `timed out after ${Duration.format(EXPORT_TIMEOUT)}` }),
      Effect.tap(() => Metric.incrementBy(exported, spans.length)),
      Effect.catchAll((message) =>
        Effect.zipRight(
          Metric.increment(refused),
          Effect.logWarning(`traces: the OTLP export to ${new URL(target.endpoint).host} failed: ${message}`)
        )
      )
    )

  const exportBatch = (batch: ReadonlyArray<SpanRecord>) =>
    Effect.gen(function*() {
      const byExpert = new Map<string, Array<SpanRecord>>()
      for (const span of batch) {
        const list = byExpert.get(span.run.agent)
        if (list === undefined) byExpert.set(span.run.agent, [span])
        else list.push(span)
      }
      yield* Effect.forEach(byExpert, ([identifier, spans]) =>
        Effect.flatMap(targetOf(identifier), Option.match({
          onNone: () => Effect.void,
          onSome: (target) => send(target, spans)
        })), { discard: true })
    })

  const worker = Queue.take(waiting).pipe(
    Effect.flatMap(exportBatch),
    Effect.catchAllCause((cause) => Effect.logError("traces: an OTLP export round failed", cause)),
    Effect.forever
  )

  return {
    /** Queues a stored batch for export (never waits). */
    offer: (batch: ReadonlyArray<SpanRecord>) => Queue.unsafeOffer(waiting, batch),
    worker
  } as const
})
