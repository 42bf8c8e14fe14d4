import { Effect } from "effect"
import type { SandboxFailure, SandboxInstance } from "./Sandbox.js"

/**
 * Holds at most one sandbox for a conversation: a session keeps one in its in-memory state (so variables and files
 * persist between `run_code` calls while the session is active), a stateless run one for its own length. The
 * sandbox is made on first use, replaced when its `key` (the environment and its version) changes or when it died
 * (a time limit kills it), and closed by `release`.
 */
export interface SandboxHolder {
  readonly use: <A, E>(
    key: string,
    make: Effect.Effect<SandboxInstance, SandboxFailure>,
    body: (sandbox: SandboxInstance, fresh: boolean) => Effect.Effect<A, E>
  ) => Effect.Effect<A, E | SandboxFailure>
  readonly release: Effect.Effect<void>
}

/**
 * A holder made synchronously: one object with its methods on the prototype (no closures of its own), and its lock
 * made on first use. An active session holds a holder whether or not it ever runs code (issue 28, heap per session).
 */
class LazySandboxHolder implements SandboxHolder {
  private lock: Effect.Semaphore | undefined
  private held: { readonly key: string; readonly sandbox: SandboxInstance } | undefined

  private locked<A, E>(effect: Effect.Effect<A, E>): Effect.Effect<A, E> {
    return Effect.suspend(() => (this.lock ??= Effect.unsafeMakeSemaphore(1)).withPermits(1)(effect))
  }

  private get drop(): Effect.Effect<void> {
    return Effect.suspend(() => {
      const current = this.held
      this.held = undefined
      return current === undefined ? Effect.void : current.sandbox.close
    })
  }

  use<A, E>(
    key: string,
    make: Effect.Effect<SandboxInstance, SandboxFailure>,
    body: (sandbox: SandboxInstance, fresh: boolean) => Effect.Effect<A, E>
  ): Effect.Effect<A, E | SandboxFailure> {
    const self = this
    return this.locked(Effect.gen(function*() {
      let fresh = false
      if (self.held === undefined || self.held.key !== key || !self.held.sandbox.alive()) {
        yield* self.drop
        self.held = { key, sandbox: yield* make }
        fresh = true
      }
      return yield* body(self.held.sandbox, fresh)
    }))
  }

  // Never used: nothing to wait for or close.
  get release(): Effect.Effect<void> {
    return Effect.suspend(() => this.lock === undefined ? Effect.void : this.locked(this.drop))
  }
}

export const unsafeMakeSandboxHolder = (): SandboxHolder => new LazySandboxHolder()

export const makeSandboxHolder: Effect.Effect<SandboxHolder> = Effect.sync(unsafeMakeSandboxHolder)
