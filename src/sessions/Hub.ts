import { Effect, PubSub, type Queue, type Scope } from "effect"
import type { InternalEvent } from "../runtime/Events.js"

/** A session event as live subscribers receive it: logged ones carry their `seq`; `closed` ends every subscription. */
export type HubEvent =
  | { readonly _tag: "logged"; readonly turn: number; readonly seq: number; readonly event: InternalEvent & { readonly seq: number } }
  /** The end of a turn that never ran (the session was deleted while it waited): told, not logged. */
  | { readonly _tag: "dropped"; readonly turn: number; readonly event: InternalEvent }
  | { readonly _tag: "closed" }

/**
 * Live fan-out of session events in this process: one PubSub per session with subscribers, made on the first
 * subscription and dropped with the last, so an event costs nothing for sessions nobody watches. The durable log is
 * written before an event is published here; a subscriber that misses something reads it from the log.
 */
export class SessionHub extends Effect.Service<SessionHub>()("atrium/sessions/SessionHub", {
  effect: Effect.sync(() => {
    const topics = new Map<string, { readonly pubsub: PubSub.PubSub<HubEvent>; subscribers: number }>()

    const publish = (sessionId: string, event: HubEvent) =>
      Effect.suspend(() => {
        const topic = topics.get(sessionId)
        return topic === undefined ? Effect.void : Effect.asVoid(PubSub.publish(topic.pubsub, event))
      })

    /** A subscription for the life of the scope; everything published after this returns is in it. */
    const subscribe = (sessionId: string): Effect.Effect<Queue.Dequeue<HubEvent>, never, Scope.Scope> =>
      Effect.acquireRelease(
        Effect.gen(function*() {
          let topic = topics.get(sessionId)
          if (topic === undefined) {
            topic = { pubsub: yield* PubSub.unbounded<HubEvent>(), subscribers: 0 }
            topics.set(sessionId, topic)
          }
          topic.subscribers++
          return topic
        }),
        (topic) =>
          Effect.sync(() => {
            topic.subscribers--
            if (topic.subscribers === 0 && topics.get(sessionId) === topic) topics.delete(sessionId)
          })
      ).pipe(Effect.flatMap((topic) => PubSub.subscribe(topic.pubsub)))

    const subscriptions = Effect.sync(() => {
      let count = 0
      for (const topic of topics.values()) count += topic.subscribers
      return count
    })

    return { publish, subscribe, subscriptions } as const
  })
}) {}
