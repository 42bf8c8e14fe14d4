import { HttpLayerRouter, HttpServerRequest } from "@effect/platform"
import { NodeHttpServerRequest } from "@effect/platform-node"
import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as V8 from "node:v8"
import * as Vm from "node:vm"
import { request } from "../support/Client.js"
import { pollUntil } from "../support/Poll.js"
import { TestServer } from "../support/TestServer.js"
import { apiKeyOf, BILLING_ENV, LIVE, newUser } from "./billing-support.js"

/**
 * A wallet woken by an HTTP request must not keep that request reachable while the wallet stays active (the same
 * rule as sessions: test/sessions/context.test.ts says why it can happen). The garbage collector is the witness:
 * the `IncomingMessage` of the request that woke the wallet must be collectable once it was answered.
 */

const seen: Array<{ readonly path: string; readonly message: WeakRef<object> }> = []

const Probe = HttpLayerRouter.middleware(
  (app) =>
    Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
      if (request.url.startsWith("/openapi/credit/") || request.url.startsWith("/internal/wallets/")) {
        seen.push({ path: `${request.method} ${request.url}`, message: new WeakRef(NodeHttpServerRequest.toIncomingMessage(request)) })
      }
      return app
    }),
  { global: true }
)

V8.setFlagsFromString("--expose-gc")
const gc = Vm.runInNewContext("gc") as () => void

const ServerWithProbe = TestServer.layer(BILLING_ENV, Probe)

/** Until the request's message is garbage (polled, collecting each time: a WeakRef is cleared in the collector's own time). */
const collected = (entry: { readonly path: string; readonly message: WeakRef<object> }) =>
  pollUntil(Effect.sync(() => (gc(), entry.message.deref() === undefined)), (gone) => gone, `${entry.path}: its IncomingMessage collected`, {
    every: 50,
    within: 1_000
  })

describe("wallet context", () => {
  layer(ServerWithProbe, LIVE)((it) => {
    for (const [name, wake] of [
      ["GET /openapi/credit/balance", (key: string) => request("GET", "/openapi/credit/balance", { token: key })],
      ["POST /openapi/credit/preCheck", (key: string) => request("POST", "/openapi/credit/preCheck", { token: key, body: { amount: 1 } })],
      ["POST /openapi/credit/consume", (key: string) =>
        request("POST", "/openapi/credit/consume", { token: key, body: { amount: 1, idempotency_key: "k" } })]
    ] as const) {
      it.effect(`the request that woke a wallet (${name}) is garbage once answered, while the wallet stays active`, () =>
        Effect.gen(function*() {
          const user = yield* newUser
          const key = yield* apiKeyOf(user)
          seen.length = 0
          const woke = yield* wake(key)
          assert.strictEqual(woke.status, 200, woke.text)
          const [first] = seen
          assert.isDefined(first)
          yield* collected(first!)
          // The wallet is still the same activation and still answers.
          const again = yield* request("GET", "/openapi/credit/balance", { token: key })
          assert.strictEqual(again.status, 200, again.text)
        }))
    }
  })
})
