import * as Os from "node:os"
import { Effect } from "effect"
import { SandboxFailure } from "./Sandbox.js"

/**
 * Fair share and caps for sandboxes (docs/tools.md, "Caps"). Two kinds of permit:
 * - a live slot, held by a sandbox process from its start to its end: at most `livePerAccount` per account, and
 *   as many in all as the memory budget holds. When none is free, an idle sandbox (the account's own first, then
 *   anyone's) is closed to make room, least recently used first; its conversation gets a fresh one on its next call.
 * - a running slot, held for one call: at most `runningPerAccount` per account and `runningTotal` in all, so one
 *   account's endless loops take at most its share of the cores.
 * A call that cannot get its permits within `queueMs` fails as `busy`.
 */

export interface AdmissionSettings {
  readonly livePerAccount: number
  readonly liveTotal: number
  readonly runningPerAccount: number
  readonly runningTotal: number
  readonly queueMs: number
}

/** A live sandbox as admission sees it: whose, whether it is in use, when it was last used, how to close it. */
export interface Tenant {
  readonly owner: string
  running: boolean
  lastUsed: number
  readonly close: Effect.Effect<void>
}

const busy = (what: string) =>
  new SandboxFailure({
    reason: "busy",
    message: `${what}; try again shortly`
  })

export const makeAdmission = (settings: AdmissionSettings) =>
  Effect.gen(function*() {
    const runningTotal = yield* Effect.makeSemaphore(settings.runningTotal)
    const runningPerAccount = new Map<string, { readonly semaphore: Effect.Semaphore; users: number }>()
    const tenants = new Set<Tenant>()
    /** Wakes whoever waits for a live slot each time one frees up. */
    const freed = yield* Effect.makeLatch(false)

    const ofOwner = (owner: string) => [...tenants].filter((tenant) => tenant.owner === owner)

    /** Closes the least recently used idle sandbox among `candidates`; false when every one is running. */
    const reapOne = (candidates: Iterable<Tenant>) =>
      Effect.suspend(() => {
        let oldest: Tenant | undefined
        for (const tenant of candidates) {
          if (!tenant.running && (oldest === undefined || tenant.lastUsed < oldest.lastUsed)) oldest = tenant
        }
        if (oldest === undefined) return Effect.succeed(false)
        tenants.delete(oldest)
        return Effect.as(oldest.close, true)
      })

    /** Under memory pressure (less than a tenth of the machine's memory free) an idle sandbox goes first. */
    const relievePressure = Effect.suspend(() =>
      Os.freemem() < Os.totalmem() / 10 ? Effect.asVoid(reapOne(tenants)) : Effect.void
    )

    /** Registers `tenant` once both caps leave room, closing idle sandboxes to make it, or waiting until the deadline. */
    const admit = (tenant: Tenant) =>
      Effect.gen(function*() {
        while (true) {
          const mine = ofOwner(tenant.owner)
          if (mine.length < settings.livePerAccount && tenants.size < settings.liveTotal) {
            tenants.add(tenant)
            return
          }
          const reaped = yield* reapOne(mine.length >= settings.livePerAccount ? mine : tenants)
          if (!reaped) yield* freed.await
        }
      }).pipe(
        // Waiting is interruptible (it runs as an `acquireRelease`'s acquire): the deadline below can end it.
        Effect.interruptible,
        Effect.timeoutFail({
          duration: settings.queueMs,
          onTimeout: () => busy("every sandbox this account or the server may hold is running")
        })
      )

    /**
     * A live slot for `owner` while the scope lasts (the sandbox's life). `close` is how admission ends the sandbox
     * when it needs the room; it must close that scope.
     */
    const live = (owner: string, close: Effect.Effect<void>) =>
      Effect.gen(function*() {
        yield* relievePressure
        const tenant: Tenant = { owner, running: true, lastUsed: Date.now(), close }
        yield* Effect.acquireRelease(admit(tenant), () =>
          Effect.suspend(() => {
            tenants.delete(tenant)
            return freed.release
          }))
        return tenant
      })

    /** An account's running semaphore, dropped again when no call of that account holds or waits for it. */
    const accountRunning = (owner: string) =>
      Effect.acquireRelease(
        Effect.gen(function*() {
          let entry = runningPerAccount.get(owner)
          if (entry === undefined) {
            entry = { semaphore: yield* Effect.makeSemaphore(settings.runningPerAccount), users: 0 }
            runningPerAccount.set(owner, entry)
          }
          entry.users += 1
          return entry.semaphore
        }),
        () =>
          Effect.sync(() => {
            const entry = runningPerAccount.get(owner)
            if (entry !== undefined && --entry.users === 0) runningPerAccount.delete(owner)
          })
      )

    const take = (semaphore: Effect.Semaphore, what: string) =>
      Effect.acquireRelease(
        // The wait is interruptible so the deadline ends it; a permit once taken is released by the finalizer.
        semaphore.take(1).pipe(
          Effect.interruptible,
          Effect.timeoutFail({ duration: settings.queueMs, onTimeout: () => busy(what) })
        ),
        () => semaphore.release(1)
      )

    /** Runs one call of `tenant` under the running caps; the tenant counts as running (not reapable) meanwhile. */
    const running = <A, E, R>(tenant: Tenant, body: Effect.Effect<A, E, R>) =>
      Effect.scoped(Effect.gen(function*() {
        yield* Effect.acquireRelease(
          Effect.sync(() => {
            tenant.running = true
          }),
          () =>
            Effect.suspend(() => {
              tenant.running = false
              tenant.lastUsed = Date.now()
              // An idle sandbox can be closed to make room: whoever waits for room may now have it.
              return freed.release
            })
        )
        yield* take(yield* accountRunning(tenant.owner), "this account is already running as much code as it may at once")
        yield* take(runningTotal, "the server is running as much code as it may at once")
        return yield* body
      }))

    return { live, running, size: () => tenants.size } as const
  })

export type Admission = Effect.Effect.Success<ReturnType<typeof makeAdmission>>
