import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as OtelMetrics from "@effect/opentelemetry/Metrics"
import * as OtlpSerialization from "@effect/opentelemetry/OtlpSerialization"
import * as OtlpTracer from "@effect/opentelemetry/OtlpTracer"
import * as OtelResource from "@effect/opentelemetry/Resource"
import { PrometheusExporter } from "@opentelemetry/exporter-prometheus"
import { Effect, Layer, Metric, Option, Redacted, Schedule } from "effect"
import { monitorEventLoopDelay } from "node:perf_hooks"
import { TelemetryConfig } from "../Config.js"
import * as Logging from "./Logging.js"
import { eventLoopDelay, residentMemory, startsAtZero } from "./Metrics.js"

/**
 * What the process tells its operator: the log (format and level), Prometheus metrics on a listener of their own,
 * and traces over OTLP/HTTP. Wrapped around the whole program in main.ts; tests that boot the platform in-process
 * do without it (they keep Effect's logger and no exporter), a test of the real process gets all of it.
 */

/** Where spans go, if anywhere. */
export const tracesUrl = (config: TelemetryConfig): Option.Option<string> =>
  Option.orElse(
    config.otlpTracesEndpoint,
    () => Option.map(config.otlpEndpoint, (base) => `${base.replace(/\/+$/, "")}/v1/traces`)
  )

/** `key=value,key2=value2`, the OpenTelemetry form (values URL-encoded). */
const parseHeaders = (raw: string): Record<string, string> => {
  const headers: Record<string, string> = {}
  for (const pair of raw.split(",")) {
    const at = pair.indexOf("=")
    if (at <= 0) continue
    headers[pair.slice(0, at).trim().toLowerCase()] = decodeURIComponent(pair.slice(at + 1).trim())
  }
  return headers
}

const tracerLayer = (config: TelemetryConfig, url: string) =>
  OtlpTracer.layer({
    url,
    resource: { serviceName: config.serviceName },
    headers: Option.match(config.otlpHeaders, {
      onNone: () => ({}),
      onSome: (raw) => parseHeaders(Redacted.value(raw))
    }),
    exportInterval: "2 seconds"
  }).pipe(Layer.provide([OtlpSerialization.layerJson, FetchHttpClient.layer]))

/** Samples what no request measures: event-loop delay (p50, p99, max over the interval) and resident memory. */
const processSampler = Layer.scopedDiscard(Effect.gen(function*() {
  const histogram = monitorEventLoopDelay({ resolution: 10 })
  histogram.enable()
  yield* Effect.addFinalizer(() => Effect.sync(() => histogram.disable()))
  const sample = Effect.gen(function*() {
    // The histogram is in nanoseconds; an idle loop reports about `resolution`, which is the floor, not a delay.
    yield* Metric.set(Metric.tagged(eventLoopDelay, "quantile", "p50"), histogram.percentile(50) / 1e9)
    yield* Metric.set(Metric.tagged(eventLoopDelay, "quantile", "p99"), histogram.percentile(99) / 1e9)
    yield* Metric.set(Metric.tagged(eventLoopDelay, "quantile", "max"), histogram.max / 1e9)
    yield* Metric.set(residentMemory, process.memoryUsage.rss())
    histogram.reset()
  })
  yield* Effect.forEach(startsAtZero, (gauge) => Metric.incrementBy(gauge, 0), { discard: true })
  yield* sample.pipe(Effect.repeat(Schedule.spaced("5 seconds")), Effect.forkScoped)
}))

const metricsLayer = (config: TelemetryConfig, port: number) =>
  Layer.merge(
    OtelMetrics.layer(() => new PrometheusExporter({ host: config.metricsHost, port, withoutScopeInfo: true })),
    processSampler
  ).pipe(
    Layer.provide(OtelResource.layer({ serviceName: config.serviceName })),
    Layer.tap(() => Effect.logInfo(`Metrics on http://${config.metricsHost}:${port}/metrics`))
  )

const workerOffset = (config: TelemetryConfig) => Option.match(config.worker, { onNone: () => 0, onSome: (index) => 1 + index })

/** Everything above as one layer, with the settings it was built from. */
export const layer = (config: TelemetryConfig) => {
  const traces = tracesUrl(config)
  // The log first, so what the others say while they start is already in the chosen format.
  return Layer.mergeAll(
    Option.match(traces, { onNone: () => Layer.empty, onSome: (url) => tracerLayer(config, url) }),
    Option.match(config.metricsPort, {
      onNone: () => Layer.empty,
      // Under WORKERS=N every worker has metrics of its own: worker i listens on METRICS_PORT + 1 + i, the
      // supervising primary on METRICS_PORT (docs/operations.md).
      onSome: (port) => metricsLayer(config, port + workerOffset(config))
    })
  ).pipe(
    Layer.provideMerge(Logging.layer({
      format: Option.getOrElse(config.logFormat, Logging.defaultFormat),
      level: config.logLevel,
      traceIds: Option.isSome(traces)
    }))
  )
}

/**
 * Runs the program with the process's telemetry. The tracer stays off unless spans have somewhere to go: building
 * a span per request and per `Effect.fn` only to drop it costs measurable CPU on the cheapest routes (BENCHMARKS.md).
 */
export const withTelemetry = <A, E, R>(program: Effect.Effect<A, E, R>) =>
  Effect.flatMap(TelemetryConfig, (config) =>
    program.pipe(
      Effect.withTracerEnabled(Option.isSome(tracesUrl(config))),
      Effect.provide(layer(config))
    ))
