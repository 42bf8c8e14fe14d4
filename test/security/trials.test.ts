import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { createApiKey } from "../support/Client.js"
import { names } from "../support/Sse.js"
import { TestServer } from "../support/TestServer.js"
import { ENV, LIVE, liveAgent, newUser, runAgent } from "../runs/runs-support.js"

/**
 * Issue 15 item 2, replayed: ten free runs of a paid expert with `free_trial_per_user: 1` by rotating
 * `X-End-User-Id` (`rot-0` … `rot-9`), and extra trials for a login user adding the header. The allowance binds the
 * paying account per expert (docs/agents.md).
 */

describe("security: free trials", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("rotating X-End-User-Id, or a login user adding it, gets no more than the account's one trial", () =>
      Effect.gen(function*() {
        const creator = yield* newUser
        const agent = yield* liveAgent(creator.token, {
          name: "Paid expert",
          billing: { type: "UNLOCK", price: 5, free_trial_per_user: 1 }
        })
        const caller = yield* newUser
        const key = (yield* createApiKey(caller.token)).key
        const free = (stream: Parameters<typeof names>[0]) => !names(stream).includes("usage.trial_exhausted")
        const rotated = []
        for (let i = 0; i < 10; i++) rotated.push(yield* runAgent({ token: key, endUser: `rot-${i}` }, agent, `r${i}`))
        assert.strictEqual(rotated.filter(free).length, 1)

        const login = yield* newUser
        const plain = yield* runAgent(login, agent, "first")
        assert.isTrue(free(plain))
        for (let i = 0; i < 3; i++) {
          assert.isFalse(free(yield* runAgent({ token: login.token, endUser: `me-${i}` }, agent, "again")))
        }
      }))
  })
})
