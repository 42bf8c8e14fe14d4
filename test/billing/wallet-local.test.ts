import { UserId } from "../../src/platform/Ids.js"
import { assert, describe, layer } from "@effect/vitest"
import { Effect, Either, Layer, Metric } from "effect"
import { WalletLive } from "../../src/billing/WalletEntity.js"
import { Wallets } from "../../src/billing/Wallets.js"
import { ClusterLive } from "../../src/platform/Cluster.js"
import { AppConfig } from "../../src/platform/Config.js"
import { walletChargeMessages, walletCharges } from "../../src/platform/telemetry/Metrics.js"
import { insertUser, TestDatabase } from "../support/Database.js"

/**
 * A charge on the runner that owns the wallet (issue 45 item 1, one road into the actor): `Wallets.charge` sends it
 * in a cluster message like any other (charges of one wallet batched by the caller, `makeEntityBatcher`), delivered
 * into the entity's mailbox on this runner, and the entity decides and commits what waits there together.
 */

const CREDIT = 1_000_000n
const Env = Wallets.Default.pipe(
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
  const id = UserId.make(`usr_local_${process.pid}_${++users}`)
  return Effect.as(insertUser(id), id)
})

// Embedded mode only (test/support/Suites.ts): in services mode `ClusterLive` is the clustered runner, and built here on its own (no server
// around it) its first message got no answer within the test's deadline (not traced). In services mode the same path
// is taken by the HTTP suites (test/billing/concurrency.test.ts, wallet.test.ts), whose one runner owns every wallet.
describe("local charges", () => {
  layer(Env)("Wallets.charge on the wallet's own runner", (it) => {
    it.effect("is a cluster message into the entity: serialised, never below zero, a repeated key replays", () =>
      Effect.gen(function*() {
        const wallets = yield* Wallets
        const userId = yield* newUser
        assert.strictEqual(yield* wallets.balance(userId), CREDIT)
        const charge = (key: string) =>
          Effect.either(wallets.charge(userId, CREDIT / 10n, { kind: "event", scope: "test", key }))
        const [directBefore, byMessageBefore, messagesBefore] = yield* counts
        const results = yield* Effect.forEach(Array.from({ length: 25 }, (_, i) => `c${i}`), charge, { concurrency: "unbounded" })
        // One road: every charge went in a message to this runner, none around the cluster; sent at once, they
        // left in batches (the first alone, those that came while it was on its way together).
        const [directAfter, byMessageAfter, messagesAfter] = yield* counts
        assert.deepStrictEqual([directAfter - directBefore, byMessageAfter - byMessageBefore], [0, 25])
        assert.isAtLeast(messagesAfter - messagesBefore, 1)
        assert.isBelow(messagesAfter - messagesBefore, 25)
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
      }))

    it.effect("a hold voided for good by its run's next owner (final settle): the cut run's later settle posts nothing new, and replays what it posted before", () =>
      Effect.gen(function*() {
        const wallets = yield* Wallets
        const userId = yield* newUser
        const step = (n: number) => ({ amount: CREDIT / 10n, entry: { kind: "usage", scope: "run", key: `session:cut_${userId}:1:${n}` } })
        assert.strictEqual((yield* wallets.hold(userId, `session:cut_${userId}:1`, CREDIT / 2n)).amount, CREDIT / 2n)
        // Step 1 posted before the cut (a settle of the run's that did arrive); then the next owner's void.
        assert.isTrue(Either.isRight((yield* wallets.settle(userId, `session:cut_${userId}:1`, [step(1)], null))[0]!))
        yield* wallets.settle(userId, `session:cut_${userId}:1`, [], null, true)
        assert.deepStrictEqual(yield* wallets.funds(userId), { balance: CREDIT * 9n / 10n, held: 0n })
        // The cut run's own settle, late: step 1 replays, step 2 is refused; a new hold under its id holds nothing.
        const late = yield* wallets.settle(userId, `session:cut_${userId}:1`, [step(1), step(2)], null)
        assert.isTrue(Either.isRight(late[0]!) && late[0].right.replay)
        assert.isTrue(Either.isLeft(late[1]!) && late[1].left._tag === "StaleOwner")
        assert.strictEqual((yield* wallets.hold(userId, `session:cut_${userId}:1`, CREDIT / 2n)).amount, 0n)
        assert.deepStrictEqual(yield* wallets.funds(userId), { balance: CREDIT * 9n / 10n, held: 0n })
        // Another run's hold and settle are untouched by it.
        assert.strictEqual((yield* wallets.hold(userId, "run_other", CREDIT / 10n)).amount, CREDIT / 10n)
      }))
  })
})
