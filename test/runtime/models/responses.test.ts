import type { AiError } from "@effect/ai"
import { NodeHttpClient } from "@effect/platform-node"
import { assert, describe, layer } from "@effect/vitest"
import { Duration, Effect, Either, Layer, Option, Redacted, Stream } from "effect"
import { describeFailure } from "../../../src/runtime/models/Upstream.js"
import { CurrentOutputFormat } from "../../../src/runtime/models/OutputFormat.js"
import * as Responses from "../../../src/runtime/models/Responses.js"
import * as Mock from "../../support/MockUpstream.js"

const KEY = "sk-test-responses-9a8b7c6d5e"

const setup = (options: { readonly apiKey?: string; readonly idleTimeout?: Duration.DurationInput } = {}) =>
  Effect.gen(function*() {
    const upstream = yield* Mock.make
    const model = yield* Responses.make({
      baseUrl: upstream.baseUrl,
      apiKey: options.apiKey === undefined ? Option.none() : Option.some(Redacted.make(options.apiKey)),
      model: "gpt-4o-mini",
      idleTimeout: options.idleTimeout ?? "5 seconds",
      requestTimeout: "20 seconds"
    })
    return { upstream, model }
  })

const fail = <A, E extends AiError.AiError, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.flatMap(Effect.either(effect), (result) =>
    Either.isLeft(result)
      ? Effect.succeed(result.left as AiError.AiError)
      : Effect.dieMessage(`expected a failure, got ${JSON.stringify(result.right).slice(0, 300)}`))

// The smallest Responses stream `@effect/ai-openai` decodes: what OpenAI sends, minus optional fields.
const response = (status: string, extra: Record<string, unknown> = {}) => ({
  id: "resp_1",
  object: "response",
  created_at: 1_700_000_000,
  status,
  error: null,
  incomplete_details: null,
  output: [],
  instructions: null,
  model: "gpt-4o-mini",
  tools: [],
  tool_choice: "auto",
  parallel_tool_calls: true,
  metadata: {},
  temperature: 1,
  top_p: 1,
  ...extra
})

let sequence = 0
const event = (type: string, fields: Record<string, unknown>) =>
  Mock.sse({ type, sequence_number: sequence++, ...fields }, type)

const created = () => event("response.created", { response: response("in_progress") })
const completed = (input: number, output: number) =>
  event("response.completed", {
    response: response("completed", {
      usage: {
        input_tokens: input,
        output_tokens: output,
        total_tokens: input + output,
        input_tokens_details: { cached_tokens: 0 },
        output_tokens_details: { reasoning_tokens: 0 }
      }
    })
  })
const message = (deltas: ReadonlyArray<string>) => [
  event("response.output_item.added", {
    output_index: 0,
    item: { type: "message", id: "msg_1", role: "assistant", status: "in_progress", content: [] }
  }),
  ...deltas.map((delta) =>
    event("response.output_text.delta", { output_index: 0, content_index: 0, item_id: "msg_1", delta, logprobs: [] })
  ),
  event("response.output_item.done", {
    output_index: 0,
    item: {
      type: "message",
      id: "msg_1",
      role: "assistant",
      status: "completed",
      content: [{ type: "output_text", text: deltas.join(""), annotations: [], logprobs: [] }]
    }
  })
]

layer(Layer.merge(NodeHttpClient.layerUndici, Mock.ToolsLayer), { excludeTestServices: true })(
  "Responses provider",
  (it) => {
    describe("streaming", () => {
      it.scoped("streams text cut across TCP writes, with usage, to POST /v1/responses with the key", () =>
        Effect.gen(function*() {
          const { model, upstream } = yield* setup({ apiKey: KEY })
          const body = [created(), ...message(["Hel", "lo ", "world"]), completed(5, 3)].join("")
          yield* upstream.script(Mock.stream(Mock.chop(body, 64, 2)))
          const parts = yield* Mock.streamPlain(model, "hi")
          assert.strictEqual(Mock.textOf(parts), "Hello world")
          const finish = parts.at(-1)
          assert(finish?.type === "finish")
          assert.strictEqual(finish.usage.inputTokens, 5)
          assert.strictEqual(finish.usage.outputTokens, 3)

          const [request] = yield* upstream.requests
          assert.strictEqual(request?.path, "/v1/responses")
          assert.strictEqual(request?.body.model, "gpt-4o-mini")
          assert.strictEqual(request?.body.stream, true)
          assert.strictEqual(request?.headers.authorization, `Bearer ${KEY}`)
          assert.include(JSON.stringify(request?.body.input), "hi")
        }))

      it.scoped("a structured-output format goes upstream as text.format (issue 30)", () =>
        Effect.gen(function*() {
          const { model, upstream } = yield* setup()
          yield* upstream.script(Mock.stream([created(), ...message(["{\"city\":\"Oslo\"}"]), completed(1, 1)]))
          const schema = { type: "object", properties: { city: { type: "string" } }, required: ["city"], additionalProperties: false }
          const parts = yield* Mock.streamPlain(model, "where?").pipe(
            Effect.locally(CurrentOutputFormat, { type: "json_schema", name: "place", schema, strict: true })
          )
          assert.strictEqual(Mock.textOf(parts), "{\"city\":\"Oslo\"}")
          const [request] = yield* upstream.requests
          assert.deepStrictEqual(request?.body.text.format, { type: "json_schema", name: "place", schema, strict: true })
        }))

      it.scoped("without a key no Authorization header is sent", () =>
        Effect.gen(function*() {
          const { model, upstream } = yield* setup()
          yield* upstream.script(Mock.stream([created(), ...message(["ok"]), completed(1, 1)]))
          assert.strictEqual(Mock.textOf(yield* Mock.streamPlain(model, "hi")), "ok")
          const [request] = yield* upstream.requests
          assert.isUndefined(request?.headers.authorization)
        }))

      it.scoped("a function call streams its arguments and survives arguments its schema rejects", () =>
        Effect.gen(function*() {
          const { model, upstream } = yield* setup()
          const item = (status: string, args: string) => ({
            type: "function_call",
            id: "fc_1",
            call_id: "call_1",
            name: "calculator",
            arguments: args,
            status
          })
          yield* upstream.script(Mock.stream([
            created(),
            event("response.output_item.added", { output_index: 0, item: item("in_progress", "") }),
            event("response.function_call_arguments.delta", { output_index: 0, item_id: "fc_1", delta: "{\"expr\":" }),
            event("response.function_call_arguments.delta", { output_index: 0, item_id: "fc_1", delta: "\"1\"}" }),
            event("response.output_item.done", { output_index: 0, item: item("completed", "{\"expr\":\"1\"}") }),
            completed(10, 4)
          ]))
          const parts = yield* Mock.streamWithTools(model, "compute")
          const deltas = parts.flatMap((part) => part.type === "tool-params-delta" ? [part.delta] : [])
          assert.deepStrictEqual(deltas, ["{\"expr\":", "\"1\"}"])
          const call = parts.find((part) => part.type === "tool-call")
          assert(call?.type === "tool-call")
          assert.strictEqual(call.id, "call_1")
          assert.deepStrictEqual(call.params as unknown, { expr: "1" })
          const [request] = yield* upstream.requests
          const names = (request?.body.tools as Array<any>).map((tool) => tool.name).sort()
          assert.deepStrictEqual(names, ["calculator", "get_time"])
        }))
    })

    describe("failures", () => {
      it.scoped("a 500 is an HttpResponseError with the status and the upstream message, without the key", () =>
        Effect.gen(function*() {
          const { model, upstream } = yield* setup({ apiKey: KEY })
          yield* upstream.script(Mock.status(500, { error: { message: `The server had an error (key ${KEY})` } }))
          const error = yield* fail(Mock.streamPlain(model, "hi"))
          assert(error._tag === "HttpResponseError")
          assert.strictEqual(error.response.status, 500)
          const failure = describeFailure(error)
          assert.strictEqual(failure.code, "upstream_error")
          assert.strictEqual(failure.message, "The model upstream returned 500: The server had an error (key [redacted])")
          assert.notInclude(Mock.renderings(error), KEY)
        }))

      it.scoped("a stall mid-stream fails within the idle timeout", () =>
        Effect.gen(function*() {
          const { model, upstream } = yield* setup({ apiKey: KEY, idleTimeout: "300 millis" })
          yield* upstream.script(Mock.stream([created(), ...message(["Hel"]).slice(0, 2)], { stallAfter: true }))
          const seen: Array<string> = []
          const error = yield* fail(
            model.streamText({ prompt: "hi" }).pipe(Stream.runForEach((part) => Effect.sync(() => seen.push(part.type))))
          )
          assert.include(seen, "text-delta")
          const failure = describeFailure(error)
          assert.strictEqual(failure.code, "upstream_timeout")
          // The idle timeout ended it (the request timeout would say "not finished within").
          assert.strictEqual(failure.message, "The model upstream timed out: nothing received for 300ms")
          assert.notInclude(Mock.renderings(error), KEY)
        }))

      it.scoped("an upstream that never answers fails within the idle timeout", () =>
        Effect.gen(function*() {
          const { model, upstream } = yield* setup({ idleTimeout: "300 millis" })
          yield* upstream.script(Mock.silence)
          const error = yield* fail(Mock.streamPlain(model, "hi"))
          assert.strictEqual(describeFailure(error).code, "upstream_timeout")
        }))

      it.scoped("response.failed fails the stream with the upstream's message instead of finishing", () =>
        Effect.gen(function*() {
          const { model, upstream } = yield* setup()
          yield* upstream.script(Mock.stream([
            created(),
            ...message(["partial"]),
            event("response.failed", {
              response: response("failed", { error: { code: "server_error", message: "The model crashed" } })
            })
          ]))
          const error = yield* fail(Mock.streamPlain(model, "hi"))
          assert.deepStrictEqual(describeFailure(error), {
            code: "upstream_error",
            message: "The model upstream reported an error mid-stream: The model crashed"
          })
        }))

      it.scoped("an error event fails the stream too", () =>
        Effect.gen(function*() {
          const { model, upstream } = yield* setup()
          yield* upstream.script(Mock.stream([
            created(),
            event("error", { code: "rate_limit_exceeded", message: "Slow down", param: null })
          ]))
          const error = yield* fail(Mock.streamPlain(model, "hi"))
          assert.strictEqual(describeFailure(error).message, "The model upstream reported an error mid-stream: Slow down")
        }))
    })
  }
)
