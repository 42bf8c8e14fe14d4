/**
 * The floor for bench/engine.ts: a bare `node:http` server doing what Atrium's measured routes do with nothing in
 * between (no framework, no Effect, no auth, no database), so the engine's rows can say what the same load costs
 * plain Node on the same machine. Run as its own process:
 *
 *   node --expose-gc --import tsx bench/floor.ts [--port 0]        # prints `listening <port>` once it listens
 *
 * Routes:
 * - `GET /json`: a small JSON answer, the body `GET /v1/meters` answers on a fresh platform (the floor of a trivial
 *   request);
 * - `POST /run`: reads and parses a JSON body `{ message }`, and answers with the SSE stream of Atrium's builtin run,
 *   11 events (run.created, run.in_progress, thinking status / 2 deltas / status, 3 text deltas `You said: <message>`
 *   in groups of three words, usage.token, run.completed) then `data: [DONE]`, each event its own write, as a stream
 *   that produces them one by one would (the floor of a run or a session turn);
 * - `GET /hold`: an SSE answer greeted with `: connected` and held open, pinged `: ping` every 15 s by one shared
 *   setInterval for all held answers (the floor of an idle subscription);
 * - `GET /mem`: a full GC (`global.gc()`, hence --expose-gc) then `process.memoryUsage()` and the number held, as JSON.
 *
 * A script, not a test: it serves until it is killed.
 */
import * as Crypto from "node:crypto"
import * as Http from "node:http"

const args = new Map<string, string>()
for (let i = 2; i < process.argv.length; i += 2) args.set(process.argv[i]!.replace(/^--/, ""), process.argv[i + 1]!)
const PORT = Number(args.get("port") ?? 0)

const METERS = JSON.stringify({
  data: [{ id: "model.builtin", kind: "model_usage", model: "builtin", unit: "1k_tokens", input_credits: 0.01, output_credits: 0.02 }],
  has_more: false
})

const STREAM_HEADERS = {
  "content-type": "text/event-stream",
  "cache-control": "no-cache, no-transform",
  "x-accel-buffering": "no"
}

const frame = (event: Record<string, unknown> & { readonly type: string }) =>
  `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`

/** The builtin model's answer to `message`: `You said: <message>`, in pieces of three words. */
const pieces = (message: string): Array<string> => {
  const words = `You said: ${message}`.split(" ")
  const out: Array<string> = []
  for (let i = 0; i < words.length; i += 3) {
    const last = i + 3 >= words.length
    out.push(words.slice(i, i + 3).join(" ") + (last ? "" : " "))
  }
  return out
}

const run = (request: Http.IncomingMessage, response: Http.ServerResponse) => {
  let body = ""
  request.setEncoding("utf8")
  request.on("data", (chunk: string) => (body += chunk))
  request.on("end", () => {
    let message = ""
    try {
      message = String((JSON.parse(body) as { message?: unknown }).message ?? "")
    } catch {
      response.writeHead(400, { "content-type": "application/json" }).end('{"error":"invalid JSON"}')
      return
    }
    response.writeHead(200, STREAM_HEADERS)
    let id = 0
    const send = (event: Record<string, unknown> & { readonly type: string }) =>
      response.write(frame({ ...event, event_id: ++id }))
    send({ type: "run.created", run_id: `run_${Crypto.randomBytes(15).toString("base64url")}`, agent: "floor" })
    send({ type: "run.in_progress", turn: 1 })
    send({ type: "output.thinking.status", status: "started" })
    send({ type: "output.thinking.delta", delta: "Reading the message. ", content: "Reading the message. " })
    send({ type: "output.thinking.delta", delta: "Choosing what to do.", content: "Choosing what to do." })
    send({ type: "output.thinking.status", status: "finished" })
    const text = pieces(message)
    for (const piece of text) send({ type: "output.text.delta", delta: piece, content: piece })
    const usage = { input_tokens: message.split(" ").length + 6, output_tokens: text.join("").split(" ").length * 4 }
    send({ type: "usage.token", model: "builtin", ...usage, credits: 0.00051 })
    send({ type: "run.completed", usage, credits_charged: 0.00051 })
    response.end("data: [DONE]\n\n")
  })
}

const held = new Set<Http.ServerResponse>()
// One timer for every held answer, like Atrium's shared ticker.
setInterval(() => {
  for (const response of held) response.write(": ping\n\n")
}, 15_000)

const hold = (request: Http.IncomingMessage, response: Http.ServerResponse) => {
  response.writeHead(200, STREAM_HEADERS)
  response.write(": connected\n\n")
  held.add(response)
  request.socket.once("close", () => held.delete(response))
}

const gc = (globalThis as { gc?: () => void }).gc

const server = Http.createServer((request, response) => {
  const path = request.url ?? "/"
  if (request.method === "GET" && path === "/json") {
    response.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(METERS) })
    response.end(METERS)
  } else if (request.method === "POST" && path === "/run") {
    run(request, response)
  } else if (request.method === "GET" && path === "/hold") {
    hold(request, response)
  } else if (request.method === "GET" && path === "/mem") {
    gc?.()
    response.writeHead(200, { "content-type": "application/json" })
    response.end(JSON.stringify({ ...process.memoryUsage(), held: held.size, gc: gc !== undefined }))
  } else {
    response.writeHead(404, { "content-type": "application/json" }).end('{"error":"not found"}')
  }
})

server.listen(PORT, "127.0.0.1", () => {
  const address = server.address()
  console.log(`listening ${typeof address === "object" && address !== null ? address.port : PORT}`)
})
process.once("SIGTERM", () => {
  for (const response of held) response.destroy()
  server.close(() => process.exit(0))
  server.closeAllConnections()
})
