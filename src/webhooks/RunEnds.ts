import { Effect, Layer } from "effect"
import { type RunEnded, RunEnds } from "../runs/Lifecycle.js"
import { isEventType } from "./Domain.js"
import { Webhooks } from "./Webhooks.js"

/**
 * A background run's end as webhook events (docs/webhooks.md, "Events"): `run.<status>` with the run object, and for
 * a Responses run `response.<status>` with its response's id (OpenAI's payload). Keyed by run and status, so the end
 * told again by a workflow resumed after a fault is the event already recorded, not a second one.
 */
export const RunEndWebhooksLive = Layer.effect(RunEnds, Effect.gen(function*() {
  const webhooks = yield* Webhooks
  const ended = Effect.fn("RunEndWebhooks.ended")(function*(event: RunEnded) {
    const { run } = event
    const emit = (type: string, data: Record<string, unknown>, idempotencyKey: string) =>
      isEventType(type) ? webhooks.emit({ account: event.accountId, type, data, idempotencyKey }) : Effect.void
    yield* emit(`run.${run.status}`, run, `run:${run.id}:${run.status}`)
    if (event.responseId !== null) yield* emit(`response.${run.status}`, { id: event.responseId }, `response:${event.responseId}:${run.status}`)
  })
  return RunEnds.of({ ended })
}))
