import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, TestClock, TestContext } from "effect"
import { makeAdmission, type Tenant } from "../../src/runtime/sandbox/Admission.js"

/**
 * The sandbox caps (docs/tools.md, "Caps") on Effect's test clock: who runs, who waits, who is closed, who is busy.
 * Each test brings its own `TestContext`: a file run before this one in the same worker (`isolate: false`) can leave
 * the default services without a `TestClock`.
 */

const settings = {
  livePerEndUser: 2,
  livePerAccount: 2,
  liveTotal: 3,
  runningPerEndUser: 1,
  runningPerAccount: 1,
  runningTotal: 2,
  queueMs: 1_000
}
/** An account's end user ('' is the account's own calls, as with a login). */
const owner = (accountId: string, endUserId = "") => ({ accountId, endUserId })

describe("sandbox admission", () => {
  it.scoped("one account runs one call at a time; a second waits its turn, then is busy past the deadline", () =>
    Effect.gen(function*() {
      const admission = yield* makeAdmission(settings)
      const a1 = yield* admission.live(owner("a"), Effect.void)
      const a2 = yield* admission.live(owner("a"), Effect.void)
      const b1 = yield* admission.live(owner("b"), Effect.void)
      const release = yield* Deferred.make<void>()
      const first = yield* Effect.fork(admission.running(a1, Deferred.await(release)))
      yield* TestClock.adjust(10)
      const second = yield* Effect.fork(admission.running(a2, Effect.succeed("ran")))
      const other = yield* admission.running(b1, Effect.succeed("b ran"))
      assert.strictEqual(other, "b ran", "another account is not held up by a's running call")
      yield* TestClock.adjust(999)
      assert.isNull(second.unsafePoll(), "a's second call still waits")
      yield* TestClock.adjust(2)
      const busy = yield* Fiber.await(second)
      assert.isTrue(Exit.isFailure(busy))
      if (Exit.isFailure(busy)) assert.match(String(busy.cause), /busy|already running/)
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(first)
      assert.strictEqual(yield* admission.running(a2, Effect.succeed("ran")), "ran", "the permit came back")
    }).pipe(Effect.provide(TestContext.TestContext)))

  it.scoped("a full account closes its own least recently used idle sandbox; a full server anyone's", () =>
    Effect.gen(function*() {
      const admission = yield* makeAdmission(settings)
      const closed: Array<string> = []
      const live = (account: string, name: string) =>
        Effect.gen(function*() {
          let tenant: Tenant | undefined
          tenant = yield* admission.live(owner(account), Effect.sync(() => closed.push(name)))
          yield* admission.running(tenant, Effect.void)
          return tenant
        })
      yield* live("a", "a1")
      yield* TestClock.adjust(5)
      yield* live("a", "a2")
      yield* TestClock.adjust(5)
      yield* live("a", "a3")
      assert.deepStrictEqual(closed, ["a1"], "a's third sandbox closed a's oldest idle one")
      yield* TestClock.adjust(5)
      yield* live("b", "b1")
      assert.deepStrictEqual(closed, ["a1"], "three fit the server")
      yield* TestClock.adjust(5)
      yield* live("c", "c1")
      assert.deepStrictEqual(closed, ["a1", "a2"], "a full server closes the oldest idle sandbox, whoever's")
      assert.strictEqual(admission.size(), 3)
    }).pipe(Effect.provide(TestContext.TestContext)))

  it.scoped("a running sandbox is never closed to make room: a newcomer waits, then is busy", () =>
    Effect.gen(function*() {
      const admission = yield* makeAdmission({ ...settings, liveTotal: 1 })
      const busyOne = yield* admission.live(owner("a"), Effect.die("a running sandbox must not be closed"))
      const release = yield* Deferred.make<void>()
      const running = yield* Effect.fork(admission.running(busyOne, Deferred.await(release)))
      yield* TestClock.adjust(10)
      const newcomer = yield* Effect.fork(Effect.scoped(admission.live(owner("b"), Effect.void)))
      yield* TestClock.adjust(1_001)
      const outcome = yield* Fiber.await(newcomer)
      assert.isTrue(Exit.isFailure(outcome), "no room within the deadline: busy")
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(running)
    }).pipe(Effect.provide(TestContext.TestContext)))

  it.scoped("one end user's endless call leaves the account's other end users served at once", () =>
    Effect.gen(function*() {
      const admission = yield* makeAdmission({ ...settings, runningPerAccount: 2, livePerAccount: 4, liveTotal: 8 })
      const looper = yield* admission.live(owner("a", "alice"), Effect.void)
      const looper2 = yield* admission.live(owner("a", "alice"), Effect.void)
      const other = yield* admission.live(owner("a", "bob"), Effect.void)
      const forever = yield* Deferred.make<void>()
      const loop = yield* Effect.fork(admission.running(looper, Deferred.await(forever)))
      yield* TestClock.adjust(10)
      // alice's second call waits behind her first (one at a time per end user)...
      const again = yield* Effect.fork(admission.running(looper2, Effect.succeed("alice again")))
      yield* TestClock.adjust(10)
      assert.isNull(again.unsafePoll(), "alice's second call waits for her first")
      // ...while bob, of the same account, runs without waiting at all.
      assert.strictEqual(yield* admission.running(other, Effect.succeed("bob ran")), "bob ran")
      yield* TestClock.adjust(1_000)
      const busy = yield* Fiber.await(again)
      assert.isTrue(Exit.isFailure(busy))
      if (Exit.isFailure(busy)) assert.match(String(busy.cause), /this end user is already running/)
      yield* Fiber.interrupt(loop)
    }).pipe(Effect.provide(TestContext.TestContext)))

  it.scoped("waiting calls are served round-robin over an account's end users, not first come first served", () =>
    Effect.gen(function*() {
      // Everyone waits on one account slot: alice queued three calls before bob queued one.
      const admission = yield* makeAdmission({ ...settings, runningPerEndUser: 3, runningPerAccount: 1, livePerEndUser: 4, livePerAccount: 8, liveTotal: 8, queueMs: 60_000 })
      const order: Array<string> = []
      const gate = yield* Deferred.make<void>()
      const first = yield* admission.live(owner("a", "alice"), Effect.void)
      const holding = yield* Effect.fork(admission.running(first, Deferred.await(gate)))
      yield* TestClock.adjust(1)
      const call = (who: string, name: string) =>
        Effect.gen(function*() {
          const tenant = yield* admission.live(owner("a", who), Effect.void)
          return yield* Effect.fork(admission.running(tenant, Effect.sync(() => order.push(name))))
        })
      const fibers = [
        yield* call("alice", "alice 2"),
        yield* call("alice", "alice 3"),
        yield* call("alice", "alice 4"),
        yield* call("bob", "bob 1")
      ]
      yield* TestClock.adjust(1)
      assert.deepStrictEqual(order, [], "all wait for the account's one slot")
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(holding)
      yield* Effect.forEach(fibers, Fiber.join)
      assert.deepStrictEqual(order, ["alice 2", "bob 1", "alice 3", "alice 4"], "bob's call comes right after alice's next one")
    }).pipe(Effect.provide(TestContext.TestContext)))

  it.scoped("waiting calls are served round-robin over accounts for the server's slots", () =>
    Effect.gen(function*() {
      const admission = yield* makeAdmission({ ...settings, runningPerEndUser: 3, runningPerAccount: 3, runningTotal: 1, livePerEndUser: 4, livePerAccount: 8, liveTotal: 8, queueMs: 60_000 })
      const order: Array<string> = []
      const gate = yield* Deferred.make<void>()
      const first = yield* admission.live(owner("a"), Effect.void)
      const holding = yield* Effect.fork(admission.running(first, Deferred.await(gate)))
      yield* TestClock.adjust(1)
      const call = (account: string, name: string) =>
        Effect.gen(function*() {
          const tenant = yield* admission.live(owner(account), Effect.void)
          return yield* Effect.fork(admission.running(tenant, Effect.sync(() => order.push(name))))
        })
      const fibers = [yield* call("a", "a 2"), yield* call("a", "a 3"), yield* call("b", "b 1")]
      yield* TestClock.adjust(1)
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(holding)
      yield* Effect.forEach(fibers, Fiber.join)
      assert.deepStrictEqual(order, ["a 2", "b 1", "a 3"])
    }).pipe(Effect.provide(TestContext.TestContext)))

  it.scoped("an end user's live sandboxes stop at its own cap, leaving the account's room to others", () =>
    Effect.gen(function*() {
      const admission = yield* makeAdmission({ ...settings, livePerEndUser: 2, livePerAccount: 4, liveTotal: 8, runningPerAccount: 2 })
      const forever = yield* Deferred.make<void>()
      // alice holds two sandboxes, both in a call: her third cannot close either, and waits until busy.
      const a1 = yield* admission.live(owner("a", "alice"), Effect.die("a running sandbox must not be closed"))
      const a2 = yield* admission.live(owner("a", "alice"), Effect.die("a running sandbox must not be closed"))
      const loops = [yield* Effect.fork(admission.running(a1, Deferred.await(forever))), yield* Effect.fork(admission.running(a2, Deferred.await(forever)))]
      yield* TestClock.adjust(1)
      const third = yield* Effect.fork(Effect.scoped(admission.live(owner("a", "alice"), Effect.void)))
      // bob, same account, still gets a sandbox at once and runs in it.
      const bob = yield* admission.live(owner("a", "bob"), Effect.void)
      assert.strictEqual(yield* admission.running(bob, Effect.succeed("bob ran")), "bob ran")
      yield* TestClock.adjust(1_001)
      const outcome = yield* Fiber.await(third)
      assert.isTrue(Exit.isFailure(outcome), "alice's third sandbox is busy")
      yield* Effect.forEach(loops, Fiber.interrupt)
    }).pipe(Effect.provide(TestContext.TestContext)))

  it.scoped("a waiting call that times out or is interrupted leaves no slot behind", () =>
    Effect.gen(function*() {
      const admission = yield* makeAdmission(settings)
      const a = yield* admission.live(owner("a"), Effect.void)
      const b = yield* admission.live(owner("a", "other"), Effect.void)
      const gate = yield* Deferred.make<void>()
      const holding = yield* Effect.fork(admission.running(a, Deferred.await(gate)))
      yield* TestClock.adjust(1)
      const waiting = yield* Effect.fork(admission.running(b, Effect.succeed("never")))
      yield* TestClock.adjust(1)
      yield* Fiber.interrupt(waiting)
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(holding)
      assert.strictEqual(yield* admission.running(b, Effect.succeed("ran")), "ran", "the account's slot is free again")
      assert.strictEqual(yield* admission.running(a, Effect.succeed("ran")), "ran")
    }).pipe(Effect.provide(TestContext.TestContext)))
})
