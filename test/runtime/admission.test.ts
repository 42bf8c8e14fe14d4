import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, TestClock, TestContext } from "effect"
import { makeAdmission, type Tenant } from "../../src/runtime/sandbox/Admission.js"

/**
 * The sandbox caps (docs/tools.md, "Caps") on Effect's test clock: who runs, who waits, who is closed, who is busy.
 * Each test brings its own `TestContext`: a file run before this one in the same worker (`isolate: false`) can leave
 * the default services without a `TestClock`.
 */

const settings = { livePerAccount: 2, liveTotal: 3, runningPerAccount: 1, runningTotal: 2, queueMs: 1_000 }

describe("sandbox admission", () => {
  it.scoped("one account runs one call at a time; a second waits its turn, then is busy past the deadline", () =>
    Effect.gen(function*() {
      const admission = yield* makeAdmission(settings)
      const a1 = yield* admission.live("a", Effect.void)
      const a2 = yield* admission.live("a", Effect.void)
      const b1 = yield* admission.live("b", Effect.void)
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
      const live = (owner: string, name: string) =>
        Effect.gen(function*() {
          let tenant: Tenant | undefined
          tenant = yield* admission.live(owner, Effect.sync(() => closed.push(name)))
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
      const busyOne = yield* admission.live("a", Effect.die("a running sandbox must not be closed"))
      const release = yield* Deferred.make<void>()
      const running = yield* Effect.fork(admission.running(busyOne, Deferred.await(release)))
      yield* TestClock.adjust(10)
      const newcomer = yield* Effect.fork(Effect.scoped(admission.live("b", Effect.void)))
      yield* TestClock.adjust(1_001)
      const outcome = yield* Fiber.await(newcomer)
      assert.isTrue(Exit.isFailure(outcome), "no room within the deadline: busy")
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(running)
    }).pipe(Effect.provide(TestContext.TestContext)))
})
