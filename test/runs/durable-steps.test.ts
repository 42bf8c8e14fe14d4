import { assert, describe, layer } from "@effect/vitest"
import { Context, Effect, Exit, Fiber, Layer, Option } from "effect"
import { UserId } from "../../src/platform/Ids.js"
import { defaultBilling } from "../../src/agents/Agent.js"
import { AppConfig } from "../../src/platform/Config.js"
import type { InternalEvent } from "../../src/runtime/Events.js"
import type { ExpertConfig } from "../../src/runtime/Expert.js"
import type { DurableSteps, RunRequest } from "../../src/runtime/Run.js"
import { Approvals } from "../../src/runtime/Approvals.js"
import { RunEngine } from "../../src/runtime/RunEngine.js"
import { RunId } from "../../src/runtime/Domain.js"
import { RunsRepo } from "../../src/runtime/Repo.js"
import * as SqlClient from "@effect/sql/SqlClient"
import { PaymentFailed, RunPayer } from "../../src/runtime/Ports.js"
import { insertUser, TestDatabase } from "../support/Database.js"
import { pollUntil } from "../support/Poll.js"
import { KnowledgeGate, RunPayerTest } from "../support/Ports.js"

/**
 * The engine's side of durable runs (issue 43 item 2), without a cluster: what a background run's workflow does with
 * `RunRequest.durable` (runs/Background.ts records each step as an activity). A step run again after a fault (charged,
 * its record lost with its runner) is charged once, because its charge key is the step's identity; a run executed
 * again over its records runs none of its finished steps (no model call, nothing told) and ends with the same answer.
 */

const Env = Layer.mergeAll(AppConfig.Default, RunPayerTest.layer(), KnowledgeGate.layer).pipe(Layer.provideMerge(TestDatabase()))

let made = 0
const requestFor = (message: string, durable: DurableSteps | undefined, tools: ExpertConfig["tools"] = []) =>
  Effect.gen(function*() {
    const userId = UserId.make(`usr_durable_${process.pid}_${++made}`)
    yield* insertUser(userId)
    const request: RunRequest = {
      runId: RunId.make(`run_durable_${process.pid}_${made}`),
      agent: {
        id: null,
        identifier: "builtin",
        ownerId: userId,
        version: null,
        config: { instructions: "", model: "builtin", tools, subagents: [], billing: defaultBilling }
      },
      payer: { accountId: userId, endUserId: "" },
      history: [],
      message,
      budget: Option.none(),
      sessionId: Option.none(),
      workspace: "",
      parentRunId: Option.none(),
      depth: 0,
      durable
    }
    return request
  })

const told = () => {
  const events: Array<InternalEvent> = []
  return { events, emit: (event: InternalEvent) => Effect.sync(() => void events.push(event)) }
}

describe("durable steps", () => {
  layer(RunEngine.Default.pipe(Layer.provideMerge(Env)))((it) => {
    it.effect("a step run again after its charge (its record lost) is charged once: the charge key is the step", () =>
      Effect.gen(function*() {
        const engine = yield* RunEngine
        // Each step runs twice, as on a runner killed after the step's charge and before its result was recorded.
        const request = yield* requestFor("hello twice", { step: (_name, _codec, effect) => Effect.zipRight(effect, effect) })
        const result = yield* engine.execute(request, told().emit, () => Effect.succeedNone)
        assert.strictEqual(result.status, "completed")
        const { charges } = yield* RunPayerTest
        const mine = charges.filter((charge) => charge.accountId === request.payer.accountId)
        assert.deepStrictEqual(mine.map((charge) => charge.key), [`${request.runId}:1`])
        assert.strictEqual(result.creditsCharged, mine[0]!.amount)
      }))

    it.effect("a run suspended on its approval neither settles nor records an end; resumed over its records, it bills each step once", () =>
      Effect.gen(function*() {
        const engine = yield* RunEngine
        const records = new Map<string, unknown>()
        const step: DurableSteps["step"] = (name, codec, effect) =>
          Effect.suspend(() =>
            records.has(name)
              ? Effect.succeed(codec.decode(records.get(name)))
              : Effect.tap(effect, (value) => Effect.sync(() => void records.set(name, codec.encode(value))))
          )
        const asks: Array<string> = []
        // First execution: the approval is not in, so the workflow suspends (an interrupt, `suspended` true).
        const waiting: DurableSteps = { step, approve: (key) => Effect.zipRight(Effect.sync(() => void asks.push(key)), Effect.interrupt), suspended: () => true }
        const asked = yield* requestFor(`/tool calculator {"expression": "6 * 7"}`, waiting, [{ name: "calculator", permission: "ask" }])
        // As the workflow's: the run's row is the workflow's to write (once, when it ends), not each execution's.
        const request = { ...asked, ledger: { start: () => Effect.void, finish: () => Effect.void } }
        const first = told()
        const exit = yield* Effect.exit(engine.execute(request, first.emit, () => Effect.succeedNone))
        assert.isTrue(Exit.isInterrupted(exit))
        assert.deepStrictEqual(asks, ["1/0"])
        const { charges } = yield* RunPayerTest
        const mine = () => charges.filter((charge) => charge.accountId === request.payer.accountId).map((charge) => charge.key)
        // Not settled: its step is posted when the run ends, with the hold it keeps meanwhile (it has not ended).
        assert.deepStrictEqual(mine(), [])
        assert.isFalse(first.events.some((event) => event.type === "complete" || event.type === "error"))
        // Resumed with the answer: step 1 from its record, the tool runs, step 2; each step posted once.
        const resumed: DurableSteps = { step, approve: () => Effect.succeed({ approved: true, reason: "" }), suspended: () => false }
        const second = told()
        const result = yield* engine.execute({ ...request, durable: resumed }, second.emit, () => Effect.succeedNone)
        assert.strictEqual(result.status, "completed", JSON.stringify(second.events.filter((event) => event.type === "error")))
        assert.deepStrictEqual(mine(), [`${request.runId}:1`, `${request.runId}:2`])
        assert.isTrue(second.events.some((event) => event.type === "tool_call_result"))
      }))

    it.effect("a run executed again over its records runs none of its finished steps", () =>
      Effect.gen(function*() {
        const engine = yield* RunEngine
        const records = new Map<string, unknown>()
        const executed: Array<string> = []
        const durable: DurableSteps = {
          step: (name, codec, effect) =>
            Effect.suspend(() =>
              records.has(name)
                ? Effect.succeed(codec.decode(JSON.parse(JSON.stringify(records.get(name)))))
                : Effect.tap(effect, (value) => Effect.sync(() => {
                  executed.push(name)
                  records.set(name, codec.encode(value))
                }))
            )
        }
        const request = yield* requestFor("hello again", durable)
        const first = told()
        const once = yield* engine.execute(request, first.emit, () => Effect.succeedNone)
        assert.deepStrictEqual(executed, ["trial", "step/1"])
        assert.isTrue(first.events.some((event) => event.type === "text"))
        const second = told()
        const again = yield* engine.execute({ ...request, runId: RunId.make(`${request.runId}_again`) }, second.emit, () => Effect.succeedNone)
        assert.deepStrictEqual(executed, ["trial", "step/1"], "no step ran a second time")
        assert.isFalse(second.events.some((event) => event.type === "text" || event.type === "turn_start"))
        assert.strictEqual(again.output, once.output)
        assert.strictEqual(again.creditsCharged, once.creditsCharged)
      }))
  })
})

describe("durable approvals' identity", () => {
  layer(Approvals.Default.pipe(Layer.provideMerge(Env)))((it) => {
    it.effect("an ask step executed again (after a fault) opens the same approval, with its first expiry", () =>
      Effect.gen(function*() {
        const approvals = yield* Approvals
        const userId = UserId.make(`usr_durable_${process.pid}_${++made}`)
        yield* insertUser(userId)
        const owner = { accountId: userId, endUserId: "" }
        const first = yield* approvals.openDurable(owner, RunId.make(`run_identity_${made}`), "1/0")
        const again = yield* approvals.openDurable(owner, RunId.make(`run_identity_${made}`), "1/0")
        assert.strictEqual(again.id, first.id)
        assert.strictEqual(again.expiresAt.getTime(), first.expiresAt.getTime())
        // Another call of the run, or the same place in another run, is another approval.
        const other = yield* approvals.openDurable(owner, RunId.make(`run_identity_${made}`), "2/0")
        assert.notStrictEqual(other.id, first.id)
        // Answered once, by its owner; the answer names the run whose workflow waits on it.
        const answered = yield* approvals.answer(owner, first.id, { approved: true, reason: "" })
        assert.deepStrictEqual(answered, Option.some(`run_identity_${made}`))
        const twice = yield* Effect.flip(approvals.answer(owner, first.id, { approved: true, reason: "" }))
        assert.strictEqual(twice._tag, "NotFound")
      }))
  })
})

/**
 * A run's settle and its outages: the engine sends it once and tells its payer whether the run was cut short; the
 * payer (`RunPayerLive`) waits out an outage for a run that ended on its own (test/billing/run-payer.test.ts).
 */
const RecordedSettles = Layer.effectContext(Effect.gen(function*() {
  const payer = yield* RunPayer
  const cuts: Array<boolean> = []
  return Context.make(RunPayer, {
    ...payer,
    settle: (accountId, holdId, charges, fence, cut) =>
      Effect.suspend(() => {
        cuts.push(cut)
        return payer.settle(accountId, holdId, charges, fence, cut)
      })
  }).pipe(Context.add(RunPayerTest, yield* RunPayerTest), Context.add(SettleCuts, cuts))
})).pipe(Layer.provide(RunPayerTest.layer()))

class SettleCuts extends Context.Tag("test/SettleCuts")<SettleCuts, Array<boolean>>() {}

describe("a run's settle", () => {
  const RecordedEnv = Layer.mergeAll(AppConfig.Default, RecordedSettles, KnowledgeGate.layer).pipe(Layer.provideMerge(TestDatabase()))
  layer(RunEngine.Default.pipe(Layer.provideMerge(RecordedEnv)))((it) => {
    it.effect("of a run that ended on its own is sent once, as not cut: its payer waits out an outage for it", () =>
      Effect.gen(function*() {
        const engine = yield* RunEngine
        const request = yield* requestFor("hello", undefined)
        const result = yield* engine.execute(request, told().emit, () => Effect.succeedNone)
        assert.strictEqual(result.status, "completed")
        assert.deepStrictEqual(yield* SettleCuts, [false])
        const { charges } = yield* RunPayerTest
        const mine = charges.filter((charge) => charge.accountId === request.payer.accountId)
        assert.deepStrictEqual(mine.map((charge) => charge.key), [`${request.runId}:1`])
        assert.strictEqual(result.creditsCharged, mine[0]!.amount)
      }))
  })
})

/**
 * A wallet that does not answer (issue 43: a background run whose wallet answers slowly ended `billing_failed`): each
 * account's first `holdOutages` holds and first `settleOutages` settles fail as `RunPayerLive` fails them once an
 * outage outlasted its window (`PaymentFailed` with `outage`); a refused one has no `outage`.
 */
class WalletAsks extends Context.Tag("test/WalletAsks")<WalletAsks, {
  readonly fail: (accountId: string, failures: { holds: number; settles: number; outage: boolean }) => void
  readonly asked: (accountId: string) => { holds: number; settles: number }
}>() {}
const SlowWallet = Layer.effectContext(Effect.gen(function*() {
  const payer = yield* RunPayer
  const plans = new Map<string, { holds: number; settles: number; outage: boolean }>()
  const asks = new Map<string, { holds: number; settles: number }>()
  const askedOf = (accountId: string) => {
    const found = asks.get(accountId) ?? { holds: 0, settles: 0 }
    asks.set(accountId, found)
    return found
  }
  const unanswered = (accountId: string, kind: "holds" | "settles") =>
    Effect.suspend(() => {
      const plan = plans.get(accountId)
      askedOf(accountId)[kind]++
      if (plan === undefined || plan[kind] === 0) return Effect.void
      plan[kind]--
      return Effect.fail(new PaymentFailed({ message: "EntityDeadline: No answer from the wallet within 15s.", outage: plan.outage }))
    })
  return Context.make(RunPayer, {
    ...payer,
    hold: (accountId, holdId, amount) => Effect.zipRight(unanswered(accountId, "holds"), payer.hold(accountId, holdId, amount)),
    settle: (accountId, holdId, charges, fence, cut) =>
      Effect.zipRight(unanswered(accountId, "settles"), payer.settle(accountId, holdId, charges, fence, cut))
  }).pipe(
    Context.add(RunPayerTest, yield* RunPayerTest),
    Context.add(WalletAsks, { fail: (accountId, failures) => void plans.set(accountId, { ...failures }), asked: askedOf })
  )
})).pipe(Layer.provide(RunPayerTest.layer()))

describe("a durable run's wallet", () => {
  const SlowEnv = Layer.mergeAll(AppConfig.Default, SlowWallet, KnowledgeGate.layer).pipe(Layer.provideMerge(TestDatabase()))
  const direct: DurableSteps = { step: (_name, _codec, effect) => effect }
  // The live clock: the wallet's waits are real pauses (1 s, then 2 s).
  layer(RunEngine.Default.pipe(Layer.provideMerge(SlowEnv)), { excludeTestServices: true })((it) => {
    it.effect("that does not answer is waited for: the run completes, billed once, its settle waited for too", () =>
      Effect.gen(function*() {
        const engine = yield* RunEngine
        const wallet = yield* WalletAsks
        const request = yield* requestFor("hello", direct)
        wallet.fail(request.payer.accountId, { holds: 2, settles: 1, outage: true })
        const result = yield* engine.execute(request, told().emit, () => Effect.succeedNone)
        assert.strictEqual(result.status, "completed", JSON.stringify(result.failure))
        assert.deepStrictEqual(wallet.asked(request.payer.accountId), { holds: 3, settles: 2 })
        const { charges } = yield* RunPayerTest
        const mine = charges.filter((charge) => charge.accountId === request.payer.accountId)
        assert.deepStrictEqual(mine.map((charge) => charge.key), [`${request.runId}:1`])
        assert.strictEqual(result.creditsCharged, mine[0]!.amount)
      }), { timeout: 20_000 })

    it.effect("whose settle waits for the wallet lets go when its runner stops: interrupted at once, no end told, nothing posted", () =>
      Effect.gen(function*() {
        const engine = yield* RunEngine
        const wallet = yield* WalletAsks
        const request = yield* requestFor("hello", direct)
        // The settle meets a wallet that does not answer (its patience is minutes); the hold answers.
        wallet.fail(request.payer.accountId, { holds: 0, settles: 1_000, outage: true })
        const run = told()
        const fiber = yield* Effect.fork(engine.execute(request, run.emit, () => Effect.succeedNone))
        yield* pollUntil(Effect.sync(() => wallet.asked(request.payer.accountId).settles), (n) => n >= 1, "the settle asked", { every: 20 })
        // The runner stopping interrupts the run's fiber: it must end now, not after the settle's patience.
        const exit = yield* Fiber.interrupt(fiber).pipe(
          Effect.timeoutFail({ duration: "5 seconds", onTimeout: () => new Error("the run held its interruption for its settle") })
        )
        assert.isTrue(Exit.isInterrupted(exit))
        // Not ended: nothing told as its end, nothing posted (its next owner settles the hold and tells the end).
        assert.isFalse(run.events.some((event) => event.type === "complete" || event.type === "error"))
        const { charges } = yield* RunPayerTest
        assert.deepStrictEqual(charges.filter((charge) => charge.accountId === request.payer.accountId), [])
      }), { timeout: 20_000 })

    it.effect("a foreground run's settle the wallet did not answer is asked again after the run's end, until its steps are posted", () =>
      Effect.gen(function*() {
        const engine = yield* RunEngine
        const wallet = yield* WalletAsks
        const request = yield* requestFor("hello", undefined)
        // The settle goes unanswered past the window its caller is promised (the fault checker's runs, recorded as
        // charged with nothing in the ledger); the hold answers.
        wallet.fail(request.payer.accountId, { holds: 0, settles: 1, outage: true })
        const result = yield* engine.execute(request, told().emit, () => Effect.succeedNone)
        assert.strictEqual(result.status, "completed")
        const { charges } = yield* RunPayerTest
        const mine = () => charges.filter((charge) => charge.accountId === request.payer.accountId)
        yield* pollUntil(Effect.sync(mine), (posted) => posted.length > 0, "the step posted by the settle asked again", { within: 10_000 })
        assert.deepStrictEqual(mine().map((charge) => charge.key), [`${request.runId}:1`])
        assert.strictEqual(result.creditsCharged, mine()[0]!.amount)
        assert.strictEqual(wallet.asked(request.payer.accountId).settles, 2)
        // Had the wallet refused some, the run's row (written at its end) is taken down by what it refused, never
        // below 0; a row still `running` (a session writes it later) is not there to correct yet.
        const runs = yield* RunsRepo
        const sql = yield* SqlClient.SqlClient
        const creditsOf = (id: string) => Effect.map(sql<{ credits: string }>`SELECT credits_charged::text AS credits FROM runs WHERE id = ${id}`.pipe(Effect.orDie), (rows) => BigInt(rows[0]!.credits))
        assert.strictEqual(yield* creditsOf(request.runId), result.creditsCharged)
        assert.isTrue(yield* runs.lessCredits(RunId.unchecked.make(request.runId), 1n))
        assert.strictEqual(yield* creditsOf(request.runId), result.creditsCharged - 1n)
        assert.isTrue(yield* runs.lessCredits(RunId.unchecked.make(request.runId), result.creditsCharged * 10n))
        assert.strictEqual(yield* creditsOf(request.runId), 0n)
        const open = yield* requestFor("hello", undefined)
        yield* runs.start({ id: open.runId, agentId: null, agentVersion: null, payerId: open.payer.accountId, endUserId: "", sessionId: null, parentRunId: null, agent: "builtin" })
        assert.isFalse(yield* runs.lessCredits(RunId.unchecked.make(open.runId), 1n))
      }).pipe(Effect.provide(RunsRepo.Default)), { timeout: 20_000 })

    it.effect("a foreground run, whose client waits, fails billing_failed at once; a refusal fails a durable run too", () =>
      Effect.gen(function*() {
        const engine = yield* RunEngine
        const wallet = yield* WalletAsks
        const foreground = yield* requestFor("hello", undefined)
        wallet.fail(foreground.payer.accountId, { holds: 1, settles: 0, outage: true })
        const failed = yield* engine.execute(foreground, told().emit, () => Effect.succeedNone)
        assert.strictEqual(failed.status, "failed")
        assert.strictEqual(Option.getOrUndefined(failed.failure)?.code, "billing_failed")
        assert.strictEqual(wallet.asked(foreground.payer.accountId).holds, 1)

        const refused = yield* requestFor("hello", direct)
        wallet.fail(refused.payer.accountId, { holds: 1, settles: 0, outage: false })
        const refusal = yield* engine.execute(refused, told().emit, () => Effect.succeedNone)
        assert.strictEqual(Option.getOrUndefined(refusal.failure)?.code, "billing_failed")
        assert.strictEqual(wallet.asked(refused.payer.accountId).holds, 1)
      }))
  })
})
