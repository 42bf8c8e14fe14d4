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
 * A holder made synchronously. Its lock is made on first use, not with the holder: an active session holds a holder
 * whether or not it ever runs code (issue 28, heap per session).
 */
export const unsafeMakeSandboxHolder = (): SandboxHolder => {
  let lock: Effect.Semaphore | undefined
  const locked = <A, E>(effect: Effect.Effect<A, E>) => Effect.suspend(() => (lock ??= Effect.unsafeMakeSemaphore(1)).withPermits(1)(effect))
  let held: { readonly key: string; readonly sandbox: SandboxInstance } | undefined

  const drop = Effect.suspend(() => {
    const current = held
    held = undefined
    return current === undefined ? Effect.void : current.sandbox.close
  })

  const use: SandboxHolder["use"] = (key, make, body) =>
    locked(Effect.gen(function*() {
      let fresh = false
      if (held === undefined || held.key !== key || !held.sandbox.alive()) {
        yield* drop
        held = { key, sandbox: yield* make }
        fresh = true
      }
      return yield* body(held.sandbox, fresh)
    }))

  // Never used: nothing to wait for or close.
  return { use, release: Effect.suspend(() => lock === undefined ? Effect.void : locked(drop)) }
}

export const makeSandboxHolder: Effect.Effect<SandboxHolder> = Effect.sync(unsafeMakeSandboxHolder)
