import { assert, describe, layer } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { defaultBilling } from "../../src/agents/Agent.js"
import { AppConfig } from "../../src/platform/Config.js"
import type { InternalEvent } from "../../src/runtime/Events.js"
import type { DurableSteps, RunRequest } from "../../src/runtime/Run.js"
import { RunEngine } from "../../src/runtime/RunEngine.js"
import { insertUser, TestDatabase } from "../support/Database.js"
import { KnowledgeGate, RunPayerTest } from "../support/Ports.js"

/**
 * The engine's side of durable runs (issue 43 item 2), without a cluster: what a background run's workflow does with
 * `RunRequest.durable` (runs/Background.ts records each step as an activity). A step run again after a fault (charged,
 * its record lost with its runner) is charged once, because its charge key is the step's identity; a run executed
 * again over its records runs none of its finished steps (no model call, nothing told) and ends with the same answer.
 */

const Env = Layer.mergeAll(AppConfig.Default, RunPayerTest.layer(), KnowledgeGate.layer).pipe(Layer.provideMerge(TestDatabase()))

let made = 0
const requestFor = (message: string, durable: DurableSteps) =>
  Effect.gen(function*() {
    const userId = `usr_durable_${process.pid}_${++made}`
    yield* insertUser(userId)
    const request: RunRequest = {
      runId: `run_durable_${process.pid}_${made}`,
      agent: {
        id: null,
        identifier: "builtin",
        ownerId: userId,
        version: null,
        config: { instructions: "", model: "builtin", tools: [], subagents: [], billing: defaultBilling }
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
        const again = yield* engine.execute({ ...request, runId: `${request.runId}_again` }, second.emit, () => Effect.succeedNone)
        assert.deepStrictEqual(executed, ["trial", "step/1"], "no step ran a second time")
        assert.isFalse(second.events.some((event) => event.type === "text" || event.type === "turn_start"))
        assert.strictEqual(again.output, once.output)
        assert.strictEqual(again.creditsCharged, once.creditsCharged)
      }))
  })
})
