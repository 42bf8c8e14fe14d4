import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import createClient from "openapi-fetch"
import { request } from "../support/Client.js"
import { TestServer } from "../support/TestServer.js"
import { agentWith, apiKeyOf, ENV, LIVE, newUser } from "../runs/runs-support.js"
import type { components, paths } from "./atrium-api.generated.js"

/**
 * Issue 44 gap 4: the OpenAPI document types every JSON answer's fields, so `openapi-typescript` users read
 * `choices[0].message.content` and Responses `output` items without TS2571. The type-level half is checked by the
 * project's `tsc --noEmit` (this file is in it): if `choices` or `output` were `unknown` again, it would not compile.
 */

type ChatAnswer = paths["/v1/chat/completions"]["post"]["responses"]["200"]["content"]["application/json"]
type ResponseAnswer = paths["/v1/responses"]["post"]["responses"]["200"]["content"]["application/json"]

/** Compiles only while `message.content` is typed `string | null` (not `unknown`). */
const contentOf = (answer: ChatAnswer): string | null => answer.choices[0]?.message.content ?? null
const finishOf = (answer: ChatAnswer): "stop" | "length" | "tool_calls" | "content_filter" | undefined => answer.choices[0]?.finish_reason
const toolNamesOf = (answer: ChatAnswer): Array<string> => (answer.choices[0]?.message.tool_calls ?? []).map((call) => call.function.name)

/** Compiles only while output items narrow on `type` to their fields. */
const textOf = (answer: ResponseAnswer): string =>
  answer.output.flatMap((item) => item.type === "message" ? item.content.map((part) => part.text) : []).join("")
const callsOf = (answer: ResponseAnswer): Array<{ name: string; arguments: string }> =>
  answer.output.flatMap((item) => item.type === "function_call" ? [{ name: item.name, arguments: item.arguments }] : [])
const _message: components["schemas"]["ResponseOutputMessage"]["content"][number]["text"] = "typed"

type InputItemsAnswer = paths["/v1/responses/{id}/input_items"]["get"]["responses"]["200"]["content"]["application/json"]
/** Compiles only while listed input items narrow on `type` (they were `unknown`). */
const inputTextsOf = (answer: InputItemsAnswer): Array<string> =>
  answer.data.flatMap((item) => item.type === "message" ? item.content.map((part) => `${item.role}: ${part.text}`) : [])
/** Compiles only while the echoed request fields are typed (they were `unknown`). */
const echoedOf = (answer: ResponseAnswer): [boolean | undefined, string | undefined, number | null | undefined] =>
  [answer.parallel_tool_calls, answer.text?.format.type, answer.temperature]

/** Follows a `$ref` inside the document. */
const resolve = (spec: Record<string, any>, schema: Record<string, any>): Record<string, any> =>
  typeof schema.$ref === "string"
    ? resolve(spec, schema.$ref.replace(/^#\//, "").split("/").reduce((node: any, key: string) => node[key], spec))
    : schema

/** The object schema of `schema` (an object, or the object part of an allOf/anyOf). */
const objectOf = (spec: Record<string, any>, schema: Record<string, any>): Record<string, any> => {
  const resolved = resolve(spec, schema)
  if (resolved.properties !== undefined) return resolved
  for (const part of [...(resolved.allOf ?? []), ...(resolved.anyOf ?? [])]) {
    const found = objectOf(spec, part)
    if (found.properties !== undefined) return found
  }
  return resolved
}

describe("OpenAPI types every JSON answer's fields (issue 44 gap 4)", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("choices and output items have schemas; the typed client reads them from the real server", () =>
      Effect.gen(function*() {
        const spec = (yield* request("GET", "/openapi.json")).body as Record<string, any>
        const chat = spec.paths["/v1/chat/completions"].post.responses["200"].content
        const choice = objectOf(spec, objectOf(spec, chat["application/json"].schema).properties.choices.items)
        const message = objectOf(spec, choice.properties.message)
        assert.includeMembers(Object.keys(message.properties), ["role", "content", "tool_calls"])
        assert.deepStrictEqual(message.required?.includes("content"), true)
        assert.isDefined(choice.properties.finish_reason)
        assert.isDefined(chat["text/event-stream"], "the stream is its own content type")

        const responses = spec.paths["/v1/responses"].post.responses["200"].content
        const output = resolve(spec, objectOf(spec, responses["application/json"].schema).properties.output.items)
        const kinds = (output.anyOf ?? output.oneOf).map((item: any) => objectOf(spec, item).properties.type.enum[0])
        assert.includeMembers(kinds, ["message", "function_call"])
        assert.isDefined(responses["text/event-stream"], "the stream is its own content type")

        // Through openapi-fetch with the generated types, against the real server.
        const { url } = yield* TestServer
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const client = createClient<paths>({
          baseUrl: url,
          headers: { authorization: `Bearer ${yield* apiKeyOf(user)}`, "x-end-user-id": "typed-user" }
        })
        const answered = yield* Effect.promise(() =>
          client.POST("/v1/chat/completions", { body: { model: agent, messages: [{ role: "user", content: "hello" }] } as any }))
        assert.strictEqual(answered.response.status, 200)
        const answer = answered.data as ChatAnswer
        assert.strictEqual(contentOf(answer), "You said: hello")
        assert.strictEqual(finishOf(answer), "stop")
        assert.deepStrictEqual(toolNamesOf(answer), [])

        const created = yield* Effect.promise(() => client.POST("/v1/responses", { body: { model: agent, input: "hello" } as any }))
        assert.strictEqual(created.response.status, 200)
        const response = created.data as ResponseAnswer
        assert.strictEqual(textOf(response), "You said: hello")
        assert.strictEqual(response.output_text, "You said: hello")
        assert.deepStrictEqual(callsOf(response), [])
        assert.strictEqual(_message, "typed")
        assert.deepStrictEqual(echoedOf(response), [true, "text", null])
        const listed = yield* Effect.promise(() =>
          client.GET("/v1/responses/{id}/input_items", { params: { path: { id: response.id }, query: {} } }))
        assert.strictEqual(listed.response.status, 200)
        assert.deepStrictEqual(inputTextsOf(listed.data as InputItemsAnswer), ["user: hello"])
      }))
  })
})
