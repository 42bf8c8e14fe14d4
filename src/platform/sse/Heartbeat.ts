import { Duration, Effect, Exit, GlobalValue, Stream } from "effect"

/**
 * The heartbeats of every SSE stream in the process, driven by one timer per distinct interval instead of one per
 * stream: 10,000 idle subscriptions used to hold 10,000 timers and tick fibers (bench/sessions.ts).
 *
 * The registry is process-wide rather than a service in the context because the encoders are plain stream functions
 * that every streaming handler calls without a context of its own; the point is one timer per process, however many
 * handlers build streams. A ticker exists only while a stream subscribes to it, so nothing outlives the last stream.
 *
 * Sharing a tick must not send a ping sooner than a timer of the stream's own would: a shared timer ticks `STEPS`
 * times per interval, and a stream pings on a tick only once a whole interval has passed since it opened or last
 * pinged. So its first ping comes between 1 and 1 + 1/STEPS intervals after it opened and later ones exactly every
 * interval, as with the per-stream timer before. As before, the cadence does not restart on each event: a stream
 * that writes more often than the interval still pings (test/runs/stream.test.ts counts on it).
 */

/** Ticks per interval: how late (at most 1/STEPS of an interval) a stream's first ping may come. */
const STEPS = 5

interface Subscriber {
  /** The tick its interval counts from: the first whole one after it opened, then the tick of its last ping. */
  since: number
  /** Set while the stream waits for its next ping; unset while the previous ping is on its way. */
  wake: (() => void) | undefined
}

interface Ticker {
  ticks: number
  readonly subscribers: Set<Subscriber>
  readonly timer: ReturnType<typeof setInterval>
}

const tickers = GlobalValue.globalValue(Symbol.for("atrium/platform/Heartbeat"), () => new Map<number, Ticker>())

const tick = (ticker: Ticker) => {
  const now = ++ticker.ticks
  for (const subscriber of ticker.subscribers) {
    if (subscriber.wake !== undefined && now - subscriber.since >= STEPS) {
      subscriber.since = now
      subscriber.wake()
    }
  }
}

const subscribe = (millis: number, subscriber: Subscriber) => {
  let ticker = tickers.get(millis)
  if (ticker === undefined) {
    // Rounded up, so STEPS ticks never add up to less than the interval.
    const timer = setInterval(() => tick(ticker!), Math.ceil(millis / STEPS))
    // An open stream keeps the process up through its socket; the timer alone must not.
    timer.unref()
    ticker = { ticks: 0, subscribers: new Set(), timer }
    tickers.set(millis, ticker)
  }
  subscriber.since = ticker.ticks + 1
  ticker.subscribers.add(subscriber)
}

const unsubscribe = (millis: number, subscriber: Subscriber) => {
  const ticker = tickers.get(millis)
  if (ticker === undefined) return
  ticker.subscribers.delete(subscriber)
  if (ticker.subscribers.size === 0) {
    clearInterval(ticker.timer)
    tickers.delete(millis)
  }
}

/**
 * `self` with `ping` inserted every `interval`, the first after a whole interval; the pings stop when `self` ends (its
 * end, failure or interruption ends the whole stream), and the stream leaves the ticker then.
 */
export const during = <A, E, R>(
  self: Stream.Stream<A, E, R>,
  interval: Duration.DurationInput,
  ping: A
): Stream.Stream<A, E, R> => {
  const millis = Duration.toMillis(Duration.decode(interval))
  if (!Number.isFinite(millis) || millis <= 0) return self
  const pinged = Exit.succeed(ping)
  return Stream.unwrapScoped(Effect.gen(function*() {
    const subscriber: Subscriber = { since: 0, wake: undefined }
    yield* Effect.acquireRelease(
      Effect.sync(() => subscribe(millis, subscriber)),
      () => Effect.sync(() => unsubscribe(millis, subscriber))
    )
    // No queue and no timer per stream: the ping side waits on a callback the shared tick calls.
    const pings = Stream.repeatEffect(Effect.async<A>((resume) => {
      subscriber.wake = () => {
        subscriber.wake = undefined
        resume(pinged)
      }
      return Effect.sync(() => {
        subscriber.wake = undefined
      })
    }))
    return Stream.merge(self, pings, { haltStrategy: "left" })
  }))
}

/**
 * Calls `ping` every `interval` from the shared ticker, the first after a whole interval, until the returned function
 * is called: for a response written by pushes (`Sse.held`), where the ping is written straight to the socket and no
 * stream or fiber waits for it.
 */
export const every = (interval: Duration.DurationInput, ping: () => void): () => void => {
  const millis = Duration.toMillis(Duration.decode(interval))
  if (!Number.isFinite(millis) || millis <= 0) return () => {}
  // Never unset: the tick only ever finds it waiting.
  const subscriber: Subscriber = { since: 0, wake: ping }
  subscribe(millis, subscriber)
  return () => unsubscribe(millis, subscriber)
}

/** How many streams are subscribed to the ticker of `interval` (all tickers without one): for tests and diagnostics. */
export const subscribers = (interval?: Duration.DurationInput): number => {
  if (interval !== undefined) return tickers.get(Duration.toMillis(Duration.decode(interval)))?.subscribers.size ?? 0
  let total = 0
  for (const ticker of tickers.values()) total += ticker.subscribers.size
  return total
}

/** How many timers drive all heartbeats now: one per distinct interval in use. */
export const timers = (): number => tickers.size
