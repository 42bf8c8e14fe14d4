import { Entity, type Sharding } from "@effect/cluster"
import { Deferred, Effect, Exit, Fiber, FiberId, Layer } from "effect"
import { Stopping } from "../platform/Stopping.js"

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
  private released = false
  private waiter: Deferred.Deferred<void> | undefined

  /** `runner`: the runner's count of every session's unfinished turns (`RunnerTurns`), told each change too. */
  constructor(private readonly runner?: UnfinishedTurns) {}

  add(delta: number): Effect.Effect<void> {
    return Effect.sync(() => this.unsafeAdd(delta))
  }

  private unsafeAdd(delta: number) {
    if (this.released) return
    this.count += delta
    this.wakeIfDone()
    this.runner?.unsafeAdd(delta)
  }

  /**
   * The activation is over (its worker stopped): turns still counted (queued, never run here) are the next
   * activation's, no longer this runner's to wait for.
   */
  release(): Effect.Effect<void> {
    return Effect.sync(() => {
      if (this.released) return
      this.runner?.unsafeAdd(-this.count)
      this.count = 0
      this.released = true
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
    if ((this.count <= 0 || this.abandoned) && this.waiter !== undefined) {
      Deferred.unsafeDone(this.waiter, Exit.void)
      this.waiter = undefined
    }
  }
}

/**
 * Every session's unfinished turns on this runner, one count (each session's `UnfinishedTurns` adds to it): what a
 * stopping runner drains before its cluster stops (`TurnDrainLive`). One counter per platform built, not per module:
 * a process that builds several (the test workers) must not wait for another platform's turns.
 */
export class RunnerTurns extends Effect.Service<RunnerTurns>()("atrium/sessions/RunnerTurns", {
  sync: () => ({ turns: new UnfinishedTurns() })
}) {}

/**
 * A stopping runner's sent turns end while its cluster still answers. The cluster stops taking requests as the first
 * entity layer closes (`preemptiveShutdown`), and a turn that ended after that, in its session's own finalizer (a
 * turn with no open stream: its client gone, queued, sent in the background or by a schedule), could not post its
 * charges: its wallet's entity no longer answered (`ShardFences.unreachableWhileLeaving`), so the next owner charged
 * what the ledger held, and the steps run in the grace were the platform's loss (session 29). Built after every
 * entity (Server.ts), this finalizer runs before any of theirs: it waits for this runner's turns, within what is
 * left of the stop's grace (`Stopping`), while their settles still reach the wallets. A turn still running at the
 * grace's end is cut in its session's finalizer, as before.
 */
export const TurnDrainLive = Layer.scopedDiscard(Effect.gen(function*() {
  const { turns } = yield* RunnerTurns
  const stopping = yield* Stopping
  yield* Effect.addFinalizer(() =>
    Effect.gen(function*() {
      yield* stopping.begin
      // Finalizers are uninterruptible: without this the timeout could not stop the wait.
      yield* Effect.timeoutOption(Effect.interruptible(turns.drained()), yield* stopping.left)
    })
  )
}))
