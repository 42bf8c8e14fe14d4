import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { request } from "../support/Client.js"
import { TestServer } from "../support/TestServer.js"
import { apiKeyOf, ENV, LIVE, newUser } from "../runs/runs-support.js"

/** Issue 16 item 5 (part): what the OpenAPI document says about streams, headers, servers and summaries. */

describe("the OpenAPI document tells the truth", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("streams, X-End-User-Id, servers, a summary and description on every operation, the new routes", () =>
      Effect.gen(function*() {
        const spec = (yield* request("GET", "/openapi.json")).body as Record<string, any>
        assert.isAbove(spec.servers?.length ?? 0, 0)
        let operations = 0
        for (const [path, methods] of Object.entries<Record<string, any>>(spec.paths)) {
          for (const [method, operation] of Object.entries<any>(methods)) {
            if (typeof operation !== "object" || !("responses" in operation)) continue
            operations++
            assert.isString(operation.summary, `${method} ${path} summary`)
            assert.isAbove(operation.summary.length, 0)
            assert.isString(operation.description, `${method} ${path} description`)
          }
        }
        assert.isAbove(operations, 50)
        for (const [method, path] of [["post", "/v1/agents/run"], ["post", "/v1/chat/completions"], ["post", "/v1/responses"], ["post", "/v1/sessions/{id}/events"], ["get", "/v1/sessions/{id}/events"]] as const) {
          const content = spec.paths[path]?.[method]?.responses?.["200"]?.content
          assert.isDefined(content?.["text/event-stream"], `${method} ${path} streams`)
        }
        assert.deepStrictEqual(Object.keys(spec.paths["/v1/sessions/{id}/events"].get.responses["200"].content), ["text/event-stream"])
        const declares = (method: string, path: string) =>
          (spec.paths[path]?.[method]?.parameters ?? []).some((p: any) => p.in === "header" && p.name === "X-End-User-Id")
        assert.isTrue(declares("post", "/v1/chat/completions"))
        assert.isTrue(declares("post", "/v1/responses"))
        assert.isTrue(declares("post", "/v1/sessions"))
        assert.isFalse(declares("get", "/v1/models"))
        for (const path of ["/v1/responses/{id}", "/v1/responses/{id}/cancel", "/v1/responses/{id}/input_items", "/v1/models/{id}"]) {
          assert.isDefined(spec.paths[path], path)
        }
      }))

    it.effect("/v1/responses with an API key and no X-End-User-Id is 400, like the other end-user routes", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const reply = yield* request("POST", "/v1/responses", { token: yield* apiKeyOf(user), body: { model: "builtin", input: "hi" } })
        assert.strictEqual(reply.status, 400)
        assert.isTrue(reply.body.error.message.startsWith("Missing required header: X-End-User-Id"))
      }))
  })
})
