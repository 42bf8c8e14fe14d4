import { Entity, ShardingConfig } from "@effect/cluster"
import { SqlClient } from "@effect/sql"
import { assert, layer } from "@effect/vitest"
import { Effect, Either, Layer } from "effect"
import { WalletLive } from "../../src/billing/WalletEntity.js"
import { Wallet } from "../../src/billing/WalletRpc.js"
import { ShardFences } from "../../src/platform/cluster/Fences.js"
import { insertUser, TestDatabase } from "../support/Database.js"

/**
 * The wallet entity on its own (issue 29 item 5): `Entity.makeTestClient` runs its behaviour in this fiber, with no
 * runner, no shard and no message storage, against a database of the test's own. What the HTTP suites show through
 * the whole platform (test/billing/wallet.test.ts, concurrency.test.ts), shown here at the entity's door.
 */

const CREDIT = 1_000_000n
/** Every new wallet starts with 1 credit. */
const Env = Layer.mergeAll(TestDatabase({ SIGNUP_CREDITS: "1" }), ShardingConfig.layer(), ShardFences.Default)

const entry = (key: string) => ({
  kind: "consume",
  scope: "test",
  key,
  appId: null,
  event: null,
  metadata: null,
  description: null
})
const charge = (amount: bigint, key: string) => ({ amount, entry: entry(key), dailyCap: null })

let users = 0
const newUser = Effect.suspend(() => {
  const id = `usr_wallet_${process.pid}_${++users}`
  return Effect.as(insertUser(id), id)
})

/** The ledger's lines of `userId`, oldest first. */
const ledger = (userId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ seq: string; amount: string; balanceAfter: string; idempotencyKey: string }>`
      SELECT seq::text, amount::text, balance_after::text, idempotency_key FROM ledger_entries
      WHERE user_id = ${userId} ORDER BY seq::bigint`).pipe(Effect.orDie)

layer(Env)("Wallet entity (makeTestClient)", (it) => {
  it.scoped("a new wallet holds the signup grant, written once", () =>
    Effect.gen(function*() {
      const userId = yield* newUser
      const wallet = (yield* Entity.makeTestClient(Wallet, WalletLive))(userId)
      const client = yield* wallet
      assert.deepStrictEqual(yield* client.Balance(), { balance: CREDIT, held: 0n })
      assert.deepStrictEqual(yield* client.Balance(), { balance: CREDIT, held: 0n })
      assert.deepStrictEqual((yield* ledger(userId)).map((l) => [l.seq, l.amount, l.idempotencyKey]), [["1", "1000000", userId]])
    }))

  it.scoped("charges sent at once are decided one after another: never below zero, every cent accounted for", () =>
    Effect.gen(function*() {
      const userId = yield* newUser
      const client = yield* (yield* Entity.makeTestClient(Wallet, WalletLive))(userId)
      // 25 messages of 0.1 credit each, all in the mailbox together, for a wallet of 1 credit.
      const answers = yield* Effect.forEach(
        Array.from({ length: 25 }, (_, i) => i),
        (i) => client.Charges({ charges: [charge(CREDIT / 10n, `c${i}`)] }),
        { concurrency: "unbounded" }
      )
      const results = answers.map((a) => a[0]!)
      const charged = results.filter(Either.isRight)
      const refused = results.filter(Either.isLeft)
      assert.strictEqual(charged.length, 10)
      assert.strictEqual(refused.length, 15)
      refused.forEach((r) => assert.strictEqual(r.left._tag, "InsufficientCredits"))
      // Each charge saw the balance the one before it left: 0.9, 0.8, ... 0.
      assert.sameMembers(charged.map((c) => c.right.balance), Array.from({ length: 10 }, (_, i) => BigInt(9 - i) * CREDIT / 10n))
      assert.deepStrictEqual(yield* client.Balance(), { balance: 0n, held: 0n })
      // The ledger: the grant, then ten charges at consecutive positions, each balance the previous one less 0.1.
      const lines = yield* ledger(userId)
      assert.deepStrictEqual(lines.map((l) => l.seq), Array.from({ length: 11 }, (_, i) => String(i + 1)))
      lines.slice(1).forEach((line, i) => {
        assert.strictEqual(line.amount, "-100000")
        assert.strictEqual(BigInt(line.balanceAfter), BigInt(lines[i]!.balanceAfter) - 100_000n)
      })
    }))

  it.scoped("the charges of one message are answered each on its own, in order, as if sent alone", () =>
    Effect.gen(function*() {
      const userId = yield* newUser
      const client = yield* (yield* Entity.makeTestClient(Wallet, WalletLive))(userId)
      const answers = yield* client.Charges({
        charges: [charge(600_000n, "a"), charge(600_000n, "b"), charge(400_000n, "c"), charge(600_000n, "a")]
      })
      assert.deepStrictEqual(answers[0], Either.right({ amount: 600_000n, balance: 400_000n, replay: false }))
      assert.isTrue(Either.isLeft(answers[1]!) && answers[1].left._tag === "InsufficientCredits")
      assert.deepStrictEqual(answers[2], Either.right({ amount: 400_000n, balance: 0n, replay: false }))
      // The same key again, in the same message: the first charge's answer, not a second charge.
      assert.deepStrictEqual(answers[3], Either.right({ amount: 600_000n, balance: 400_000n, replay: true }))
      assert.deepStrictEqual(yield* client.Balance(), { balance: 0n, held: 0n })
    }))

  it.scoped("credits and charges interleave in the order they arrive", () =>
    Effect.gen(function*() {
      const userId = yield* newUser
      const client = yield* (yield* Entity.makeTestClient(Wallet, WalletLive))(userId)
      const topUp = yield* client.Credit({ amount: 2n * CREDIT, entry: { ...entry("top-up"), kind: "topup" } })
      assert.deepStrictEqual(topUp, { amount: 2n * CREDIT, balance: 3n * CREDIT, replay: false })
      const [spent] = yield* client.Charges({ charges: [charge(3n * CREDIT, "all")] })
      assert.deepStrictEqual(spent, Either.right({ amount: 3n * CREDIT, balance: 0n, replay: false }))
      // A credit repeated under its key is not paid twice.
      const again = yield* client.Credit({ amount: 2n * CREDIT, entry: { ...entry("top-up"), kind: "topup" } })
      assert.isTrue(again.replay)
      assert.deepStrictEqual(yield* client.Balance(), { balance: 0n, held: 0n })
    }))

  it.scoped("passivated and activated again, a wallet reloads its balance and its keys from the ledger", () =>
    Effect.gen(function*() {
      const userId = yield* newUser
      // First activation: its scope closes at the end of this block, as a passivated entity's does.
      yield* Effect.scoped(Effect.gen(function*() {
        const client = yield* (yield* Entity.makeTestClient(Wallet, WalletLive))(userId)
        const [first] = yield* client.Charges({ charges: [charge(250_000n, "before")] })
        assert.deepStrictEqual(first, Either.right({ amount: 250_000n, balance: 750_000n, replay: false }))
      }))
      // A new activation knows only what the ledger says.
      const client = yield* (yield* Entity.makeTestClient(Wallet, WalletLive))(userId)
      assert.deepStrictEqual(yield* client.Balance(), { balance: 750_000n, held: 0n })
      const [repeat, next] = yield* client.Charges({ charges: [charge(250_000n, "before"), charge(250_000n, "after")] })
      assert.deepStrictEqual(repeat, Either.right({ amount: 250_000n, balance: 750_000n, replay: true }))
      assert.deepStrictEqual(next, Either.right({ amount: 250_000n, balance: 500_000n, replay: false }))
      assert.deepStrictEqual((yield* ledger(userId)).map((l) => [l.seq, l.balanceAfter]), [["1", "1000000"], ["2", "750000"], ["3", "500000"]])
    }))

  it.scoped("a charge made under a session's stale fence is refused by the commit; the rest of its batch is charged", () =>
    Effect.gen(function*() {
      const userId = yield* newUser
      const sql = yield* SqlClient.SqlClient
      // The session's shard, acquired by another runner since the turn started (generation 5 -> 6).
      const shard = `default:${9_000 + users}`
      yield* sql`INSERT INTO shard_generations (shard, generation, runner) VALUES (${shard}, 6, 'other')`.pipe(Effect.orDie)
      const client = yield* (yield* Entity.makeTestClient(Wallet, WalletLive))(userId)
      const answers = yield* client.Charges({
        charges: [
          { ...charge(100_000n, "session:s:1:1"), fence: { shard, generation: "5" } },
          charge(200_000n, "plain"),
          { ...charge(300_000n, "session:s:2:1"), fence: { shard, generation: "6" } }
        ]
      })
      assert.strictEqual(Either.isLeft(answers[0]!) ? answers[0].left._tag : "charged", "StaleOwner")
      assert.deepStrictEqual(answers[1], Either.right({ amount: 200_000n, balance: 800_000n, replay: false }))
      assert.deepStrictEqual(answers[2], Either.right({ amount: 300_000n, balance: 500_000n, replay: false }))
      assert.deepStrictEqual((yield* ledger(userId)).map((l) => l.idempotencyKey), [userId, "plain", "session:s:2:1"])
      assert.deepStrictEqual(yield* client.Balance(), { balance: 500_000n, held: 0n })
    }))
})
