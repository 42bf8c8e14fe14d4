import * as Os from "node:os"
import { Deferred, Effect, Exit, FiberId } from "effect"
import { SandboxFailure, type SandboxOwner } from "./Sandbox.js"

/**
 * Fair share and caps for sandboxes (docs/tools.md, "Caps"). A developer serving thousands of end users from one
 * account is one tenant to the account caps, so each cap also has a smaller one per end user (the partition: account
 * and end user) that leaves the rest of the account's room to its other end users. Two kinds of permit:
 * - a live slot, held by a sandbox process from its start to its end: at most `livePerEndUser` per end user,
 *   `livePerAccount` per account, and as many in all as the memory budget holds. When none is free, an idle sandbox
 *   (the end user's own first, then the account's, then anyone's) is closed to make room, least recently used first;
 *   its conversation gets a fresh one on its next call.
 * - a running slot, held for one call: at most `runningPerEndUser` per end user, `runningPerAccount` per account and
 *   `runningTotal` in all. Waiting calls are served round-robin: over accounts, and within an account over its end
 *   users, so an end user with many calls queued waits behind each other end user's next call, not before it.
 * A call that cannot get its permits within `queueMs` fails as `busy`.
 */

export interface AdmissionSettings {
  readonly livePerEndUser: number
  readonly livePerAccount: number
  readonly liveTotal: number
  readonly runningPerEndUser: number
  readonly runningPerAccount: number
  readonly runningTotal: number
  readonly queueMs: number
}

/** A live sandbox as admission sees it: whose, whether it is in use, when it was last used, how to close it. */
export interface Tenant {
  readonly owner: SandboxOwner
  running: boolean
  lastUsed: number
  readonly close: Effect.Effect<void>
}

const busy = (what: string) =>
  new SandboxFailure({
    reason: "busy",
    message: `${what}; try again shortly`
  })

/** The partition's key: the account and the end user, unambiguous whatever characters either holds. */
const partitionKey = (owner: SandboxOwner) => JSON.stringify([owner.accountId, owner.endUserId])

/** A call waiting for a running slot; `granted` once the scheduler counted it as running. */
interface Waiter {
  readonly account: string
  readonly partition: string
  readonly wake: Deferred.Deferred<void>
  granted: boolean
}

const increment = (counts: Map<string, number>, key: string, by: number) => {
  const next = (counts.get(key) ?? 0) + by
  if (next === 0) counts.delete(key)
  else counts.set(key, next)
}

/** Moves `key` to the back of a map's iteration order: the round-robin's turn passes to the next one. */
const toBack = <K, V>(map: Map<K, V>, key: K, value: V) => {
  map.delete(key)
  map.set(key, value)
}

export const makeAdmission = (settings: AdmissionSettings) =>
  Effect.gen(function*() {
    const tenants = new Set<Tenant>()

    // Whoever waits for a live slot re-checks each time a sandbox ends or goes idle: one deferred per change,
    // replaced as it fires (a latch, once released, would stay open and turn every wait into a busy loop).
    let changed = Deferred.unsafeMake<void>(FiberId.none)
    const signal = () => {
      const fired = changed
      changed = Deferred.unsafeMake<void>(FiberId.none)
      Deferred.unsafeDone(fired, Exit.void)
    }

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

    /**
     * Registers `tenant` once every cap leaves room, closing idle sandboxes to make it (from the narrowest full cap:
     * the end user's, the account's, the server's), or waiting until the deadline.
     */
    const admit = (tenant: Tenant) =>
      Effect.gen(function*() {
        const partition = partitionKey(tenant.owner)
        while (true) {
          const mine = [...tenants].filter((other) => partitionKey(other.owner) === partition)
          const account = [...tenants].filter((other) => other.owner.accountId === tenant.owner.accountId)
          if (mine.length < settings.livePerEndUser && account.length < settings.livePerAccount && tenants.size < settings.liveTotal) {
            tenants.add(tenant)
            return
          }
          const wake = changed
          const reaped = yield* reapOne(
            mine.length >= settings.livePerEndUser ? mine : account.length >= settings.livePerAccount ? account : tenants
          )
          if (!reaped) yield* Deferred.await(wake)
        }
      }).pipe(
        // Waiting is interruptible (it runs as an `acquireRelease`'s acquire): the deadline below can end it.
        Effect.interruptible,
        Effect.timeoutFail({
          duration: settings.queueMs,
          onTimeout: () => busy("every sandbox this end user, this account or the server may hold is running")
        })
      )

    /**
     * A live slot for `owner` while the scope lasts (the sandbox's life). `close` is how admission ends the sandbox
     * when it needs the room; it must close that scope.
     */
    const live = (owner: SandboxOwner, close: Effect.Effect<void>) =>
      Effect.gen(function*() {
        yield* relievePressure
        const tenant: Tenant = { owner, running: true, lastUsed: Date.now(), close }
        yield* Effect.acquireRelease(admit(tenant), () =>
          Effect.sync(() => {
            tenants.delete(tenant)
            signal()
          }))
        return tenant
      })

    // The running slots: counts per end user, per account and in all, and the waiting calls by account, then by
    // end user (a Map's order is the round-robin's: whoever was served goes to the back).
    const runningByPartition = new Map<string, number>()
    const runningByAccount = new Map<string, number>()
    let runningTotal = 0
    const waiting = new Map<string, Map<string, Array<Waiter>>>()

    const grant = (waiter: Waiter) => {
      waiter.granted = true
      increment(runningByPartition, waiter.partition, 1)
      increment(runningByAccount, waiter.account, 1)
      runningTotal += 1
      Deferred.unsafeDone(waiter.wake, Exit.void)
    }

    /** Hands free running slots to waiting calls: one per account per pass, each account's end users in turn. */
    const dispatch = () => {
      let served = true
      while (served && runningTotal < settings.runningTotal) {
        served = false
        for (const [account, partitions] of [...waiting]) {
          if (runningTotal >= settings.runningTotal) return
          if ((runningByAccount.get(account) ?? 0) >= settings.runningPerAccount) continue
          for (const [partition, queue] of [...partitions]) {
            if ((runningByPartition.get(partition) ?? 0) >= settings.runningPerEndUser) continue
            grant(queue.shift()!)
            if (queue.length === 0) partitions.delete(partition)
            else toBack(partitions, partition, queue)
            if (partitions.size === 0) waiting.delete(account)
            else toBack(waiting, account, partitions)
            served = true
            break
          }
        }
      }
    }

    const release = (waiter: Waiter) => {
      increment(runningByPartition, waiter.partition, -1)
      increment(runningByAccount, waiter.account, -1)
      runningTotal -= 1
      dispatch()
    }

    const withdraw = (waiter: Waiter) => {
      const partitions = waiting.get(waiter.account)
      const queue = partitions?.get(waiter.partition)
      if (partitions === undefined || queue === undefined) return
      const at = queue.indexOf(waiter)
      if (at >= 0) queue.splice(at, 1)
      if (queue.length === 0) partitions.delete(waiter.partition)
      if (partitions.size === 0) waiting.delete(waiter.account)
    }

    /** Which cap kept a call waiting, for its `busy` message. */
    const fullCap = (waiter: Waiter) =>
      (runningByPartition.get(waiter.partition) ?? 0) >= settings.runningPerEndUser
        ? "this end user is already running as much code as it may at once"
        : (runningByAccount.get(waiter.account) ?? 0) >= settings.runningPerAccount
        ? "this account is already running as much code as it may at once"
        : "the server is running as much code as it may at once"

    /** A running slot for `owner` while the scope lasts: queued fairly, and `busy` past the deadline. */
    const runningSlot = (owner: SandboxOwner) =>
      Effect.acquireRelease(
        Effect.gen(function*() {
          const waiter: Waiter = {
            account: owner.accountId,
            partition: partitionKey(owner),
            wake: yield* Deferred.make<void>(),
            granted: false
          }
          const partitions = waiting.get(waiter.account) ?? new Map<string, Array<Waiter>>()
          waiting.set(waiter.account, partitions)
          partitions.set(waiter.partition, [...(partitions.get(waiter.partition) ?? []), waiter])
          dispatch()
          yield* Deferred.await(waiter.wake).pipe(
            // The wait is interruptible so the deadline ends it; a slot granted meanwhile is handed back.
            Effect.interruptible,
            Effect.timeoutFail({ duration: settings.queueMs, onTimeout: () => busy(fullCap(waiter)) }),
            Effect.onExit((exit) =>
              Exit.isSuccess(exit) ? Effect.void : Effect.sync(() => waiter.granted ? release(waiter) : withdraw(waiter))
            )
          )
          return waiter
        }),
        (waiter) => Effect.sync(() => release(waiter))
      )

    /** Runs one call of `tenant` under the running caps; the tenant counts as running (not reapable) meanwhile. */
    const running = <A, E, R>(tenant: Tenant, body: Effect.Effect<A, E, R>) =>
      Effect.scoped(Effect.gen(function*() {
        yield* Effect.acquireRelease(
          Effect.sync(() => {
            tenant.running = true
          }),
          () =>
            Effect.sync(() => {
              tenant.running = false
              tenant.lastUsed = Date.now()
              // An idle sandbox can be closed to make room: whoever waits for room may now have it.
              signal()
            })
        )
        yield* runningSlot(tenant.owner)
        return yield* body
      }))

    return { live, running, size: () => tenants.size } as const
  })

export type Admission = Effect.Effect.Success<ReturnType<typeof makeAdmission>>
