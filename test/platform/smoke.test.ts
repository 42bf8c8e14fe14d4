import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { request } from "../support/Client.js"
import { TestServer } from "../support/TestServer.js"

describe("smoke", () => {
  // `excludeTestServices`: the server runs on the real clock. Under `it.layer` it would inherit the TestClock,
  // frozen at 1970 (JWTs issued with iat 0, TTLs that never elapse).
  layer(TestServer.layer(), { excludeTestServices: true })((it) => {
    it.effect("health answers ok", () =>
      Effect.gen(function*() {
        const reply = yield* request("GET", "/api/health")
        assert.strictEqual(reply.status, 200)
        const { capabilities, ...checks } = reply.body
          assert.deepStrictEqual(checks, { status: "ok", database: "ok", store: "ok" })
          // run_code's sandbox reports itself once its start-up self-check has run.
          assert.oneOf(capabilities.run_code.status, ["checking", "available"], JSON.stringify(capabilities))
      }))
  })
})
