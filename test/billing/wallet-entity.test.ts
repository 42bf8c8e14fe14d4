import { Entity, ShardingConfig } from "@effect/cluster"
import { SqlClient } from "@effect/sql"
import { assert, layer } from "@effect/vitest"
import { Effect, Either, Layer, TestServices } from "effect"
import { WalletLive } from "../../src/billing/WalletEntity.js"
import { Wallet } from "../../src/billing/WalletRpc.js"
import { ShardFences } from "../../src/platform/cluster/Fences.js"
import { insertUser, TestDatabase } from "../support/Database.js"
import { pollUntil } from "../support/Poll.js"

/**
 * The wallet entity on its own (issue 29 item 5): `Entity.makeTestClient` runs its behaviour in this fiber, with no
 * runner, no shard and no message storage, against a database of the test's own. What the HTTP suites show through
 * the whole platform (test/billing/wallet.test.ts, concurrency.test.ts), shown here at the entity's door.
 */

const CREDIT = 1_000_000n
/** Every new wallet starts with 1 credit; a hold lives 2 s unless asked for again. */
const HOLD_TTL_MS = 2_000
const Env = Layer.mergeAll(
  TestDatabase({ SIGNUP_CREDITS: "1", HOLD_TTL_SECONDS: String(HOLD_TTL_MS / 1000) }),
  ShardingConfig.layer(),
  ShardFences.Default
)

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
/** A run's step, as a settle posts it (docs/billing.md, "Holds"). */
const step = (amount: bigint, key: string) => ({ amount, entry: { ...entry(key), kind: "usage", scope: "run" }, dailyCap: null })

let users = 0
const newUser = Effect.suspend(() => {
  const id = `usr_wallet_${process.pid}_${++users}`
  return Effect.as(insertUser(id), id)
})

/** The ledger's lines of `userId`, oldest first. */
/** The wallet's holds and `held` as the database has them. */
const stored = (userId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.all({
      holds: sql<{ holdId: string; amount: string }>`SELECT hold_id, amount::text FROM wallet_holds WHERE user_id = ${userId} ORDER BY hold_id`,
      held: Effect.map(sql<{ held: string }>`SELECT held::text FROM wallets WHERE user_id = ${userId}`, (rows) => rows[0]?.held)
    })).pipe(Effect.orDie, Effect.map(({ held, holds }) => ({ held, holds: holds.map((h) => [h.holdId, h.amount]) })))

/** `effect` on the wall clock, with this layer's configuration still (`TestServices.provideLive` would replace both). */
const onLiveClock = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.flatMap(TestServices.provideLive(Effect.clock), (clock) => Effect.withClock(effect, clock))

/**
 * Until `holdId`'s expiry has passed, read on the database's clock (which a wallet's start compares with) and this
 * process's (which a running wallet compares with): polled, so it costs the hold's lifetime and no guessed slack.
 */
const expired = (userId: string, holdId: string) =>
  pollUntil(
    Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql<{ expired: boolean; expiresAt: string }>`
        SELECT expires_at <= now() AS expired, (extract(epoch FROM expires_at) * 1000)::bigint::text AS expires_at
        FROM wallet_holds WHERE user_id = ${userId} AND hold_id = ${holdId}`).pipe(Effect.orDie),
    (rows) => rows[0]?.expired === true && Date.now() > Number(rows[0].expiresAt),
    `hold ${holdId} expired`,
    { every: 50, within: HOLD_TTL_MS + 10_000 }
  )

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

  it.scoped("a message sent again after a cut (same call) answers as its first delivery; another call with the key replays", () =>
    Effect.gen(function*() {
      const userId = yield* newUser
      const client = yield* (yield* Entity.makeTestClient(Wallet, WalletLive))(userId)
      const sent = (key: string, origin: string, amount = 250_000n) =>
        Effect.map(client.Charges({ charges: [{ amount, entry: { ...entry(key), origin }, dailyCap: null }] }), (a) => a[0]!)
      const first = yield* sent("k", "call-1")
      assert.deepStrictEqual(first, Either.right({ amount: 250_000n, balance: 750_000n, replay: false }))
      // The resend finds its own entry at the commit (the key looked up in the same statement).
      assert.deepStrictEqual(yield* sent("k", "call-1"), first)
      // Drained, a resend is refused for the balance first and then found by its key: still this call's own.
      assert.isTrue(Either.isRight(yield* sent("drain", "call-2", 750_000n)))
      assert.deepStrictEqual(yield* sent("k", "call-1"), first)
      // The client's own retry is a new call: a replay (spec 2.3), in both ways it can be found.
      assert.deepStrictEqual(yield* sent("k", "call-3"), Either.right({ amount: 250_000n, balance: 750_000n, replay: true }))
      const stored = yield* Effect.flatMap(SqlClient.SqlClient, (sql) =>
        sql<{ key: string; origin: string | null }>`
          SELECT idempotency_key AS key, origin FROM ledger_entries WHERE user_id = ${userId} ORDER BY seq`).pipe(Effect.orDie)
      assert.deepStrictEqual(stored.map((r) => [r.key, r.origin]), [[userId, null], ["k", "call-1"], ["drain", "call-2"]])
    }))

  // Holds (docs/billing.md, "Holds"): their expiry is wall-clock time, as the database's `now()` reads it, so these
  // run on the live clock (`onLiveClock`; `scopedLive` would not get this layer).
  it.scoped("a hold whose run died stays reserved, and its run's next owner resumes it (not placed twice) and settles it once", () =>
    Effect.gen(function*() {
      const userId = yield* newUser
      // The run's owner holds, then is gone without a settle (its runner killed: nothing posts or voids the hold).
      yield* Effect.scoped(Effect.gen(function*() {
        const client = yield* (yield* Entity.makeTestClient(Wallet, WalletLive))(userId)
        const placed = yield* client.Hold({ hold: "run_dead", amount: 600_000n })
        assert.strictEqual(placed.hold, 600_000n)
        assert.isAbove(placed.expiresAt!, Date.now())
      }))
      assert.deepStrictEqual(yield* stored(userId), { held: "600000", holds: [["run_dead", "600000"]] })
      // The wallet's next activation (a restart, another runner) keeps it reserved: no one else may take it.
      const client = yield* (yield* Entity.makeTestClient(Wallet, WalletLive))(userId)
      assert.deepStrictEqual(yield* client.Balance(), { balance: CREDIT, held: 600_000n })
      const [taken] = yield* client.Charges({ charges: [charge(500_000n, "reserved")] })
      assert.strictEqual(Either.isLeft(taken!) ? taken.left._tag : "charged", "InsufficientCredits")
      // The run's next owner (a durable run executed again) asks for the same hold: the same one, not a second.
      const resumed = yield* client.Hold({ hold: "run_dead", amount: 600_000n })
      assert.deepStrictEqual([resumed.hold, resumed.held], [600_000n, 600_000n])
      const settled = yield* client.Settle({ hold: "run_dead", charges: [step(150_000n, "run_dead:1"), step(100_000n, "run_dead:2")] })
      assert.deepStrictEqual(settled.map((a) => Either.isRight(a) && a.right.replay), [false, false])
      // A settle sent again (the old owner's, a resend) voids nothing more and posts nothing twice.
      const again = yield* client.Settle({ hold: "run_dead", charges: [step(150_000n, "run_dead:1"), step(100_000n, "run_dead:2")] })
      assert.deepStrictEqual(again.map((a) => Either.isRight(a) && a.right.replay), [true, true])
      assert.deepStrictEqual(yield* client.Balance(), { balance: 750_000n, held: 0n })
      assert.deepStrictEqual(yield* stored(userId), { held: "0", holds: [] })
      assert.deepStrictEqual((yield* ledger(userId)).map((l) => [l.idempotencyKey, l.amount]), [
        [userId, "1000000"],
        ["run_dead:1", "-150000"],
        ["run_dead:2", "-100000"]
      ])
    }).pipe(onLiveClock))

  it.scoped("a hold no one resumes is voided once it expires: ignored at once by a running wallet, deleted by the next start", () =>
    Effect.gen(function*() {
      const userId = yield* newUser
      yield* Effect.scoped(Effect.gen(function*() {
        const client = yield* (yield* Entity.makeTestClient(Wallet, WalletLive))(userId)
        yield* client.Hold({ hold: "run_gone", amount: 700_000n })
      }))
      yield* expired(userId, "run_gone")
      // No one touched the wallet since: the row is still there, and only the wallet knows it is void.
      assert.deepStrictEqual(yield* stored(userId), { held: "700000", holds: [["run_gone", "700000"]] })
      const client = yield* (yield* Entity.makeTestClient(Wallet, WalletLive))(userId)
      // The wallet's start deleted it (recovery), and its credits are available.
      assert.deepStrictEqual(yield* stored(userId), { held: "0", holds: [] })
      assert.deepStrictEqual(yield* client.Balance(), { balance: CREDIT, held: 0n })

      // A running wallet: a hold that expires under it is ignored from then on, and removed with its next request.
      yield* client.Hold({ hold: "run_quiet", amount: 900_000n })
      const [reserved] = yield* client.Charges({ charges: [charge(200_000n, "while-held")] })
      assert.strictEqual(Either.isLeft(reserved!) ? reserved.left._tag : "charged", "InsufficientCredits")
      yield* expired(userId, "run_quiet")
      const [freed] = yield* client.Charges({ charges: [charge(200_000n, "after-expiry")] })
      assert.deepStrictEqual(freed, Either.right({ amount: 200_000n, balance: 800_000n, replay: false }))
      assert.deepStrictEqual(yield* stored(userId), { held: "0", holds: [] })
      // Its run settling late posts its steps as ordinary charges, from what is available.
      const late = yield* client.Settle({ hold: "run_quiet", charges: [step(300_000n, "run_quiet:1")] })
      assert.deepStrictEqual(late, [Either.right({ amount: 300_000n, balance: 500_000n, replay: false })])
    }).pipe(onLiveClock))

  it.scoped("many runs hold, pay locally and settle on one wallet at once, beside plain charges: no overdraft, each step posted once", () =>
    Effect.gen(function*() {
      const userId = yield* newUser
      const client = yield* (yield* Entity.makeTestClient(Wallet, WalletLive))(userId)
      const RUNS = 40
      const STEP = 20_000n
      // 40 runs each wanting 3 steps (60,000) and 20 charges of 30,000: 3 credits asked of a wallet of 1.
      const runs = Effect.forEach(Array.from({ length: RUNS }, (_, i) => i), (i) =>
        Effect.gen(function*() {
          const id = `run_many_${i}`
          const { hold } = yield* client.Hold({ hold: id, amount: 3n * STEP })
          // Paid against the hold in the run's memory: as many steps as it covers, no request per step.
          const steps = Array.from({ length: Number(hold / STEP) }, (_, n) => step(STEP, `${id}:${n + 1}`))
          const posted = yield* client.Settle({ hold: id, charges: steps })
          // Half the runs' settles are sent twice (a resend after a cut): replays.
          const resent = i % 2 === 0 ? yield* client.Settle({ hold: id, charges: steps }) : []
          return { hold, posted, resent }
        }), { concurrency: "unbounded" })
      const charges = Effect.forEach(
        Array.from({ length: 20 }, (_, i) => i),
        (i) => Effect.map(client.Charges({ charges: [charge(30_000n, `plain_${i}`)] }), ([answer]) => answer!),
        { concurrency: "unbounded" }
      )
      const [ran, plain] = yield* Effect.all([runs, charges], { concurrency: 2 })

      let runsPaid = 0n
      for (const { hold, posted, resent } of ran) {
        // Whatever a hold covered was posted, every step of it: a hold is credits no one else took.
        assert.isTrue(posted.every((a) => Either.isRight(a) && !a.right.replay))
        assert.isTrue(resent.every((a) => Either.isRight(a) && a.right.replay))
        runsPaid += BigInt(posted.length) * STEP
        assert.isAtMost(Number(BigInt(posted.length) * STEP), Number(hold))
      }
      const plainPaid = plain.filter(Either.isRight).reduce((sum, a) => sum + a.right.amount, 0n)
      plain.filter(Either.isLeft).forEach((a) => assert.strictEqual(a.left._tag, "InsufficientCredits"))
      assert.isAbove(Number(runsPaid), 0)

      const { balance, held } = yield* client.Balance()
      assert.strictEqual(held, 0n)
      assert.strictEqual(balance, CREDIT - runsPaid - plainPaid)
      assert.isAtLeast(Number(balance), 0)
      // The ledger: one line per posted step and charge, in a chain that ends at the balance.
      const lines = yield* ledger(userId)
      assert.strictEqual(lines.filter((l) => l.idempotencyKey.startsWith("run_many_")).length, Number(runsPaid / STEP))
      assert.strictEqual(new Set(lines.map((l) => l.idempotencyKey)).size, lines.length)
      lines.slice(1).forEach((line, i) => assert.strictEqual(BigInt(line.balanceAfter), BigInt(lines[i]!.balanceAfter) + BigInt(line.amount)))
      assert.strictEqual(BigInt(lines[lines.length - 1]!.balanceAfter), balance)
      assert.deepStrictEqual(yield* stored(userId), { held: "0", holds: [] })
    }).pipe(onLiveClock))

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
