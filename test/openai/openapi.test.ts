import { assert, describe, layer } from "@effect/vitest"
import { Ajv2020 } from "ajv/dist/2020.js"
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs/promises"
import * as Os from "node:os"
import * as Path from "node:path"
import { promisify } from "node:util"
import createClient from "openapi-fetch"
import { GENERATED, generateApiTypes } from "../../scripts/api-types.js"
import { request } from "../support/Client.js"
import { TestServer } from "../support/TestServer.js"
import { apiKeyOf, ENV, LIVE, newUser } from "../runs/runs-support.js"
import type { paths } from "./atrium-api.generated.js"

const execFile = promisify(ChildProcess.execFile)

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
        for (const path of ["/v1/responses/{id}", "/v1/responses/{id}/cancel", "/v1/responses/{id}/input_items", "/v1/models/{id}", "/oauth/token", "/oauth/authorize"]) {
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

/**
 * Issue 16 item 5: the document passes Redocly's recommended rules, and the client `openapi-typescript` generates
 * from it (committed as `atrium-api.generated.ts`, checked against the served document here) calls the real
 * endpoints through `openapi-fetch`; `npm run typecheck` compiles those calls, and every answer is checked at run
 * time against the schema the document gives for its status (ajv, JSON Schema 2020-12 as OpenAPI 3.1 uses).
 */
describe("the OpenAPI document passes the lint and generates a working typed client", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    const served = Effect.map(request("GET", "/openapi.json"), (reply) => reply.body as Record<string, any>)

    it.effect("Redocly's recommended rules: no error, and the one warning is the consent form's redirect", () =>
      Effect.gen(function*() {
        const dir = yield* Effect.promise(() => Fs.mkdtemp(Path.join(Os.tmpdir(), "atrium-openapi-")))
        const file = Path.join(dir, "openapi.json")
        const document = yield* served
        yield* Effect.promise(() => Fs.writeFile(file, JSON.stringify(document)))
        const bin = Path.resolve(import.meta.dirname, "../../node_modules/.bin/redocly")
        const { stdout } = yield* Effect.promise(() =>
          execFile(bin, ["lint", "--extends=recommended", "--format=json", file], {
            cwd: dir,
            env: { ...process.env, REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true", NO_COLOR: "1" }
          })
        )
        yield* Effect.promise(() => Fs.rm(dir, { recursive: true, force: true }))
        const report = JSON.parse(stdout) as { totals: { errors: number }; problems: Array<any> }
        assert.strictEqual(report.totals.errors, 0, stdout.slice(0, 4000))
        // POST /oauth/authorize is the consent form's submit; RFC 6749 4.1.2 answers it with a redirect, not a 2xx.
        assert.deepStrictEqual(
          report.problems.map((p) => `${p.ruleId} ${p.location[0].pointer}`),
          ["operation-2xx-response #/paths/~1oauth~1authorize/post/responses"]
        )
      }))

    it.effect("the committed openapi-typescript types are what the served document generates", () =>
      Effect.gen(function*() {
        const document = yield* served
        const generated = yield* Effect.promise(() => generateApiTypes(document))
        const committed = yield* Effect.promise(() => Fs.readFile(GENERATED, "utf8"))
        assert.isTrue(generated === committed, "test/openai/atrium-api.generated.ts is stale: npm run generate:api-types")
      }))

    it.effect("openapi-fetch with the generated types: real answers, each matching its documented schema", () =>
      Effect.gen(function*() {
        const document = yield* served
        const ajv = new Ajv2020({ strict: false, validateFormats: false, allErrors: true })
        ajv.addSchema(document, "atrium")
        /** The answer matches the schema the document gives for its path, method and status. */
        const conforms = (path: string, method: string, status: number, body: unknown) => {
          const pointer = `#/paths/${path.replace(/~/g, "~0").replace(/\//g, "~1")}/${method}/responses/${status}/content/application~1json/schema`
          const validate = ajv.compile({ $ref: `atrium${pointer}` })
          assert.isTrue(validate(body), `${method.toUpperCase()} ${path} ${status}: ${ajv.errorsText(validate.errors)}\n${JSON.stringify(body).slice(0, 1000)}`)
        }
        const { url } = yield* TestServer
        const user = yield* newUser
        const client = createClient<paths>({ baseUrl: url, headers: { authorization: `Bearer ${user.token}` } })

        const models = yield* Effect.promise(() => client.GET("/v1/models"))
        assert.strictEqual(models.response.status, 200)
        const modelIds: Array<string> = models.data!.data.map((model) => model.id)
        assert.include(modelIds, "builtin")
        conforms("/v1/models", "get", 200, models.data)

        const created = yield* Effect.promise(() =>
          client.POST("/v1/agents", { body: { name: "Typed client", category: "coding", instructions: "Answer briefly." } })
        )
        assert.strictEqual(created.response.status, 201, JSON.stringify(created.error))
        const identifier: string = created.data!.identifier
        conforms("/v1/agents", "post", 201, created.data)

        const listed = yield* Effect.promise(() => client.GET("/v1/agents"))
        assert.strictEqual(listed.response.status, 200)
        const hasMore: boolean = listed.data!.has_more
        assert.isFalse(hasMore)
        assert.deepStrictEqual(listed.data!.data.map((agent) => agent.identifier), [identifier])
        conforms("/v1/agents", "get", 200, listed.data)

        const one = yield* Effect.promise(() => client.GET("/v1/agents/{identifier}", { params: { path: { identifier } } }))
        assert.strictEqual(one.response.status, 200)
        assert.strictEqual(one.data!.status, "draft")
        conforms("/v1/agents/{identifier}", "get", 200, one.data)

        const wallet = yield* Effect.promise(() => client.GET("/api/wallet"))
        assert.strictEqual(wallet.response.status, 200)
        conforms("/api/wallet", "get", 200, wallet.data)

        // Errors: the typed error is the envelope the document promises.
        const missing = yield* Effect.promise(() =>
          client.GET("/v1/agents/{identifier}", { params: { path: { identifier: "no-such-agent" } } })
        )
        assert.strictEqual(missing.response.status, 404)
        const type: string = missing.error!.error.type
        assert.strictEqual(type, "not_found")
        conforms("/v1/agents/{identifier}", "get", 404, missing.error)

        const refused = yield* Effect.promise(() =>
          // @ts-expect-error: the generated types know the categories; the server refuses one outside them too.
          client.POST("/v1/agents", { body: { name: "Bad", category: "astrology" } })
        )
        assert.strictEqual(refused.response.status, 400)
        conforms("/v1/agents", "post", 400, refused.error)
        // Issue 16 item 8: a value outside an enum is told every allowed value.
        for (const category of ["writing", "coding", "research", "education", "business", "design", "productivity", "lifestyle", "other"]) {
          assert.include(refused.error!.error.message, category)
        }

        // Issue 30 item 5: `limit` is an integer (the typed client takes a number), a failed run's status and body
        // are documented, a workspace file is text/plain, Last-Event-ID is declared, streams start with retry: 1000.
        const page = yield* Effect.promise(() => client.GET("/v1/agents", { params: { query: { limit: 1 } } }))
        assert.strictEqual(page.response.status, 200)
        conforms("/v1/agents", "get", 200, page.data)
        const failed = yield* Effect.promise(() =>
          client.POST("/v1/chat/completions", { body: { model: identifier, messages: [{ role: "user", content: "/fail typed" }] } })
        )
        assert.strictEqual(failed.response.status, 400)
        conforms("/v1/chat/completions", "post", 400, failed.error)
        const chat = document.paths["/v1/chat/completions"].post
        for (const status of ["400", "402", "409", "429", "500", "502", "503", "504"]) assert.property(chat.responses, status)
        assert.include(chat.parameters.map((p: { name: string }) => p.name), "idempotency-key")
        assert.deepStrictEqual(Object.keys(document.paths["/v1/sessions/{id}/files/content"].get.responses["200"].content), ["text/plain"])
        const subscribe = document.paths["/v1/sessions/{id}/events"].get
        assert.include(subscribe.parameters.map((p: { name: string }) => p.name), "last-event-id")
        assert.strictEqual(subscribe.parameters.find((p: { name: string }) => p.name === "after").schema.type, "integer")
        const raw = yield* Effect.promise(() =>
          fetch(`${url}/v1/agents/run`, {
            method: "POST",
            headers: { authorization: `Bearer ${user.token}`, "content-type": "application/json" },
            body: JSON.stringify({ agent: identifier, message: "hi" })
          }).then((reply) => reply.text())
        )
        assert.isTrue(raw.startsWith("retry: 1000\n\n"), raw.slice(0, 40))
        assert.strictEqual(raw.split("retry:").length, 2, "retry: comes once")
      }))
  })
})
