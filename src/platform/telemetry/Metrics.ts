import { Duration, Effect, Metric, MetricBoundaries, MetricKey } from "effect"

/**
 * Every metric the platform exports, as Effect `Metric`s: `Telemetry.ts` hands the process's whole registry to the
 * Prometheus exporter, so a metric defined here (or anywhere, with `Metric.counter`/`gauge`/`histogram`) shows up at
 * `/metrics` with nothing else to wire. Names follow Prometheus conventions (`_total`, `_seconds`, `_bytes`); labels
 * are added with `Metric.tagged` and must stay few (a route pattern, never a raw path or an id).
 */

/** Latency buckets from 5 ms to about 20 s: a health check at the bottom, a model call at the top. */
const latencySeconds = MetricBoundaries.exponential({ start: 0.005, factor: 2, count: 13 })

/** The keys of the request metrics, which the access log tags with each request's labels (AccessLog.ts). */
export const httpRequestsKey = MetricKey.counter("http_requests_total", {
  description: "HTTP requests answered, by method, route pattern and status",
  incremental: true
})

export const httpRequestDurationKey = MetricKey.histogram(
  "http_request_duration_seconds",
  latencySeconds,
  "Time from a request's arrival to its response's head, by method, route pattern and status"
)

export const httpRequests = Metric.fromMetricKey(httpRequestsKey)

export const httpRequestDuration = Metric.fromMetricKey(httpRequestDurationKey)

export const openSubscriptions = Metric.gauge("sse_open_streams", {
  description: "Server-sent event streams open now (session subscriptions and streamed runs)"
})

export const activeSessions = Metric.gauge("sessions_active", {
  description: "Session entities loaded on this process"
})

export const runningTurns = Metric.gauge("session_turns_running", { description: "Session turns running now" })

export const queuedTurns = Metric.gauge("session_turns_queued", {
  description: "Session turns waiting behind a running one"
})

export const walletBatchSize = Metric.histogram(
  "wallet_commit_batch_wallets",
  MetricBoundaries.exponential({ start: 1, factor: 2, count: 10 }),
  "Wallets written by one shared ledger statement (group commit)"
)

export const walletCommitDuration = Metric.histogram(
  "wallet_commit_duration_seconds",
  MetricBoundaries.exponential({ start: 0.0005, factor: 2, count: 14 }),
  "Time one shared ledger statement takes"
)

/**
 * Wallet charges by how they reached the wallet's entity (issue 28 item 4): `via="message"` sent in a `Charges`
 * message (the only road since issue 45; `via="direct"`, around the cluster, is gone and stays 0), `to` the runner that
 * owned the wallet's shard when it left (`this_runner` or `another_runner`, over the runner socket). A message
 * resent after a hand-over counts its charges again.
 */
export const walletCharges = Metric.counter("wallet_charges_total", {
  description: "Wallet charges sent, by how (direct into this runner's entity, or by message) and to which runner",
  incremental: true
})

/**
 * Requests this process made of wallets, by `kind` (`charge`, `balance`, `credit`, `hold`, `settle`): each is one
 * round trip to the wallet's entity for its caller. A run or session turn makes two (`hold`, `settle`) however many
 * model steps it takes (issue 45 item 2; `test/billing/holds.test.ts` counts them).
 */
export const walletRequests = Metric.counter("wallet_requests_total", {
  description: "Requests made of wallets (one round trip each), by kind",
  incremental: true
})

/**
 * `Charges` messages sent, by the runner they went to: `wallet_charges_total{via="message"}` over this is the batch
 * size (charges per message) on each side.
 */
export const walletChargeMessages = Metric.counter("wallet_charge_messages_total", {
  description: "Wallet Charges messages sent (each carries a batch of charges), by the runner they went to",
  incremental: true
})

export const eventLoopDelay = Metric.gauge("nodejs_eventloop_delay_seconds", {
  description: "Event-loop delay over the last sampling interval, by quantile (p50, p99, max)"
})

export const residentMemory = Metric.gauge("process_resident_memory_bytes", {
  description: "Resident set size of this process"
})

/** Counts `self` in `gauge` while it runs (interrupted or not): a one-liner for "how many X are in flight". */
export const inFlight = (gauge: Metric.Metric.Gauge<number>) => <A, E, R>(self: Effect.Effect<A, E, R>) =>
  Effect.acquireUseRelease(Metric.increment(gauge), () => self, () => Metric.incrementBy(gauge, -1))

/** Adds 1 to `gauge` now and takes it back when the current scope closes (an entity's lifetime, say). */
export const countWhileScoped = (gauge: Metric.Metric.Gauge<number>) =>
  Effect.acquireRelease(Metric.increment(gauge), () => Metric.incrementBy(gauge, -1))

/** Records how long `self` takes, in seconds, in a histogram. */
export const timed = (histogram: Metric.Metric.Histogram<number>) =>
  Metric.trackDurationWith(histogram, (duration: Duration.Duration) => Duration.toMillis(duration) / 1000)

/**
 * Gauges a scrape shows from the start, at 0, rather than only once something first moved them (Effect registers a
 * metric on first use): an alert on "no sessions" needs the series to exist. Add a new gauge here too.
 */
export const startsAtZero: ReadonlyArray<Metric.Metric.Gauge<number>> = [
  openSubscriptions,
  activeSessions,
  runningTurns,
  queuedTurns
]
