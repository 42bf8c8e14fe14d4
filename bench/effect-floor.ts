/**
 * The Effect floor for bench/engine.ts: a bare `HttpApi` served by `NodeHttpServer`, with the same
 * `@effect/platform` and `@effect/platform-node` versions as Atrium and the same answers as bench/floor.ts, and
 * nothing else (no middleware, no auth, no database). Beside the `node:http` floor it splits what a request costs
 * into what Effect's HTTP stack costs and what our own layers add (issue 28).
 *
 *   node --expose-gc --import tsx bench/effect-floor.ts [--port 0]   # prints `listening <port>` once it listens
 *
 * Routes, as bench/floor.ts:
 * - `GET /json`: the body `GET /v1/meters` answers on a fresh platform, encoded through its schema;
 * - `POST /run`: a JSON payload `{ message }` decoded through its schema, answered with the builtin run's 11 SSE
 *   events then `data: [DONE]`, as an Effect `Stream` of frames (as the platform streams);
 * - `GET /hold`: an SSE answer greeted with `: connected` and held open, pinged every 15 s by one shared ticker;
 * - `GET /mem`: a full GC then `process.memoryUsage()` and the number held.
 *
 * A script, not a test: it serves until it is killed. `Effect.run*` here is the script's own main.
 */
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Effect, Layer, PubSub, Schedule, Schema, Stream } from "effect"
import * as Crypto from "node:crypto"
import * as Http from "node:http"

const args = new Map<string, string>()
for (let i = 2; i < process.argv.length; i += 2) args.set(process.argv[i]!.replace(/^--/, ""), process.argv[i + 1]!)
const PORT = Number(args.get("port") ?? 0)

const Meter = Schema.Struct({
  id: Schema.String,
  kind: Schema.String,
  model: Schema.String,
  unit: Schema.String,
  input_credits: Schema.Number,
  output_credits: Schema.Number
})
const Meters = Schema.Struct({ data: Schema.Array(Meter), has_more: Schema.Boolean })
const METERS: typeof Meters.Type = {
  data: [{ id: "model.builtin", kind: "model_usage", model: "builtin", unit: "1k_tokens", input_credits: 0.01, output_credits: 0.02 }],
  has_more: false
}
const Memory = Schema.Struct({ heapUsed: Schema.Number, rss: Schema.Number, held: Schema.Number, gc: Schema.Boolean })

class FloorGroup extends HttpApiGroup.make("floor")
  .add(HttpApiEndpoint.get("json", "/json").addSuccess(Meters))
  .add(HttpApiEndpoint.post("run", "/run").setPayload(Schema.Struct({ message: Schema.String, agent: Schema.optional(Schema.String) })))
  .add(HttpApiEndpoint.get("hold", "/hold"))
  .add(HttpApiEndpoint.get("mem", "/mem").addSuccess(Memory))
{}
class FloorApi extends HttpApi.make("effect-floor").add(FloorGroup) {}

const STREAM_HEADERS = { "cache-control": "no-cache, no-transform", "x-accel-buffering": "no" }
const encoder = new TextEncoder()
const frame = (event: Record<string, unknown> & { readonly type: string }) =>
  encoder.encode(`event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`)

/** The builtin model's answer to `message`: `You said: <message>`, in pieces of three words. */
const pieces = (message: string): Array<string> => {
  const words = `You said: ${message}`.split(" ")
  const out: Array<string> = []
  for (let i = 0; i < words.length; i += 3) out.push(words.slice(i, i + 3).join(" ") + (i + 3 >= words.length ? "" : " "))
  return out
}

const runEvents = (message: string): Array<Record<string, unknown> & { readonly type: string }> => {
  const text = pieces(message)
  const usage = { input_tokens: message.split(" ").length + 6, output_tokens: text.join("").split(" ").length * 4 }
  return [
    { type: "run.created", run_id: `run_${Crypto.randomBytes(15).toString("base64url")}`, agent: "floor" },
    { type: "run.in_progress", turn: 1 },
    { type: "output.thinking.status", status: "started" },
    { type: "output.thinking.delta", delta: "Reading the message. ", content: "Reading the message. " },
    { type: "output.thinking.delta", delta: "Choosing what to do.", content: "Choosing what to do." },
    { type: "output.thinking.status", status: "finished" },
    ...text.map((piece) => ({ type: "output.text.delta", delta: piece, content: piece })),
    { type: "usage.token", model: "builtin", ...usage, credits: 0.00051 },
    { type: "run.completed", usage, credits_charged: 0.00051 }
  ]
}

const gc = (globalThis as { gc?: () => void }).gc
let held = 0

const FloorLive = HttpApiBuilder.group(FloorApi, "floor", (handlers) =>
  Effect.gen(function*() {
    // One ticker for every held answer, like Atrium's shared ticker.
    const pings = yield* PubSub.unbounded<Uint8Array>()
    const ping = encoder.encode(": ping\n\n")
    yield* PubSub.publish(pings, ping).pipe(Effect.repeat(Schedule.spaced("15 seconds")), Effect.forkScoped)
    return handlers
      .handle("json", () => Effect.succeed(METERS))
      .handle("run", ({ payload }) =>
        Effect.sync(() => {
          let id = 0
          const frames = Stream.fromIterable(runEvents(payload.message)).pipe(
            Stream.map((event) => frame({ ...event, event_id: ++id })),
            Stream.concat(Stream.succeed(encoder.encode("data: [DONE]\n\n")))
          )
          return HttpServerResponse.stream(frames, { contentType: "text/event-stream", headers: STREAM_HEADERS })
        }))
      .handle("hold", () =>
        Effect.succeed(
          HttpServerResponse.stream(
            Stream.succeed(encoder.encode(": connected\n\n")).pipe(
              Stream.concat(Stream.fromPubSub(pings)),
              Stream.ensuring(Effect.sync(() => held--)),
              Stream.onStart(Effect.sync(() => held++))
            ),
            { contentType: "text/event-stream", headers: STREAM_HEADERS }
          )
        ))
      .handle("mem", () =>
        Effect.sync(() => {
          gc?.()
          const usage = process.memoryUsage()
          return { heapUsed: usage.heapUsed, rss: usage.rss, held, gc: gc !== undefined }
        }))
  }))

const server = Http.createServer()
const ServerLive = HttpApiBuilder.serve().pipe(
  Layer.provide(HttpApiBuilder.api(FloorApi).pipe(Layer.provide(FloorLive))),
  Layer.provide(NodeHttpServer.layer(() => server, { port: PORT, host: "127.0.0.1" }))
)

server.once("listening", () => {
  const address = server.address()
  console.log(`listening ${typeof address === "object" && address !== null ? address.port : PORT}`)
})
server.on("close", () => process.exit(0))

NodeRuntime.runMain(Layer.launch(ServerLive), { disableErrorReporting: false })
