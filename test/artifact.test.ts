import { assert, describe, layer } from "@effect/vitest"
import { inject } from "vitest"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { Effect, Layer } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { request, runCodeCapability } from "./support/Client.js"
import { launchPlatform } from "./support/Process.js"
import { streamOf } from "./support/Sse.js"
import { seedDataDir } from "./support/Templates.js"
import { TestServer } from "./support/TestServer.js"

/**
 * The artifact users run (issue 25 item 4, issue 24): the image's runtime stage laid out as a folder by
 * `scripts/runtime-layout.mjs` (package files, production dependencies, `dist/`, `web/dist/`, nothing else), its
 * `dist/main.js` started from a foreign working directory. Every part that loads files at run time answers: the web
 * app's pages, the OpenAPI document, `run_code` in both languages (the sandbox's guest script), the MCP tool server,
 * and a streamed session turn.
 */

const ROOT = Path.resolve(import.meta.dirname, "..")
const PHONE = "+15551239001"
const CODE = "135790"

const artifact = Layer.scoped(
  TestServer,
  Effect.gen(function*() {
    const scratch = (under: string) =>
      Effect.acquireRelease(
        Effect.sync(() => Fs.mkdtempSync(Path.join(under, "atrium-artifact-"))),
        (dir) => Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true }))
      )
    // The production dependencies are installed once per lockfile, beside the run's migrated template (the system's
    // temporary folder, on disk), and hard-linked into the layout from there: the layout is made there too, since a
    // link cannot cross into the memory-backed scratch folder.
    const template = inject("atriumTemplatePgdata")
    const cacheRoot = template === undefined ? Os.tmpdir() : Path.dirname(Path.dirname(template))
    const dir = yield* scratch(cacheRoot)
    // The sandbox's user must read the runtimes, as in the image (files installed world-readable).
    Fs.chmodSync(dir, 0o755)
    const app = Path.join(dir, "app")
    const layout = ChildProcess.spawnSync(
      process.execPath,
      [Path.join(ROOT, "scripts", "runtime-layout.mjs"), app, "--deps-cache", Path.join(cacheRoot, "atrium-runtime-deps")],
      { encoding: "utf8" }
    )
    assert.strictEqual(layout.status, 0, `${layout.stdout}\n${layout.stderr}`)
    assert.isFalse(Fs.existsSync(Path.join(app, "src")), "the runtime layout holds no sources")
    assert.isFalse(Fs.existsSync(Path.join(app, "node_modules", "vitest")), "nor development dependencies")
    assert.include(
      Fs.readFileSync(Path.join(app, "node_modules", "effect", "dist", "esm", "HashRing.js"), "utf8"),
      "rendezvous",
      "the runtime layout holds the patched shard assignment (patches/, as the image's runtime stage copies it)"
    )
    const elsewhere = Path.join(dir, "elsewhere")
    Fs.mkdirSync(elsewhere)
    const data = yield* scratch(Os.tmpdir())
    Fs.chmodSync(data, 0o755)
    const dataDir = Path.join(data, "data")
    yield* Effect.promise(() => seedDataDir(dataDir))
    const platform = yield* launchPlatform(
      { DATA_DIR: dataDir, SMS_TEST_OTP: `${PHONE}=${CODE}` },
      { root: app, cwd: elsewhere }
    )
    return { url: platform.url, inbox: undefined as never, query: () => Effect.die("a process's database is its own") }
  })
)

const runCode = (token: string, session: string, language: "python" | "javascript", code: string) =>
  Effect.map(
    streamOf(`/v1/sessions/${session}/events`, {
      token,
      body: { type: "message", message: `/tool run_code ${JSON.stringify({ language, code })}` }
    }),
    (stream) => ({
      names: stream.events.map((e) => e.event),
      result: stream.events.find((e) => e.event === "tool_call.result")?.data.output,
      failure: stream.events.find((e) => e.event === "tool_call.failed")?.data.error as string | undefined
    })
  )

describe("the runtime artifact, started from a foreign working directory", () => {
  layer(artifact, { timeout: 600_000, excludeTestServices: true })((it) => {
    it.effect("serves the app, the OpenAPI document, run_code in both languages, MCP and a streamed turn", () =>
      Effect.gen(function*() {
        for (const page of ["/", "/chat", "/studio"]) {
          const reply = yield* request("GET", page)
          assert.strictEqual(reply.status, 200, `${page}: ${reply.text.slice(0, 300)}`)
          assert.match(reply.headers.get("content-type") ?? "", /text\/html/)
          assert.match(reply.text, /<script type="module"[^>]+src="\/assets\/[^"]+\.js"/, page)
        }
        const openapi = yield* request("GET", "/openapi.json")
        assert.strictEqual(openapi.status, 200)
        assert.property(openapi.body.paths, "/v1/sessions/{id}/events")

        const capability = yield* runCodeCapability
        assert.strictEqual(capability.status, "available", JSON.stringify(capability))

        const login = yield* request("POST", "/api/auth/login", { body: { phone: PHONE, code: CODE } })
        assert.strictEqual(login.status, 200, login.text)
        const token = login.body.token as string
        const agent = yield* request("POST", "/v1/agents", {
          token,
          body: { name: "Artifact", instructions: "Run code.", tools: [{ name: "run_code", permission: "allow" }] }
        })
        assert.strictEqual(agent.status, 201, agent.text)
        const session = yield* request("POST", "/v1/sessions", { token, body: { agent: agent.body.identifier } })
        assert.strictEqual(session.status, 201, session.text)

        const turn = yield* streamOf(`/v1/sessions/${session.body.id}/events`, { token, body: { type: "message", message: "hello" } })
        assert.strictEqual(turn.events.at(-1)?.event, "run.completed", JSON.stringify(turn.events.map((e) => e.event)))

        const python = yield* runCode(token, session.body.id, "python", "import sys\nsys.version_info[0] * 14")
        assert.strictEqual(python.result?.result, 42, JSON.stringify(python))
        const javascript = yield* runCode(token, session.body.id, "javascript", "[1, 2, 3].reduce((a, b) => a + b)")
        assert.strictEqual(javascript.result?.result, 6, JSON.stringify(javascript))

        const server = yield* TestServer
        const tools = yield* Effect.acquireUseRelease(
          Effect.promise(async () => {
            const client = new Client({ name: "artifact-test", version: "1.0.0" })
            await client.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), {
              requestInit: { headers: { authorization: `Bearer ${token}` } }
            }))
            return client
          }),
          (client) => Effect.promise(() => client.listTools()),
          (client) => Effect.promise(() => client.close())
        )
        assert.isAtLeast(tools.tools.length, 22, tools.tools.map((t) => t.name).join(", "))
      }), 600_000)
  })
})
