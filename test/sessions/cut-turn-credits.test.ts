import { Entity, ShardingConfig } from "@effect/cluster"
import { SqlClient } from "@effect/sql"
import { assert, describe, layer } from "@effect/vitest"
import { Context, Deferred, Effect, Layer, Queue, Schedule, TestServices } from "effect"
import { ShardFences } from "../../src/platform/cluster/Fences.js"
import { AppConfig } from "../../src/platform/Config.js"
import { Stopping } from "../../src/platform/Stopping.js"
import { RunnerTurns } from "../../src/sessions/Activation.js"
import type { Micros } from "../../src/platform/Money.js"
import { PaymentFailed, RunPayer } from "../../src/runtime/Ports.js"
import { SessionLive } from "../../src/sessions/Session.js"
import { Session } from "../../src/sessions/SessionRpc.js"
import { turnRunId } from "../../src/sessions/Rows.js"
import type { SessionId } from "../../src/platform/Ids.js"
import { KnowledgeGate } from "../support/Ports.js"
import { TestDatabase } from "../support/Database.js"
import { newEntitySession } from "./entity-support.js"

/**
 * A cut turn's settle that reaches the wallet after the session's next activation counted the ledger (the fault
 * checker, with the session worker in its entity's scope: the session restarted on the same runner, under the same
 * fence, and the cut turn's settle posted 16,780 micro-credits after the next load recorded 0 for its run). The next
 * activation voids the turn's hold for good (`RunPayer.voidHold`: the wallet refuses the cut turn's later settles,
 * test/billing/decide.test.ts and test/billing/holds.test.ts) and then counts the turn's credits again: a settle the
 * wallet took before the void is in the run. Promise: a run's recorded credits are the ledger's lines for its turn.
 */

/** The cut turn's settles that reached the wallet but whose answer never came back (a deadline), not yet taken. */
class Mailbox extends Context.Tag("test/CutTurnMailbox")<Mailbox, {
  readonly settles: Array<{ readonly accountId: string; readonly holdId: string; readonly charges: ReadonlyArray<{ readonly amount: Micros; readonly key: string }> }>
  readonly voided: Deferred.Deferred<string>
  /** While it holds a deferred, a void waits for it before the wallet decides (a wallet slow to answer). */
  readonly gate: Array<Deferred.Deferred<void>>
}>() {}

/** Appends a credit and a charge of `amount` to the user's ledger, as the wallet's commit would (chain and balance). */
const postCharge = (userId: string, key: string, amount: Micros) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql.withTransaction(Effect.gen(function*() {
      yield* sql`INSERT INTO wallets (user_id, balance, seq) VALUES (${userId}, 0, 0) ON CONFLICT (user_id) DO NOTHING`
      const [wallet] = yield* sql<{ balance: string; seq: string }>`SELECT balance::text, seq::text FROM wallets WHERE user_id = ${userId} FOR UPDATE`
      const balance = BigInt(wallet!.balance)
      const seq = BigInt(wallet!.seq)
      yield* sql`
        INSERT INTO ledger_entries (user_id, seq, amount, kind, scope, idempotency_key, balance_after)
        VALUES (${userId}, ${String(seq + 1n)}, ${String(amount)}, 'grant', 'test', ${`grant:${key}`}, ${String(balance + amount)})`
      yield* sql`
        INSERT INTO ledger_entries (user_id, seq, amount, kind, scope, idempotency_key, balance_after)
        VALUES (${userId}, ${String(seq + 2n)}, ${String(-amount)}, 'usage', 'run', ${key}, ${String(balance)})`
      yield* sql`UPDATE wallets SET seq = ${String(seq + 2n)} WHERE user_id = ${userId}`
    }))).pipe(Effect.orDie)

/**
 * A wallet whose settles reach it but are never answered (each fails as a deadline does, after it was delivered), and
 * which takes what reached it in order: a void is decided after the settles delivered before it (its mailbox).
 */
const SlowWallet = Layer.effectContext(Effect.gen(function*() {
  const settles: Array<{ readonly accountId: string; readonly holdId: string; readonly charges: ReadonlyArray<{ readonly amount: Micros; readonly key: string }> }> = []
  const voided = yield* Deferred.make<string>()
  const gate: Array<Deferred.Deferred<void>> = []
  const sql = yield* SqlClient.SqlClient
  const payer = RunPayer.of({
    charge: () => Effect.void,
    balance: () => Effect.succeed(1_000_000_000n),
    hold: (_, __, amount) => Effect.succeed({ amount, expiresAt: Number.MAX_SAFE_INTEGER }),
    settle: (accountId, holdId, charges) =>
      Effect.suspend(() => {
        settles.push({ accountId, holdId, charges: charges.map(({ amount, charge }) => ({ amount, key: charge.key })) })
        return Effect.fail(new PaymentFailed({ message: "No answer from the entity within 12s." }))
      }),
    voidHold: (accountId, holdId) =>
      Effect.gen(function*() {
        for (const wait of gate) yield* Deferred.await(wait)
        // The settle delivered before the void is decided first, then the void.
        for (const settle of settles.splice(0)) {
          if (settle.holdId !== holdId) continue
          for (const c of settle.charges) yield* postCharge(accountId, c.key, c.amount)
        }
        yield* Deferred.succeed(voided, holdId)
      }).pipe(Effect.provideService(SqlClient.SqlClient, sql))
  })
  return Context.make(RunPayer, payer).pipe(Context.add(Mailbox, { settles, voided, gate }))
}))

const Env = Layer.mergeAll(AppConfig.Default, Stopping.Default, RunnerTurns.Default, ShardingConfig.layer(), ShardFences.Default, SlowWallet, KnowledgeGate.layer).pipe(
  Layer.provideMerge(TestDatabase({ SHUTDOWN_GRACE: "0 millis" }))
)

const newSession = newEntitySession("cutcredits", { searches: true })
const nextSearch = Effect.flatMap(KnowledgeGate, (gate) => Queue.take(gate.searches))

/**
 * The session's first activation, cut mid-turn (its step charged, at its tool call) as a restart on the same runner
 * cuts it: its settle reaches the wallet unanswered.
 */
const cutFirstActivation = (sessionId: string) =>
  Effect.scoped(Effect.gen(function*() {
    const session = yield* (yield* Entity.makeTestClient(Session, SessionLive))(sessionId)
    yield* session.Send({ message: `/tool file_search ${JSON.stringify({ query: "cut" })}`, budget: null })
    yield* nextSearch
  }))

/** The run's recorded credits and what the ledger holds for its turn's steps. */
const creditsOf = (sessionId: SessionId, turn: number) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ recorded: string; ledger: string; status: string }>`
      SELECT r.credits_charged::text AS recorded, r.status,
        coalesce((SELECT -sum(amount) FROM ledger_entries WHERE scope = 'run' AND idempotency_key LIKE ${`session:${sessionId}:${turn}:%`}), 0)::text AS ledger
      FROM runs r WHERE r.id = ${turnRunId(sessionId, turn)}`).pipe(Effect.orDie, Effect.map((rows) => rows[0]))

describe("a cut turn's credits", () => {
  layer(Env, { timeout: "60 seconds" })("the next activation of its session", (it) => {
    it.scoped("counts them again once the turn's hold is voided: a settle that reached the wallet after the load's count is in the run", () =>
      Effect.gen(function*() {
        const sessionId = yield* newSession
        const mailbox = yield* Mailbox
        yield* cutFirstActivation(sessionId)
        // Its settle reached the wallet, unanswered: nothing of it is in the ledger yet.
        assert.strictEqual(mailbox.settles.length, 1)
        const [step] = mailbox.settles[0]!.charges
        assert.isDefined(step)
        assert.isAbove(Number(step!.amount), 0)
        assert.strictEqual(step!.key, `session:${sessionId}:1:1`)

        // The next activation closes the turn (counting the ledger: 0), then voids its hold; the wallet takes the
        // cut turn's settle first.
        const session = yield* (yield* Entity.makeTestClient(Session, SessionLive))(sessionId)
        yield* session.Reload()
        assert.strictEqual(yield* Deferred.await(mailbox.voided), `session:${sessionId}:1`)
        // The run's credits are the ledger's once the void is answered (counted again after it). The count runs beside
        // the load, after the void returned, so it may not have committed when the test reads: the read is tried again,
        // for up to 5 s of real time. On the live clock: this suite's clock is the TestClock, which nothing here moves,
        // so a wait on it never ends (with PostgreSQL's pool the first read often came before the count, and the test
        // hung until its 60 s timeout; PGlite's one connection queued the read behind the count).
        const settled = yield* creditsOf(sessionId, 1).pipe(
          Effect.filterOrFail((row) => row !== undefined && row.recorded === row.ledger, () => "not yet"),
          Effect.retry(Schedule.spaced("50 millis").pipe(Schedule.upTo("5 seconds"))),
          TestServices.provideLive,
          Effect.orElse(() => creditsOf(sessionId, 1))
        )
        assert.deepStrictEqual(settled, { recorded: String(step!.amount), ledger: String(step!.amount), status: "failed" })
      }))

    it.scoped("are counted again when the runner stops while the void is under way: the shutdown waits for it", () =>
      Effect.gen(function*() {
        const sessionId = yield* newSession
        const mailbox = yield* Mailbox
        yield* cutFirstActivation(sessionId)
        const [step] = mailbox.settles.find((settle) => settle.holdId === `session:${sessionId}:1`)!.charges
        // The next activation's void waits on a slow wallet, and its runner stops meanwhile (the layer's scope closes);
        // the wallet answers a moment later, while the runner is stopping.
        const release = yield* Deferred.make<void>()
        mailbox.gate.push(release)
        yield* Effect.scoped(Effect.gen(function*() {
          const session = yield* (yield* Entity.makeTestClient(Session, SessionLive))(sessionId)
          yield* session.Reload()
          yield* Effect.forkDaemon(TestServices.provideLive(Effect.delay(Deferred.succeed(release, undefined), "200 millis")))
        }))
        mailbox.gate.splice(0)
        // Stopped: the void was answered and the turn counted again before the runner let go.
        assert.deepStrictEqual(yield* creditsOf(sessionId, 1), { recorded: String(step!.amount), ledger: String(step!.amount), status: "failed" })
      }))
  })
})
