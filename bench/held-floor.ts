/**
 * What one held SSE response costs in Effect's own HTTP server, before any of the platform's code: the floor under
 * issue 14's "heap per idle open subscription". The same 1,000 responses held three ways, each in a fresh process:
 *
 *   node --expose-gc --import tsx bench/held-floor.ts [--held 1000]
 *
 * - `node:http`: `res.write(": connected")` and nothing more (bench/floor.ts's `GET /hold`);
 * - `effect`: `@effect/platform-node`'s server with one route answering a `Readable` body (as `Sse.written` does),
 *   the platform's default tracer middleware on;
 * - `effect, tracer off`: the same with `HttpMiddleware.currentTracerDisabledWhen` set for every request.
 *
 * The clients run in the same process, so each row includes a client socket; the differences between rows are the
 * server's. Heap after two forced GCs, before and after opening. A script, not a test: it prints a table.
 */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as HttpMiddleware from "@effect/platform/HttpMiddleware"
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServer from "@effect/platform/HttpServer"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect, Exit, Layer, Scope } from "effect"
import * as ChildProcess from "node:child_process"
import * as Http from "node:http"
import { Readable } from "node:stream"

const args = new Map<string, string>()
for (let i = 2; i < process.argv.length; i += 2) args.set(process.argv[i]!.replace(/^--/, ""), process.argv[i + 1]!)
const HELD = Number(args.get("held") ?? 1000)
const MODE = args.get("mode")

const heapAfterGc = () => {
  const gc = (globalThis as { gc?: () => void }).gc
  if (gc === undefined) throw new Error("run with node --expose-gc")
  gc()
  gc()
  return process.memoryUsage().heapUsed
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 500))

/** Opens `HELD` responses on `port` and resolves once each has sent its first bytes. */
const hold = (port: number) => {
  const agent = new Http.Agent({ keepAlive: false, maxSockets: HELD + 10 })
  return Promise.all(Array.from({ length: HELD }, () =>
    new Promise<void>((resolve, reject) => {
      Http.get({ host: "127.0.0.1", port, path: "/hold", agent }, (response) => response.once("data", () => resolve()))
        .on("error", reject)
    })))
}

/** Warms the path with a first batch (JIT, pools), then measures a second one. */
const measure = async (port: number) => {
  await hold(port)
  await settle()
  const before = heapAfterGc()
  await hold(port)
  await settle()
  return (heapAfterGc() - before) / HELD
}

const bare = () =>
  new Promise<number>((resolve) => {
    const server = Http.createServer((_request, response) => {
      response.writeHead(200, { "content-type": "text/event-stream" })
      response.write(": connected\n\n")
    })
    server.listen(0, "127.0.0.1", () => resolve(measure((server.address() as { port: number }).port)))
  })

const effect = (tracer: boolean) =>
  Effect.gen(function*() {
    const app = HttpRouter.empty.pipe(HttpRouter.get("/hold", Effect.sync(() => {
      const body = new Readable({ read() {} })
      body.push(": connected\n\n")
      return HttpServerResponse.raw(body, { contentType: "text/event-stream" })
    })))
    const server = Http.createServer()
    const scope = yield* Scope.make()
    yield* Layer.buildWithScope(
      HttpServer.serve(app).pipe(Layer.provide(NodeHttpServer.layer(() => server, { port: 0, host: "127.0.0.1" }))),
      scope
    ).pipe(tracer ? (self) => self : Effect.locally(HttpMiddleware.currentTracerDisabledWhen, () => true))
    const port = (server.address() as { port: number }).port
    const perHeld = yield* Effect.promise(() => measure(port))
    yield* Effect.fork(Scope.close(scope, Exit.void))
    return perHeld
  })

const modes = { "node:http": bare, effect: () => Effect.runPromise(effect(true)), "effect, tracer off": () => Effect.runPromise(effect(false)) }

if (MODE !== undefined) {
  modes[MODE as keyof typeof modes]().then((perHeld) => {
    process.stdout.write(JSON.stringify({ perHeld }))
    process.exit(0)
  })
} else {
  console.log(`| server (${HELD} held, client sockets in the same process) | heap per held response |`)
  console.log("| --- | ---: |")
  for (const mode of Object.keys(modes)) {
    const out = ChildProcess.execFileSync(process.execPath, [...process.execArgv, import.meta.filename, "--held", String(HELD), "--mode", mode])
    console.log(`| ${mode} | ${(JSON.parse(String(out)).perHeld / 1024).toFixed(1)} KiB |`)
  }
}
