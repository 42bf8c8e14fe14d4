import { Entity, type Sharding } from "@effect/cluster"
import { Deferred, Effect, Exit, Fiber, FiberId } from "effect"

/** How long a session's worker is busy before it asks the cluster to keep the session active; < `maxIdleTime`. */
const KEEP_ALIVE_AFTER = "1 minute"

/**
 * While a session's worker has work the entity must stay active (no passivation mid-turn). `Entity.keepAlive` is a
 * persisted message (three writes), so it is asked for only once the worker has been busy for a while, well within
 * `maxIdleTime`: the idle clock runs from the last message, and a builtin turn is over long before. A class, so an
 * idle session keeps one field, not closures (issue 28, heap per session).
 */
export class KeepAlive {
  private asking: Fiber.RuntimeFiber<void> | undefined

  /** The worker took a turn. */
  busy(): Effect.Effect<void, never, Sharding.Sharding | Entity.CurrentAddress> {
    if (this.asking !== undefined) return Effect.void
    return Effect.map(Effect.fork(Effect.delay(Entity.keepAlive(true), KEEP_ALIVE_AFTER)), (fiber) => void (this.asking = fiber))
  }

  /** The worker has no turn left. */
  idle(): Effect.Effect<void, never, Sharding.Sharding | Entity.CurrentAddress> {
    const asking = this.asking
    if (asking === undefined) return Effect.void
    return Effect.flatMap(Fiber.interrupt(asking), (exit) => {
      this.asking = undefined
      // Ended by itself (not interrupted here): it did ask to be kept alive.
      return Exit.isSuccess(exit) ? Entity.keepAlive(false) : Effect.void
    })
  }
}

/**
 * The turns sent to a session and not yet ended (queued or running): what a runner giving the session up waits for
 * (`drained`), through a deferred made only while it waits. A counter, not a `SubscriptionRef` (a `PubSub` per
 * session); a deleted session has nothing left to wait for (`abandon`).
 */
export class UnfinishedTurns {
  private count = 0
  private abandoned = false
  private waiter: Deferred.Deferred<void> | undefined

  add(delta: number): Effect.Effect<void> {
    return Effect.sync(() => {
      this.count += delta
      this.wakeIfDone()
    })
  }

  abandon(): void {
    this.abandoned = true
    this.wakeIfDone()
  }

  /** Returns once no sent turn is left to end (or the session is deleted). */
  drained(): Effect.Effect<void> {
    return Effect.suspend(() => {
      if (this.count <= 0 || this.abandoned) return Effect.void
      this.waiter ??= Deferred.unsafeMake<void>(FiberId.none)
      return Deferred.await(this.waiter)
    })
  }

  private wakeIfDone() {
    if ((this.count <= 0 || this.abandoned) && this.waiter !== undefined) Deferred.unsafeDone(this.waiter, Exit.void)
  }
}
