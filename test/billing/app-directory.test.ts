import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer, Option } from "effect"
import { AppDirectory } from "../../src/billing/AppDirectory.js"
import { type MeterRow, MetersRepo } from "../../src/billing/MetersRepo.js"
import { type OAuthApp, OAuthApps } from "../../src/identity/oauth/Apps.js"
import { AppId } from "../../src/platform/Ids.js"

/**
 * The app and meter cache of `POST /v1/events` (issue 45 item 3): a change invalidates what the cache holds, and a
 * lookup that a change overtook does not put what it read back. test/billing/events.test.ts checks the same through
 * the API (a disabled meter, a new price, a new cap are seen at once).
 */
const app = (dailyCapPerUser: bigint | null) => ({ id: "app_1", dailyCapPerUser }) as unknown as OAuthApp
const APP = AppId.make("app_1")
const meter = { id: "mtr_1", appId: "app_1", eventName: "call", creditsPerUse: 10_000n, disabled: false } as unknown as MeterRow

/** A directory over an app whose reads are counted and, while `gate` is set, wait for it. */
const directory = Effect.gen(function*() {
  let current = app(null)
  let reads = 0
  let gate: Deferred.Deferred<void> | undefined
  const layer = AppDirectory.DefaultWithoutDependencies.pipe(
    Layer.provide(Layer.succeed(OAuthApps, {
      find: () =>
        Effect.suspend(() => {
          reads++
          const seen = current
          return Effect.as(gate === undefined ? Effect.void : Deferred.await(gate), Option.some(seen))
        })
    } as unknown as OAuthApps)),
    Layer.provide(Layer.succeed(MetersRepo, { findMeter: () => Effect.succeed(Option.some(meter)) } as unknown as MetersRepo))
  )
  const service = yield* Effect.provide(AppDirectory, layer)
  return {
    service,
    reads: () => reads,
    change: (cap: bigint) => void (current = app(cap)),
    hold: Effect.map(Deferred.make<void>(), (d) => (gate = d)),
    release: Effect.suspend(() => (gate === undefined ? Effect.void : Effect.asVoid(Deferred.succeed(gate, undefined))))
  }
})

const capOf = (priced: { readonly app: Option.Option<OAuthApp> }) => Option.getOrThrow(priced.app).dailyCapPerUser

describe("AppDirectory", () => {
  it.live("reads an app and its meter once, and again after an invalidation", () =>
    Effect.gen(function*() {
      const d = yield* directory
      yield* d.service.priced(APP, "call")
      yield* d.service.priced(APP, "call")
      assert.strictEqual(d.reads(), 1)
      d.change(5n)
      yield* d.service.invalidate(APP)
      assert.strictEqual(capOf(yield* d.service.priced(APP, "call")), 5n)
      assert.strictEqual(d.reads(), 2)
    }))

  it.live("a lookup that an invalidation overtook is answered but not kept", () =>
    Effect.gen(function*() {
      const d = yield* directory
      const gate = yield* d.hold
      // The lookup reads the old app, then waits; the app changes and is invalidated meanwhile.
      const slow = yield* Effect.fork(d.service.priced(APP, "call"))
      while (d.reads() === 0) yield* Effect.yieldNow()
      d.change(7n)
      yield* d.service.invalidate(APP)
      yield* Deferred.succeed(gate, undefined)
      assert.isNull(capOf(yield* Fiber.join(slow)))
      // The next charge reads the app again and sees the change.
      assert.strictEqual(capOf(yield* d.service.priced(APP, "call")), 7n)
      assert.strictEqual(d.reads(), 2)
    }))
})
