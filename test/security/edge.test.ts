import { PGlite } from "@electric-sql/pglite"
import { assert, describe, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs/promises"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import { type Reply, requestAt, type RequestOptions } from "../support/Client.js"
import { creates } from "../support/Creates.js"
import { launchPlatform, type PlatformProcess } from "../support/Process.js"
import { pollUntil } from "../support/Poll.js"
import { seedDataDir } from "../support/Templates.js"

/**
 * Issue 42 items 3, 4, 5 and 8 against `dist/main.js`: a body that never ends is answered 408 within seconds and its
 * connection closed; every malformed multipart upload is a 400 naming the problem, with nothing created and no
 * temporary file left; every create of the contract replays with its `Idempotency-Key`; every answer carries
 * `Referrer-Policy` and `nosniff`. One platform for the file; the last test stops it to read its database.
 */

const PHONE = "+15550004242"
const CODE = "424242"
const INTERNAL_TOKEN = `internal-${Crypto.randomBytes(12).toString("hex")}`
/** Short, so the deadline's tests wait seconds; the default is 10 seconds. */
const DEADLINE_MS = 2_000

interface Platform {
  readonly process: PlatformProcess
  readonly dataDir: string
  /** The platform's TMPDIR: where the multipart parser puts its temporary files. */
  readonly tmpDir: string
}
class EdgePlatform extends Context.Tag("test/security/EdgePlatform")<EdgePlatform, Platform>() {}

const EdgePlatformLive = Layer.scoped(
  EdgePlatform,
  Effect.gen(function*() {
    const dir = yield* Effect.acquireRelease(
      Effect.promise(() => Fs.mkdtemp(Path.join(Os.tmpdir(), "atrium-edge-"))),
      (dir) => Effect.promise(() => Fs.rm(dir, { recursive: true, force: true }))
    )
    const dataDir = Path.join(dir, "data")
    const tmpDir = Path.join(dir, "tmp")
    yield* Effect.promise(() => Promise.all([seedDataDir(dataDir), Fs.mkdir(tmpDir)]))
    const process = yield* launchPlatform({
      DATA_DIR: dataDir,
      TMPDIR: tmpDir,
      INTERNAL_TOKEN,
      JWT_SECRET: `jwt-${Crypto.randomBytes(24).toString("hex")}`,
      SECRETS_KEY: `secrets-${Crypto.randomBytes(24).toString("hex")}`,
      SMS_TEST_OTP: `${PHONE}=${CODE}`,
      REQUEST_BODY_TIMEOUT: `${DEADLINE_MS} millis`
    })
    return { process, dataDir, tmpDir }
  })
)

const call = (method: string, path: string, options: RequestOptions = {}) =>
  Effect.flatMap(EdgePlatform, (platform) => requestAt(platform.process.url, method, path, options))

const login = Effect.map(call("POST", "/api/auth/login", { body: { phone: PHONE, code: CODE } }), (reply) => {
  assert.strictEqual(reply.status, 200, reply.text)
  return reply.body.token as string
})

const BOUNDARY = "edge-test-boundary"
const MULTIPART = `multipart/form-data; boundary=${BOUNDARY}`

/** OpenAI's one-step upload as its clients write it: `purpose`, then `file` with `disposition` in its headers. */
const uploadBody = (disposition: string, content = "hello", extraHeaders = "") =>
  `--${BOUNDARY}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nassistants\r\n` +
  `--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; ${disposition}\r\n${extraHeaders}Content-Type: text/plain\r\n\r\n` +
  `${content}\r\n--${BOUNDARY}--\r\n`

/** Ids of the files this file's tests made: the database must hold exactly these at the end. */
const made = new Set<string>()

const upload = (token: string, filename: string, headers: Record<string, string> = {}) =>
  Effect.map(
    call("POST", "/v1/files", { token, raw: uploadBody(`filename="${filename}"`), headers: { "content-type": MULTIPART, ...headers } }),
    (reply) => {
      if (reply.status === 200) made.add(reply.body.id)
      return reply
    }
  )

/** Entries under `dir`, recursively (none when it is gone). */
const entriesOf = (dir: string) => Effect.promise(() => Fs.readdir(dir, { recursive: true }).catch(() => [] as Array<string>))

/** What the platform keeps of file bytes: its stored objects, less the folder it writes them in first. */
const storedObjects = Effect.flatMap(EdgePlatform, (platform) =>
  Effect.map(entriesOf(Path.join(platform.dataDir, "objects")), (entries) => entries.filter((entry) => !entry.startsWith(".tmp")).length))

/** The platform's temporary folder is empty again (a request's folder goes when its answer is out; it may lag it). */
const noTemporaryFiles = Effect.gen(function*() {
  const { tmpDir } = yield* EdgePlatform
  yield* pollUntil(entriesOf(tmpDir), (left) => left.length === 0, "no temporary file left behind", { every: 50, within: 2_000 })
})

interface RawAnswer {
  readonly status: number
  readonly head: string
  readonly body: any
  /** From the first byte sent to the answer's last. */
  readonly elapsedMs: number
  /** Whether the server closed the connection (the client never does). */
  readonly closedByServer: boolean
}

/**
 * Sends `head` and then only `body` over a raw socket, and never the rest: the client stays, as the attack's did.
 * Resolves when the server closes the connection, or after 15 s with what arrived.
 */
const sendAndHold = (head: string, body: string) =>
  Effect.flatMap(EdgePlatform, (platform) =>
    Effect.promise(() =>
      new Promise<RawAnswer>((resolve) => {
        const url = new URL(platform.process.url)
        const socket = Net.connect(Number(url.port), url.hostname)
        const started = Date.now()
        let received = ""
        const done = (closedByServer: boolean) => {
          clearTimeout(timer)
          socket.destroy()
          const [head = "", ...rest] = received.split("\r\n\r\n")
          let body: unknown
          try {
            body = JSON.parse(rest.join("\r\n\r\n"))
          } catch {
            body = undefined
          }
          resolve({ status: Number(/^HTTP\/1\.1 (\d+)/.exec(head)?.[1] ?? 0), head: head.toLowerCase(), body, elapsedMs: Date.now() - started, closedByServer })
        }
        const timer = setTimeout(() => done(false), 15_000)
        socket.on("connect", () => socket.write(head + body))
        socket.on("data", (chunk) => (received += chunk))
        socket.on("end", () => done(true))
        socket.on("error", () => done(true))
      })
    ))

const assertTimedOut = (answer: RawAnswer, what: string) => {
  assert.strictEqual(answer.status, 408, `${what}: ${answer.head}`)
  assert.strictEqual(answer.body?.error?.type, "request_timeout", what)
  assert.isTrue(answer.closedByServer, `${what}: the server kept the connection`)
  // The deadline, plus a check's worth (the storage route looks every deadline) and a busy machine's slack.
  assert.isBelow(answer.elapsedMs, 3 * DEADLINE_MS + 3_000, what)
  assert.isAtLeast(answer.elapsedMs, DEADLINE_MS - 100, what)
}

const assertEveryAnswerHeaders = (headers: Headers, what: string) => {
  assert.strictEqual(headers.get("referrer-policy"), "strict-origin-when-cross-origin", what)
  assert.strictEqual(headers.get("x-content-type-options"), "nosniff", what)
}

describe("security: the HTTP edge (dist/main.js)", () => {
  layer(EdgePlatformLive, { timeout: "200 seconds" })((it) => {
    it.effect("bodies that never end are answered 408 within seconds and their connections closed", () =>
      Effect.gen(function*() {
        const token = yield* login
        const host = "Host: 127.0.0.1\r\n"
        const auth = `Authorization: Bearer ${token}\r\n`
        const partial = uploadBody(`filename="held.txt"`, "x".repeat(1000)).slice(0, 400)
        const ticket = yield* call("POST", "/v1/files/upload-url", { token, body: { filename: "held.bin", content_type: "application/octet-stream", size: 1000 } })
        assert.strictEqual(ticket.status, 200, ticket.text)
        const storage = new URL(ticket.body.upload_url)
        // Ten unterminated uploads at once (the attack held 40, two descriptors each), a chunked one that never
        // sends its last chunk, a JSON body shorter than its length, and a storage PUT that stops moving.
        const answers = yield* Effect.all([
          ...Array.from({ length: 10 }, () =>
            sendAndHold(`POST /v1/files HTTP/1.1\r\n${host}${auth}Content-Type: ${MULTIPART}\r\nContent-Length: 1400\r\n\r\n`, partial)),
          sendAndHold(
            `POST /v1/files HTTP/1.1\r\n${host}${auth}Content-Type: ${MULTIPART}\r\nTransfer-Encoding: chunked\r\n\r\n`,
            `${partial.length.toString(16)}\r\n${partial}\r\n`
          ),
          sendAndHold(`POST /v1/agents HTTP/1.1\r\n${host}${auth}Content-Type: application/json\r\nContent-Length: 100\r\n\r\n`, `{"name":"held`),
          sendAndHold(
            `PUT ${storage.pathname}${storage.search} HTTP/1.1\r\n${host}Content-Type: application/octet-stream\r\nContent-Length: 1000\r\n\r\n`,
            "x".repeat(10)
          )
        ], { concurrency: "unbounded" })
        answers.forEach((answer, i) => assertTimedOut(answer, `request ${i}`))
        for (const answer of answers) assert.include(answer.head, "referrer-policy: strict-origin-when-cross-origin")
        // The platform is still there for everyone else, and kept nothing of what it was sent.
        assert.strictEqual((yield* call("GET", "/api/health")).status, 200)
        yield* noTemporaryFiles
        assert.strictEqual(yield* storedObjects, 0)
      }))

    it.effect("malformed multipart uploads are 400 naming the problem; nothing is created, no temporary file is left", () =>
      Effect.gen(function*() {
        const token = yield* login
        const good = uploadBody(`filename="bad-but-for-its-headers.txt"`)
        const cases: ReadonlyArray<readonly [string, string, string, RegExp]> = [
          ["no boundary", "multipart/form-data", good, /names no boundary/],
          ["a wrong boundary", "multipart/form-data; boundary=another-one", good, /no part starts with the boundary/],
          ["a 200 KB part header", MULTIPART, uploadBody(`filename="bad-header.txt"`, "hello", `X-Padding: ${"p".repeat(200_000)}\r\n`), /headers exceed 8192 bytes/],
          ["NUL in a file name", MULTIPART, uploadBody(`filename="bad\u0000name.txt"`), /file name: must not contain NUL/],
          ["a 600-byte file name", MULTIPART, uploadBody(`filename="bad-${"n".repeat(596)}"`), /file name: at most 255 bytes of UTF-8 \(this one has 600\)/],
          ["a 600-byte file name in UTF-8", MULTIPART, uploadBody(`filename*=UTF-8''bad-${"%C3%A9".repeat(298)}`), /at most 255 bytes/],
          // This one threw out of the parser and took the whole platform down.
          ["broken percent-encoding", MULTIPART, uploadBody(`filename*=UTF-8''bad%E0%A4%A`), /filename\* is not valid percent-encoded/],
          ["a file name that names a folder", MULTIPART, uploadBody(`filename="bad/.."`), /file name: must end in a file's name/],
          ["no closing boundary", MULTIPART, good.slice(0, good.lastIndexOf(`--${BOUNDARY}--`)), /ends before its closing boundary/],
          ["a part without a disposition", MULTIPART, `--${BOUNDARY}\r\nContent-Type: text/plain\r\n\r\nbad\r\n--${BOUNDARY}--\r\n`, /Content-Disposition: form-data/],
          ["too many parts", MULTIPART, `--${BOUNDARY}\r\nContent-Disposition: form-data; name="p"\r\n\r\nbad\r\n`.repeat(9) + `--${BOUNDARY}--\r\n`, /more than 8 parts/]
        ]
        const objects = yield* storedObjects
        for (const [what, contentType, body, named] of cases) {
          const reply = yield* call("POST", "/v1/files", { token, raw: body, headers: { "content-type": contentType, "idempotency-key": `bad-${what.replaceAll(" ", "-")}` } })
          assert.strictEqual(reply.status, 400, `${what}: ${reply.text}`)
          assert.strictEqual(reply.body?.error?.type, "invalid_request", what)
          assert.match(reply.body.error.message, named, what)
          assertEveryAnswerHeaders(reply.headers, what)
        }
        // Nothing was stored (the rows are counted when the platform stops, below) and nothing was left on disk.
        assert.strictEqual(yield* storedObjects, objects)
        yield* noTemporaryFiles
        assert.strictEqual((yield* call("GET", "/api/health")).status, 200)

        // The limits are the limits: a 255-byte name is taken, whole, and its temporary file is gone after.
        const longest = `ok-${"l".repeat(248)}.txt`
        const taken = yield* upload(token, longest)
        assert.strictEqual(taken.status, 200, taken.text)
        assert.strictEqual(taken.body.filename, longest)
        yield* noTemporaryFiles
      }))

    it.effect("every create of the contract answers a retry with its Idempotency-Key once, whatever its status", () =>
      Effect.gen(function*() {
        const token = yield* login
        const key = Crypto.randomUUID()
        const post = (path: string, body: unknown) => ({ path, options: { token, body } satisfies RequestOptions })
        // Prerequisites, made once without a key.
        const agent = yield* call("POST", "/v1/agents", { token, body: { name: "Replayed", category: "coding" } })
        const app = yield* call("POST", "/api/apps", { token, body: { name: "Replayed app", redirect_uris: ["https://app.example.com/callback"] } })
        const store = yield* call("POST", "/v1/vector_stores", { token, body: { name: "Prerequisite" } })
        const file = yield* upload(token, "for-the-store.txt")
        const session = yield* call("POST", "/v1/sessions", { token, body: { agent: agent.body.identifier } })
        const turn = yield* call("POST", `/v1/sessions/${session.body.id}/events`, { token, body: { type: "message", message: "one turn" } })
        const dataset = yield* call("POST", "/v1/evals/datasets", { token, body: { agent: agent.body.identifier, name: "Prerequisite" } })
        const row = yield* call("POST", `/v1/evals/datasets/${dataset.body.id}/rows`, { token, body: [{ input: "hello", expected: "You said: hello" }] })
        for (const reply of [agent, app, store, file, session, turn, dataset, row]) assert.include([200, 201], reply.status, reply.text)
        /** How to call each create of the contract; a create added to the contract without one here fails below. */
        const calls: Record<string, { readonly path: string; readonly options: RequestOptions }> = {
          "agents.create": post("/v1/agents", { name: "Replayed twice", category: "coding" }),
          "sessions.create": post("/v1/sessions", { agent: agent.body.identifier }),
          "files.register": { path: "/v1/files", options: { token, raw: uploadBody(`filename="replayed.txt"`), headers: { "content-type": MULTIPART } } },
          "environments.create": post("/v1/environments", { name: "replayed" }),
          "credentials.create": post("/v1/credentials", { server_url: "https://mcp.example.com/mcp", token: "replayed-secret-token" }),
          "distillations.start": post("/v1/distillations", { topic: "tea", materials: [{ filename: "tea.md", content: "# Tea\n\nGreen tea likes cooler water." }] }),
          "wallet.createOrder": post("/api/payment/orders", { amount: 5 }),
          "apps.createMeter": post(`/api/apps/${app.body.id}/meters`, { event_name: "replayed", credits_per_use: 1 }),
          "creators.apply": post("/api/creator/apply", { displayName: "Replayed", bio: "Twice.", accountType: "individual", email: "replayed@example.com" }),
          "knowledge.create": post("/v1/vector_stores", { name: "Replayed" }),
          "knowledge.addFile": post(`/v1/vector_stores/${store.body.id}/files`, { file_id: file.body.id }),
          "schedules.create": post("/v1/schedules", { agent: agent.body.identifier, cron: "0 9 * * 1", input: "Weekly." }),
          "sessions.fork": post(`/v1/sessions/${session.body.id}/fork`, { turn: 1 }),
          "evals.createDataset": post("/v1/evals/datasets", { agent: agent.body.identifier, name: "Replayed" }),
          "evals.addRows": post(`/v1/evals/datasets/${dataset.body.id}/rows`, [{ input: "replayed" }]),
          "evals.importRows": post(`/v1/evals/datasets/${dataset.body.id}/import`, { format: "promptfoo", content: "tests:\n  - vars: { input: replayed }\n" }),
          "evals.createRun": post("/v1/evals/runs", { dataset: dataset.body.id, agent: agent.body.identifier, graders: [{ type: "exact" }] })
        }
        const fromContract = creates()
        assert.sameMembers(Object.keys(calls), fromContract.map((create) => create.name))
        for (const { name } of fromContract) {
          const { path, options } = calls[name]!
          const send = (headers: Record<string, string>): Effect.Effect<Reply, never, EdgePlatform> =>
            call("POST", path, { ...options, headers: { ...options.headers, ...headers } })
          const first = yield* send({ "idempotency-key": `${name}-${key}` })
          assert.include([200, 201], first.status, `${name}: ${first.text}`)
          assert.isNull(first.headers.get("idempotent-replayed"), name)
          // A multipart retry is written with a boundary of its own: the same parts are the same request.
          const again = name === "files.register"
            ? yield* call("POST", path, {
              token,
              raw: (options.raw as string).replaceAll(BOUNDARY, "another-boundary"),
              headers: { "content-type": "multipart/form-data; boundary=another-boundary", "idempotency-key": `${name}-${key}` }
            })
            : yield* send({ "idempotency-key": `${name}-${key}` })
          assert.strictEqual(again.status, first.status, `${name}: ${again.text}`)
          assert.strictEqual(again.headers.get("idempotent-replayed"), "true", name)
          assert.deepStrictEqual(again.body, first.body, name)
          if (name === "files.register") made.add(first.body.id)
          // The same key with another request is refused, not made.
          const other = yield* call("POST", path, { token, body: { other: true }, headers: { "idempotency-key": `${name}-${key}` } })
          assert.strictEqual(other.status, 409, `${name}: ${other.text}`)
          assert.strictEqual(other.body.error.type, "idempotency_conflict", name)
        }
      }))

    it.effect("every answer carries Referrer-Policy and nosniff: JSON, errors, 404, 405, pages, assets, streams, downloads", () =>
      Effect.gen(function*() {
        const token = yield* login
        const { process } = yield* EdgePlatform
        const answers: Array<readonly [string, Reply]> = [
          ["JSON", yield* call("GET", "/api/health")],
          ["401", yield* call("POST", "/api/user/apiKey/list")],
          ["400", yield* call("POST", "/v1/agents", { token, body: { name: "" } })],
          ["404", yield* call("GET", "/v1/nothing-here")],
          ["405", yield* call("DELETE", "/v1/agents")],
          ["the web app", yield* call("GET", "/")],
          ["the document", yield* call("GET", "/openapi.json")]
        ]
        const page = answers[5]![1]
        assert.strictEqual(page.status, 200)
        const asset = /(\/assets\/[^"']+\.js)/.exec(page.text)?.[1]
        assert.isDefined(asset, "the web app's page names no script")
        answers.push(["an asset", yield* call("GET", asset!)])
        const file = yield* upload(token, "download.txt")
        const record = yield* call("GET", `/v1/files/${file.body.id}`, { token })
        const download = yield* Effect.promise(() => fetch(record.body.download_url))
        yield* Effect.promise(() => download.arrayBuffer())
        // A stream's headers, then the stream is left.
        const agent = yield* call("POST", "/v1/agents", { token, body: { name: "Streamed" } })
        const session = yield* call("POST", "/v1/sessions", { token, body: { agent: agent.body.identifier } })
        const stream = yield* Effect.promise(async () => {
          const controller = new AbortController()
          const response = await fetch(`${process.url}/v1/sessions/${session.body.id}/events`, {
            headers: { authorization: `Bearer ${token}` },
            signal: controller.signal
          })
          controller.abort()
          return response
        })
        assert.match(stream.headers.get("content-type") ?? "", /text\/event-stream/)
        for (const [what, reply] of answers) assertEveryAnswerHeaders(reply.headers, `${what} (${reply.status})`)
        assertEveryAnswerHeaders(download.headers, "a download")
        assertEveryAnswerHeaders(stream.headers, "an event stream")
      }))

    // Last: it stops the platform to read its database.
    it.effect("the database holds the files made and nothing of the refused uploads", () =>
      Effect.gen(function*() {
        const { dataDir, process } = yield* EdgePlatform
        assert.strictEqual(yield* process.terminate, 0)
        const rows = yield* Effect.acquireUseRelease(
          Effect.promise(() => PGlite.create(Path.join(dataDir, "pgdata"))),
          (db) => Effect.promise(() => db.query<{ id: string; filename: string }>("SELECT id, filename FROM files")),
          (db) => Effect.promise(() => db.close())
        )
        assert.sameMembers(rows.rows.map((row) => row.id), [...made])
        assert.deepStrictEqual(rows.rows.filter((row) => row.filename.includes("bad")), [])
      }))
  })
})
