import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { request } from "../support/Client.js"
import { TestServer } from "../support/TestServer.js"
import { ENV, LIVE, newUser } from "../runs/runs-support.js"

/**
 * Issue 16 item 4: one list envelope and cursor everywhere. Before, `/v1/agents?limit=1` answered every agent.
 */
describe("lists: {data, has_more} with limit and after", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("limit is honoured, after continues where the page ended, and a bad cursor or limit is refused", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const made: Array<string> = []
        for (const name of ["First", "Second", "Third"]) {
          const reply = yield* request("POST", "/v1/agents", { token: user.token, body: { name, category: "coding" } })
          assert.strictEqual(reply.status, 201, reply.text)
          made.push(reply.body.identifier)
        }
        const all = yield* request("GET", "/v1/agents", { token: user.token })
        assert.strictEqual(all.body.data.length, 3)
        assert.isFalse(all.body.has_more)
        const order = all.body.data.map((agent: any) => agent.identifier) as Array<string>
        assert.sameMembers(order, made)

        const first = yield* request("GET", "/v1/agents?limit=2", { token: user.token })
        assert.deepStrictEqual(first.body.data.map((agent: any) => agent.identifier), order.slice(0, 2))
        assert.isTrue(first.body.has_more)
        const second = yield* request("GET", `/v1/agents?limit=2&after=${order[1]}`, { token: user.token })
        assert.deepStrictEqual(second.body.data.map((agent: any) => agent.identifier), order.slice(2))
        assert.isFalse(second.body.has_more)

        const unknown = yield* request("GET", "/v1/agents?after=no-such-agent", { token: user.token })
        assert.strictEqual(unknown.status, 404)
        assert.strictEqual(unknown.body.error.type, "not_found")
        for (const limit of ["0", "101", "two"]) {
          const refused = yield* request("GET", `/v1/agents?limit=${limit}`, { token: user.token })
          assert.strictEqual(refused.status, 400, limit)
          assert.include(refused.body.error.message, "limit")
        }
      }))

    it.effect("every list operation in the API document takes limit and after and answers has_more", () =>
      Effect.gen(function*() {
        const spec = (yield* request("GET", "/openapi.json")).body as Record<string, any>
        const lists = Object.entries<Record<string, any>>(spec.paths).flatMap(([path, operations]) => {
          const schema = operations.get?.responses?.["200"]?.content?.["application/json"]?.schema
          return schema?.properties?.data?.type === "array" ? [[path, operations.get] as const] : []
        })
        assert.isAbove(lists.length, 10)
        // The marketplace's agent search pages by page/pageSize as the spec's browse_marketplace names them; the
        // wallet ledger walks back in time with `before`; notifications show the newest (with the unread count); the
        // categories are the fixed vocabulary of nine; earnings are one row per agent of a report.
        const exempt = ["/api/market/agents", "/api/market/categories", "/api/wallet/ledger", "/api/notifications", "/api/creator/earnings"]
        for (const [path, operation] of lists) {
          if (exempt.includes(path)) continue
          const names = (operation.parameters ?? []).filter((p: any) => p.in === "query").map((p: any) => p.name)
          assert.includeMembers(names, ["limit", "after"], path)
          assert.isDefined(operation.responses["200"].content["application/json"].schema.properties.has_more, path)
        }
        yield* TestServer
      }))
  })
})
