import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { request } from "../support/Client.js"
import { TestServer } from "../support/TestServer.js"

describe("smoke", () => {
  it.layer(TestServer.layer())((it) => {
    it.effect("health answers ok", () =>
      Effect.gen(function*() {
        const reply = yield* request("GET", "/api/health")
        assert.strictEqual(reply.status, 200)
        assert.deepStrictEqual(reply.body, { status: "ok", database: "ok", store: "ok" })
      }))
  })
})
