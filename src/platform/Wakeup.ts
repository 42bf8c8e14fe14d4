import { type Duration, Effect, Queue } from "effect"

/**
 * A wake-up for a worker that otherwise polls (webhook deliveries, knowledge ingestion, the eval driver): whoever
 * makes work in the same process wakes it at once, and the worker's poll is only for work made elsewhere. At most one
 * wake is kept: wakes that arrive while the worker is busy are one look, not one each.
 */
export interface Wakeup {
  /** Work is waiting. */
  readonly wake: Effect.Effect<void>
  /** Waits for a wake, for at most `within`. */
  readonly next: (within: Duration.DurationInput) => Effect.Effect<void>
}

export const makeWakeup: Effect.Effect<Wakeup> = Effect.map(Queue.sliding<void>(1), (pending) => ({
  wake: Effect.asVoid(Queue.offer(pending, undefined)),
  next: (within) => Effect.asVoid(Effect.timeoutOption(Queue.take(pending), within))
}))
