import { assert, describe, it, layer } from "@effect/vitest"
import { Effect, Either, Schema } from "effect"
import { ResumeHeaders, RunStartHeaders } from "../../src/platform/http/Headers.js"
import { Budget } from "../../src/runs/Api.js"
import { request } from "../support/Client.js"
import { names, streamOf } from "../support/Sse.js"
import { TestServer } from "../support/TestServer.js"
import { agentWith, assertError, ENV, LIVE, newUser } from "../runs/runs-support.js"

/**
 * Issue 49 item 1: `Idempotency-Key`, `Last-Event-ID` and a run's `budget` are read by the contract (setHeaders, the
 * payload's `CreditAmount`), not by the handlers: a bad value is the `invalid_request` envelope naming the field,
 * before any handler runs.
 */

describe("request headers and budgets, as the contract decodes them", () => {
  it("Idempotency-Key: 1-255 visible ASCII characters", () => {
    const decode = Schema.decodeUnknownEither(RunStartHeaders)
    assert.deepStrictEqual(decode({ "idempotency-key": "k-1", other: "x" }), Either.right({ "idempotency-key": "k-1" }))
    assert.deepStrictEqual(decode({}), Either.right({}))
    for (const bad of ["", "a b", "x".repeat(256), "é"]) assert.isTrue(Either.isLeft(decode({ "idempotency-key": bad })), bad)
  })

  it("Last-Event-ID: a seq, as a number; empty is none", () => {
    const decode = Schema.decodeUnknownEither(ResumeHeaders)
    assert.deepStrictEqual(decode({ "last-event-id": "42" }), Either.right({ "last-event-id": 42 }))
    assert.strictEqual(Either.getOrThrow(decode({ "last-event-id": "" }))["last-event-id"], undefined)
    for (const bad of ["x", "-1", "1.5", "1".repeat(16)]) assert.isTrue(Either.isLeft(decode({ "last-event-id": bad })), bad)
  })

  it("budget: a positive amount of credits, at most 6 decimals, as micro-credits", () => {
    const decode = Schema.decodeUnknownEither(Budget)
    assert.deepStrictEqual(decode(0.000001), Either.right(1n))
    assert.deepStrictEqual(decode(" 5 "), Either.right(5_000_000n))
    for (const bad of [0, -1, "abc", "0.0000001", "1e3", true]) assert.isTrue(Either.isLeft(decode(bad)), String(bad))
  })

  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("a bad Idempotency-Key or Last-Event-ID is a 400 naming the header, on every route that reads one", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const session = yield* request("POST", "/v1/sessions", { token: user.token, body: { agent } })
        assert.strictEqual(session.status, 201, session.text)
        const badKey = { "idempotency-key": "has a space" }
        for (const [path, body] of [
          ["/v1/agents/run", { agent, message: "hi" }],
          ["/v1/chat/completions", { model: agent, messages: [{ role: "user", content: "hi" }] }],
          ["/v1/responses", { model: agent, input: "hi" }],
          [`/v1/sessions/${session.body.id}/events`, { type: "message", message: "hi" }]
        ] as const) {
          const refused = yield* request("POST", path, { token: user.token, headers: badKey, body })
          assertError(refused, 400, "invalid_request")
          assert.strictEqual(refused.body.error.message, "Invalid request: idempotency-key: 1-255 visible ASCII characters.", path)
        }
        for (const path of [`/v1/sessions/${session.body.id}/events`, "/v1/runs/run_none/events"]) {
          const refused = yield* request("GET", path, { token: user.token, headers: { "last-event-id": "latest" } })
          assertError(refused, 400, "invalid_request")
          assert.include(refused.body.error.message, "last-event-id", path)
        }
      }))

    it.effect("a session turn's budget is decoded by the contract and bounds the turn", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const session = yield* request("POST", "/v1/sessions", { token: user.token, body: { agent } })
        const path = `/v1/sessions/${session.body.id}/events`
        for (const budget of [0, "abc", "0.0000001"]) {
          const refused = yield* request("POST", path, { token: user.token, body: { type: "message", message: "hi", budget } })
          assertError(refused, 400, "invalid_request")
          assert.isTrue(refused.body.error.message.startsWith("Invalid request: budget: "), refused.text)
        }
        const turn = yield* streamOf(path, { token: user.token, body: { type: "message", message: "hello there", budget: "0.000001" } })
        assert.include(names(turn), "usage.budget_exhausted")
      }))
  })
})
