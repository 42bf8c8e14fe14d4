import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Layer, TestClock, TestContext } from "effect"
import { RunPayerLive } from "../../src/billing/RunPayerLive.js"
import { WalletFailure } from "../../src/billing/Domain.js"
import { Wallets } from "../../src/billing/Wallets.js"
import { RunPayer } from "../../src/runtime/Ports.js"

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
      const read = yield* Effect.fork(payer.balance("acct"))
      yield* TestClock.adjust("5 seconds")
      assert.strictEqual(yield* Fiber.join(read), 42n)
      assert.strictEqual(calls.balance, 4)
    }).pipe(Effect.provide(layer), Effect.provide(TestContext.TestContext))
  })

  it.effect("gives up as the charge does, after 12 s", () => {
    const { calls, layer } = flakyWallets(1_000)
    return Effect.gen(function*() {
      const payer = yield* RunPayer
      const read = yield* Effect.fork(payer.balance("acct"))
      const charge = yield* Effect.fork(payer.charge("acct", 1n, { key: "k", description: "d" }))
      yield* TestClock.adjust("30 seconds")
      const [readExit, chargeExit] = [yield* Fiber.await(read), yield* Fiber.await(charge)]
      assert.isTrue(Exit.isFailure(readExit) && Exit.isFailure(chargeExit))
      assert.strictEqual(calls.balance, calls.charge)
    }).pipe(Effect.provide(layer), Effect.provide(TestContext.TestContext))
  })
})
