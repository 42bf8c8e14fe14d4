import { Sharding } from "@effect/cluster"
import { assert, describe, it } from "@effect/vitest"
import { Cause, ConfigProvider, Effect, Either, Exit, Fiber, Layer, Option, TestClock, TestContext } from "effect"
import { OUTAGE_WINDOW, RunPayerLive } from "../../src/billing/RunPayerLive.js"
import { UserId } from "../../src/platform/Ids.js"
import { WalletFailure } from "../../src/billing/Domain.js"
import { Wallets } from "../../src/billing/Wallets.js"
import { ENTITY_DEADLINE } from "../../src/platform/Cluster.js"
import { AppConfig } from "../../src/platform/Config.js"
import { EntityDeadline } from "../../src/platform/Outage.js"
import { RunPayer } from "../../src/runtime/Ports.js"

/** The account a test payer charges: the fake wallets here take any. */
const ACCOUNT = UserId.make("usr_acct")

/**
 * `RunPayerLive` over a wallet client that is away for a while (issue 42 item 8): the balance a run reads before each
 * step waits out an outage as the step's charge does, instead of failing the turn with internal_error.
 */

/** A wallet client whose first `failures` calls of each kind die as `Wallets` does in an outage (a defect). */
const flakyWallets = (failures: number) => {
  const calls = { balance: 0, charge: 0 }
  const outage = Effect.die(new WalletFailure({ message: "The wallet could not commit this request." }))
  const wallets = {
    balance: () => Effect.suspend(() => ++calls.balance <= failures ? outage : Effect.succeed(42n)),
    chargeFor: () =>
      Effect.suspend(() => ++calls.charge <= failures ? outage : Effect.succeed({ balance: 0n } as any)),
    credit: () => Effect.dieMessage("not used")
  } as unknown as Wallets
  return { calls, layer: RunPayerLive.pipe(Layer.provide(Layer.succeed(Wallets, wallets))) }
}

// A top-level it.effect that moves the clock provides its test services itself (docs/testing.md, "Time"): in the
// whole suite this file once found the live clock ("testClock.adjust is not a function").
describe("RunPayerLive in an outage", () => {
  it.effect("reads the balance again until the wallet answers", () => {
    const { calls, layer } = flakyWallets(3)
    return Effect.gen(function*() {
      const payer = yield* RunPayer
      const read = yield* Effect.fork(payer.balance(ACCOUNT))
      yield* TestClock.adjust("5 seconds")
      assert.strictEqual(yield* Fiber.join(read), 42n)
      assert.strictEqual(calls.balance, 4)
    }).pipe(Effect.provide(layer), Effect.provide(TestContext.TestContext))
  })

  it.effect("gives up as the charge does, after 12 s", () => {
    const { calls, layer } = flakyWallets(1_000)
    return Effect.gen(function*() {
      const payer = yield* RunPayer
      const read = yield* Effect.fork(payer.balance(ACCOUNT))
      const charge = yield* Effect.fork(payer.charge(ACCOUNT, 1n, { key: "k", description: "d" }))
      yield* TestClock.adjust("30 seconds")
      const [readExit, chargeExit] = [yield* Fiber.await(read), yield* Fiber.await(charge)]
      assert.isTrue(Exit.isFailure(readExit) && Exit.isFailure(chargeExit))
      assert.strictEqual(calls.balance, calls.charge)
    }).pipe(Effect.provide(layer), Effect.provide(TestContext.TestContext))
  })
})

/**
 * A wallet whose owner does not answer (its runner killed, its shards not moved yet: 13 s once in the fault checker):
 * each of its first `unanswered` settles runs to the entity's 12 s deadline and dies as `makeEntityCaller` does; the
 * next one posts.
 */
const deadlineWallets = (unanswered: number) => {
  const calls = { settle: 0 }
  const wallets = {
    settle: (_userId: string, _holdId: string, charges: ReadonlyArray<unknown>) =>
      Effect.suspend(() =>
        ++calls.settle <= unanswered
          ? Effect.zipRight(Effect.sleep(ENTITY_DEADLINE), Effect.die(new EntityDeadline({ message: "No answer from the entity within 12s." })))
          : Effect.succeed(charges.map(() => Either.right({ balance: 0n })))
      )
  } as unknown as Wallets
  return { calls, layer: RunPayerLive.pipe(Layer.provide(Layer.succeed(Wallets, wallets))) }
}

const step = [{ amount: 5n, charge: { key: "run_1:1", description: "step 1" } }]

describe("RunPayerLive: a run's settle", () => {
  it.effect("that ran to the entity's deadline is sent once more, and the run's end waits at most 15 s", () => {
    const { calls, layer } = deadlineWallets(1)
    return Effect.gen(function*() {
      const payer = yield* RunPayer
      const settling = yield* Effect.fork(payer.settle(ACCOUNT, "hold", step, null, false))
      yield* TestClock.adjust(ENTITY_DEADLINE)
      yield* TestClock.adjust("1 second")
      assert.deepStrictEqual(yield* Fiber.join(settling), [true])
      assert.strictEqual(calls.settle, 2)
    }).pipe(Effect.provide(layer), Effect.provide(TestContext.TestContext))
  })

  it.effect("of a wallet that never answers gives up by 15 s from its start: one try after the deadline, cut at the window's end", () => {
    const { calls, layer } = deadlineWallets(1_000)
    return Effect.gen(function*() {
      const payer = yield* RunPayer
      const settling = yield* Effect.fork(payer.settle(ACCOUNT, "hold", step, null, false))
      yield* TestClock.adjust(OUTAGE_WINDOW)
      const exit = yield* Fiber.await(settling)
      assert.isTrue(Exit.isFailure(exit) && Cause.failureOption(exit.cause).pipe(Option.exists((e) => e._tag === "PaymentFailed")))
      assert.strictEqual(calls.settle, 2)
    }).pipe(Effect.provide(layer), Effect.provide(TestContext.TestContext))
  })

  it.effect("of a run cut short lets go at the entity's deadline: no try after it", () => {
    const { calls, layer } = deadlineWallets(1)
    return Effect.gen(function*() {
      const payer = yield* RunPayer
      const settling = yield* Effect.fork(payer.settle(ACCOUNT, "hold", step, null, true))
      yield* TestClock.adjust(ENTITY_DEADLINE)
      const exit = yield* Fiber.await(settling)
      assert.isTrue(Exit.isFailure(exit))
      assert.strictEqual(calls.settle, 1)
    }).pipe(Effect.provide(layer), Effect.provide(TestContext.TestContext))
  })

  it.effect("of a run cut short on a stopping embedded runner fails at once, without asking the wallet nobody owns", () => {
    const { calls, layer } = deadlineWallets(1_000)
    // The embedded runner (nothing configured: no DATABASE_URL), stopping: it let go of every shard, and it is its
    // cluster's only runner.
    const stopping = Layer.mergeAll(
      Layer.succeed(Sharding.Sharding, { isShutdown: Effect.succeed(true) } as unknown as Sharding.Sharding["Type"]),
      AppConfig.Default.pipe(Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map()))))
    )
    return Effect.gen(function*() {
      const payer = yield* RunPayer
      const cut = yield* Effect.fork(payer.settle(ACCOUNT, "hold", step, null, true))
      yield* TestClock.adjust("1 millis")
      const exit = yield* Fiber.poll(cut)
      yield* Fiber.interrupt(cut)
      assert.strictEqual(calls.settle, 0)
      assert.isTrue(Option.exists(exit, (exit) => Exit.isFailure(exit) && Cause.failureOption(exit.cause).pipe(Option.exists((e) => e._tag === "PaymentFailed"))))
      // A run that ended on its own is not cut: its settle still goes to the wallet, as before.
      const settling = yield* Effect.fork(payer.settle(ACCOUNT, "hold", step, null, false))
      yield* TestClock.adjust(OUTAGE_WINDOW)
      yield* Fiber.await(settling)
      assert.isAbove(calls.settle, 0)
    }).pipe(Effect.provide(layer.pipe(Layer.provide(stopping))), Effect.provide(TestContext.TestContext))
  })
})
