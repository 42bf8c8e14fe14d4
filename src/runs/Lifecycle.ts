import { Effect, PubSub, type Queue, type Scope } from "effect"
import type { Micros } from "../platform/Money.js"

/** How a run ended, as whoever is told of it (webhooks, memory, schedules) reads it. */
export interface RunEnded {
  readonly runId: string
  /** The account that ran it and pays, and the end user it ran for ('' when none). */
  readonly accountId: string
  readonly endUserId: string
  readonly agent: string | null
  readonly status: "completed" | "failed" | "cancelled" | "incomplete"
  readonly creditsCharged: Micros
  readonly output: string
  readonly error: { readonly code: string; readonly message: string } | null
  /** Why an `incomplete` run stopped (`max_duration`). */
  readonly incompleteReason: string | null
  readonly background: boolean
  /** The `/v1/responses` response the run answers, if any. */
  readonly responseId: string | null
}

/**
 * The port through which a background run's end is told (issue 43 item 6): the run's workflow publishes each run's
 * terminal event once it is recorded, on the runner that ran it; a subscriber (the webhooks module) takes it from
 * there. A run whose end is recorded again after a fault (its last step's reply was lost) may be told twice: a
 * subscriber keys what it does by `runId`.
 */
export class RunLifecycle extends Effect.Service<RunLifecycle>()("atrium/runs/RunLifecycle", {
  scoped: Effect.gen(function*() {
    const ended = yield* Effect.acquireRelease(PubSub.unbounded<RunEnded>(), PubSub.shutdown)
    return {
      publish: (event: RunEnded): Effect.Effect<void> => Effect.asVoid(PubSub.publish(ended, event)),
      /** Every run that ends from now on, while the scope lasts. */
      subscribe: PubSub.subscribe(ended) as Effect.Effect<Queue.Dequeue<RunEnded>, never, Scope.Scope>
    } as const
  })
}) {}
