import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { createApiKey, request } from "../support/Client.js"
import { names, type ParsedStream, streamOf } from "../support/Sse.js"
import { TestServer } from "../support/TestServer.js"
import { upload } from "../files/support.js"
import { agentWith, ENV, LIVE, newUser } from "../runs/runs-support.js"

/**
 * `run_code` (issue 19 items 1, 2, 7): Python and JavaScript in the session's WebAssembly sandbox, through the real
 * HTTP server, the builtin model's `/tool` directive and the session's event stream. Each Pyodide load costs seconds,
 * so the Python cases share a few sessions.
 */

const SANDBOX_ENV = {
  ...ENV,
  SANDBOX_TIME_MS: "5000",
  SANDBOX_OUTPUT_BYTES: "20000",
  SANDBOX_MAX_FILES: "20"
} as const

const createSession = (token: string, agent: string, extra: Record<string, unknown> = {}, headers: Record<string, string> = {}) =>
  Effect.gen(function*() {
    const reply = yield* request("POST", "/v1/sessions", { token, body: { agent, ...extra }, headers })
    assert.strictEqual(reply.status, 201, reply.text)
    return reply.body.id as string
  })

const say = (token: string, session: string, message: string, headers: Record<string, string> = {}) =>
  streamOf(`/v1/sessions/${session}/events`, { token, body: { type: "message", message }, headers })

const directive = (tool: string, args: unknown) => `/tool ${tool} ${JSON.stringify(args)}`

/** The one tool call of a turn: its result, or its failure; the turn itself always completes. */
const toolOutcome = (stream: ParsedStream) => {
  const end = stream.events[stream.events.length - 1]!
  assert.strictEqual(end.event, "run.completed", names(stream).join(", "))
  const result = stream.events.find((e) => e.event === "tool_call.result")
  const failed = stream.events.find((e) => e.event === "tool_call.failed")
  return { result: result?.data.output, error: failed?.data.error as string | undefined }
}

const python = (token: string, session: string, code: string, headers: Record<string, string> = {}) =>
  Effect.map(say(token, session, directive("run_code", { language: "python", code }), headers), toolOutcome)
const javascript = (token: string, session: string, code: string, headers: Record<string, string> = {}) =>
  Effect.map(say(token, session, directive("run_code", { language: "javascript", code }), headers), toolOutcome)

const TOOLS = { run_code: "allow", write_file: "allow", read_file: "allow", list_files: "allow" } as const

// Once, in the embedded suite (test/support/Suites.ts): what run_code does is the sandbox's (guest processes, Pyodide, QuickJS), the same
// over PGlite as over PostgreSQL, and its Python loads are about 30 CPU-seconds a run. The escape and layer tests
// (test/security/sandbox-*.test.ts) run once too; sessions over PostgreSQL are the services suite's sessions tests.
describe("run_code", () => {
  layer(TestServer.layer(SANDBOX_ENV), { ...LIVE, timeout: 120_000 })((it) => {
    it.effect("Python: files in and out, variables that persist, and every limit ends as tool_call.failed", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token, TOOLS)
        const session = yield* createSession(user.token, agent)

        const wrote = toolOutcome(yield* say(user.token, session, directive("write_file", { path: "in.csv", content: "a,b\n1,2\n" })))
        assert.isUndefined(wrote.error)

        const first = yield* python(
          user.token,
          session,
          "x = 41\ndata = open('in.csv').read()\nopen('out.txt', 'w').write(data.upper())\nprint('rows', len(data.splitlines()))\nlen(data)"
        )
        assert.isUndefined(first.error, first.error)
        assert.strictEqual(first.result.stdout, "rows 2\n")
        assert.strictEqual(first.result.result, 8)
        assert.deepStrictEqual(first.result.files, [{ path: "out.txt", bytes: 8 }])

        const read = toolOutcome(yield* say(user.token, session, directive("read_file", { path: "out.txt" })))
        assert.deepStrictEqual(read.result, { path: "out.txt", content: "A,B\n1,2\n" })

        const second = yield* python(user.token, session, "x + 1")
        assert.strictEqual(second.result.result, 42, "a variable persists between two calls of one session")

        const passwd = yield* python(user.token, session, "open('/etc/passwd').read()")
        assert.match(passwd.error!, /FileNotFoundError/)
        const socket = yield* python(user.token, session, "import socket\nsocket.socket().connect(('127.0.0.1', 22))")
        assert.match(socket.error!, /Network is unreachable/)
        const fork = yield* python(user.token, session, "import os\nos.fork()")
        assert.match(fork.error!, /OSError|not supported|no attribute/i)
        const escape = yield* python(user.token, session, "from pyodide.ffi import to_js\nto_js({}).constructor.constructor('return process')()")
        // The constructor chain ends at the closed Function constructor (None): the call itself fails, nothing ran.
        assert.match(escape.error!, /TypeError: (Expected callable|'NoneType' object is not callable)/, "no way from a JavaScript object to the host's Function constructor")
        assert.isUndefined(escape.result)
        const memory = yield* python(user.token, session, "blocks = []\nwhile True: blocks.append(bytearray(10_000_000))")
        assert.match(memory.error!, /\(memory\)/)
        const output = yield* python(user.token, session, "while True: print('y' * 1000)")
        assert.match(output.error!, /\(output\)/)
        const files = yield* python(user.token, session, "for i in range(50): open(f'f{i}.txt', 'w').write('z')")
        assert.match(files.error!, /\(files\)/)
        const listed = toolOutcome(yield* say(user.token, session, directive("list_files", {})))
        assert.deepStrictEqual(listed.result.files.map((f: { path: string }) => f.path), ["in.csv", "out.txt"], "a failed run writes nothing")

        const still = yield* python(user.token, session, "x")
        assert.strictEqual(still.result.result, 41, "limits that the guest hit leave the sandbox usable")

        const loop = yield* python(user.token, session, "while True: pass")
        assert.match(loop.error!, /\(time\)/)
        const after = yield* python(user.token, session, "'x' in globals()")
        assert.strictEqual(after.result.result, false, "a sandbox killed by the time limit is replaced by a fresh one")
      }), 400_000)

    it.effect("an environment's variables and setup script; a session's variables are not another's", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token, TOOLS)
        const file = yield* upload(
          { headers: { authorization: `Bearer ${user.token}` } },
          new TextEncoder().encode("city,temp\nParis,12\nOslo,3\n"),
          { filename: "weather.csv", contentType: "text/csv" }
        )
        const environment = yield* request("POST", "/v1/environments", {
          token: user.token,
          body: {
            name: "analysis",
            env: { FOO: "bar" },
            files: [file.id],
            setup_script: "prepared = 7\nopen('setup.txt', 'w').write('ok')"
          }
        })
        assert.strictEqual(environment.status, 201, environment.text)
        const session = yield* createSession(user.token, agent, { environment_id: environment.body.id })
        const seen = yield* python(
          user.token,
          session,
          "import os, csv\n[os.environ.get('FOO'), prepared, open('setup.txt').read(), 'x' in globals(), " +
            "max(csv.DictReader(open('weather.csv')), key=lambda r: int(r['temp']))['city']]"
        )
        assert.isUndefined(seen.error, seen.error)
        assert.deepStrictEqual(seen.result.result, ["bar", 7, "ok", false, "Paris"])

        const kept = yield* python(user.token, session, "z = 1\nz")
        assert.strictEqual(kept.result.result, 1)
        const changed = yield* request("PATCH", `/v1/environments/${environment.body.id}`, { token: user.token, body: { env: { FOO: "baz" } } })
        assert.strictEqual(changed.status, 200, changed.text)
        const reset = yield* python(user.token, session, "import os\n[os.environ.get('FOO'), 'z' in globals()]")
        assert.deepStrictEqual(reset.result.result, ["baz", false], "a changed environment gets a new sandbox")

        const packaged = yield* request("POST", "/v1/environments", { token: user.token, body: { name: "numpy", packages: ["numpy"] } })
        const other = yield* createSession(user.token, agent, { environment_id: packaged.body.id })
        const refused = yield* python(user.token, other, "1")
        assert.match(refused.error!, /\(setup\).*no package index is configured/s)
      }), 300_000)

    it.effect("JavaScript: files, persistence within a session, nothing across end users", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const key = yield* createApiKey(user.token)
        const agent = yield* agentWith(user.token, TOOLS)
        const alice = { "x-end-user-id": "alice" }
        const bob = { "x-end-user-id": "bob" }
        const aliceSession = yield* createSession(key.key, agent, {}, alice)
        const bobSession = yield* createSession(key.key, agent, {}, bob)

        const first = yield* javascript(key.key, aliceSession, "var secret = 'alice'; fs.writeFile('notes.md', '# hi'); console.log(fs.listFiles().length); 6 * 7", alice)
        assert.isUndefined(first.error, first.error)
        assert.strictEqual(first.result.result, 42)
        assert.strictEqual(first.result.stdout, "1\n")
        const again = yield* javascript(key.key, aliceSession, "secret + ':' + fs.readFile('notes.md')", alice)
        assert.strictEqual(again.result.result, "alice:# hi")

        const other = yield* javascript(key.key, bobSession, "[typeof secret, fs.listFiles()]", bob)
        assert.deepStrictEqual(other.result.result, ["undefined", []])
        const network = yield* javascript(key.key, bobSession, "fetch('http://127.0.0.1/')", bob)
        assert.match(network.error!, /fetch' is not defined/)
        const loop = yield* javascript(key.key, bobSession, "for (;;) {}", bob)
        assert.match(loop.error!, /\(time\)/)
        const memory = yield* javascript(key.key, bobSession, "const a = []; for (;;) a.push(new ArrayBuffer(1024 * 1024 * 1024))", bob)
        assert.match(memory.error!, /\(memory\)/)
      }), 300_000)
  })
})
