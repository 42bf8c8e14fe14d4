import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { createRecallExpert, loadCases, runRecall } from "../support/Recall.js"
import { recallProviders, startRecallModel } from "../support/RecallModel.js"
import { makeMigratedStorage, makeSmsInbox, startServer, TestServer } from "../support/TestServer.js"
import { ENV, newUser } from "../runs/runs-support.js"

/**
 * The recall set (issue 47 item 4, bench/recall.ts) kept from rotting: its first 20 cases through the same harness,
 * on an in-process server, against the fake model that answers from its context. With memory they are recalled (the
 * bench's target is 90%; here every one, the contradicted ones with the newer value); without memory (6 of them) none
 * is, so the recall is memory's doing.
 */

const CASES = loadCases(20)

describe("recall set", () => {
  it.scopedLive("20 cases: recalled with memory (contradicted ones with the newer value), not without", () =>
    Effect.gen(function*() {
      const model = yield* Effect.acquireRelease(Effect.promise(startRecallModel), (m) => Effect.promise(m.close))
      const storage = yield* makeMigratedStorage
      const inbox = yield* makeSmsInbox
      const server = yield* startServer(storage, inbox, {
        ...ENV,
        MODEL_PROVIDERS: recallProviders(model.baseUrl),
        MEMORY_EXTRACTION_DEBOUNCE: "200 millis"
      })
      const user = yield* newUser.pipe(Effect.provideService(TestServer, server))
      const play = (memory: boolean, cases = CASES) =>
        Effect.promise(async () => {
          const expert = await createRecallExpert(server.url, user.token, memory)
          return runRecall({ base: server.url, expert, model, cases, memory, tag: memory ? "on" : "off", concurrency: 10 })
        })

      const on = yield* play(true)
      const missed = on.results.filter((r) => !r.correct)
      assert.deepStrictEqual(missed, [], "every case recalled with memory")
      assert.isAbove(on.results.filter((r) => r.contradicted).length, 0)
      assert.strictEqual(on.contradictedRecall, 1)
      // At most one extraction call per turn that was not a question (fewer when turns were folded).
      const stats = model.stats()
      assert.isAtMost(stats.extractionCalls, on.turns)
      assert.isAbove(stats.extractionCalls, 0)

      // Fewer without memory: the point is only that nothing else answers them.
      const off = yield* play(false, CASES.slice(0, 6))
      assert.strictEqual(off.recall, 0, JSON.stringify(off.results.filter((r) => r.correct)))
    }), { timeout: 120_000 })
})
