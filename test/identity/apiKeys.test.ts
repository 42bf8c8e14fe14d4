import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import * as Crypto from "node:crypto"
import { createApiKey, loginWithSms, request } from "../support/Client.js"
import { makeSmsInbox, makeMigratedStorage, servicesMode, startServer, TestServer } from "../support/TestServer.js"

/**
 * API keys (spec 4.8, 5.3; issue 2 item 7) over real HTTP.
 *
 * The file's server also shows the test its own database (`RunningServer.query`, the server's SQL client: PGlite
 * lives inside the server's process and answers only its socket), so key storage can be checked in both modes.
 */

interface Database {
  readonly where: "services" | "embedded"
  /** Rows of `text`, column names exactly as the database names them. */
  readonly query: (text: string) => Effect.Effect<ReadonlyArray<Record<string, unknown>>>
}
class ServerDatabase extends Context.Tag("test/identity/ServerDatabase")<ServerDatabase, Database>() {}

const ServerWithDatabase = Layer.scopedContext(
  Effect.gen(function*() {
    const server = yield* startServer(yield* makeMigratedStorage, yield* makeSmsInbox)
    const database: Database = { where: servicesMode ? "services" : "embedded", query: server.query }
    return Context.make(TestServer, server).pipe(Context.add(ServerDatabase, database))
  })
)

const KEY = /^sk_[A-Za-z0-9]{32,}$/
const sha256 = (text: string) => Crypto.createHash("sha256").update(text).digest("hex")

const list = (token: string) =>
  Effect.gen(function*() {
    const reply = yield* request("POST", "/api/user/apiKey/list", { token })
    assert.strictEqual(reply.status, 200, reply.text)
    return reply
  })

const assertError = (reply: { status: number; body: any; text: string }, status: number, type: string) => {
  assert.strictEqual(reply.status, status, reply.text)
  assert.deepStrictEqual(Object.keys(reply.body), ["error"], reply.text)
  assert.strictEqual(reply.body.error.type, type, reply.text)
  assert.isString(reply.body.error.message)
}

describe("API keys", () => {
  it.layer(ServerWithDatabase)((it) => {
    it.effect("create returns id, name, key and created_at; the key is sk_ and 32+ base62 characters", () =>
      Effect.gen(function*() {
        const { token } = yield* loginWithSms()
        const reply = yield* request("POST", "/api/user/apiKey/create", { token, body: { name: "ci deploy" } })
        assert.strictEqual(reply.status, 200, reply.text)
        assert.deepStrictEqual(Object.keys(reply.body).sort(), ["created_at", "id", "key", "name"])
        assert.strictEqual(reply.body.name, "ci deploy")
        assert.match(reply.body.key, KEY)
        assert.isString(reply.body.id)
        assert.isTrue(reply.body.id.length > 0)
        assert.strictEqual(new Date(reply.body.created_at).toISOString(), reply.body.created_at)
      }))

    it.effect("every key is new: two keys of one user differ, and so do their ids", () =>
      Effect.gen(function*() {
        const { token } = yield* loginWithSms()
        const first = yield* createApiKey(token, "same name")
        const second = yield* createApiKey(token, "same name")
        assert.notStrictEqual(first.key, second.key)
        assert.notStrictEqual(first.id, second.id)
        assert.match(second.key, KEY)
      }))

    it.effect("without a name the key gets a default name", () =>
      Effect.gen(function*() {
        const { token } = yield* loginWithSms()
        const reply = yield* request("POST", "/api/user/apiKey/create", { token, body: {} })
        assert.strictEqual(reply.status, 200, reply.text)
        assert.isString(reply.body.name)
        assert.isTrue(reply.body.name.length > 0)
        assert.match(reply.body.key, KEY)
        const noBody = yield* request("POST", "/api/user/apiKey/create", { token })
        assert.strictEqual(noBody.status, 200, noBody.text)
        assert.strictEqual(noBody.body.name, reply.body.name)
        assert.match(noBody.body.key, KEY)
        const listed = yield* list(token)
        assert.deepStrictEqual(listed.body.data.map((row: { name: string }) => row.name), [reply.body.name, reply.body.name])
      }))

    it.effect("a name of 100 characters is accepted; 101 is 400 invalid_request naming the field", () =>
      Effect.gen(function*() {
        const { token } = yield* loginWithSms()
        const ok = yield* request("POST", "/api/user/apiKey/create", { token, body: { name: "n".repeat(100) } })
        assert.strictEqual(ok.status, 200, ok.text)
        assert.strictEqual(ok.body.name, "n".repeat(100))
        const tooLong = yield* request("POST", "/api/user/apiKey/create", { token, body: { name: "n".repeat(101) } })
        assertError(tooLong, 400, "invalid_request")
        assert.include(tooLong.body.error.message, "name")
        const listed = yield* list(token)
        assert.strictEqual(listed.body.data.length, 1, "the refused key must not exist")
      }))

    it.effect("list shows id, name, prefix, last4, created_at, last_used_at and never the key", () =>
      Effect.gen(function*() {
        const { token } = yield* loginWithSms()
        const older = yield* createApiKey(token, "older")
        const newer = yield* createApiKey(token, "newer")
        const reply = yield* list(token)
        assert.deepStrictEqual(Object.keys(reply.body), ["data"])
        assert.strictEqual(reply.body.data.length, 2)
        for (const created of [older, newer]) {
          assert.notInclude(reply.text, created.key)
          assert.notInclude(reply.text, created.key.slice(3), "not even the key without its prefix")
          const entry = reply.body.data.find((row: { id: string }) => row.id === created.id)
          assert.isDefined(entry, `key ${created.id} is listed`)
          assert.deepStrictEqual(Object.keys(entry).sort(), ["created_at", "id", "last4", "last_used_at", "name", "prefix"])
          assert.strictEqual(entry.name, created.name)
          assert.strictEqual(entry.created_at, created.created_at)
          assert.strictEqual(entry.last_used_at, null)
          assert.isTrue(entry.prefix.startsWith("sk_"), entry.prefix)
          assert.isTrue(created.key.startsWith(entry.prefix), `${entry.prefix} is the start of the key`)
          assert.isTrue(entry.prefix.length < 16, "the prefix identifies a key without giving it away")
          assert.strictEqual(entry.last4, created.key.slice(-4))
        }
      }))

    it.effect("last_used_at is set once the key is used on /v1/models", () =>
      Effect.gen(function*() {
        const { token } = yield* loginWithSms()
        const used = yield* createApiKey(token, "used")
        const unused = yield* createApiKey(token, "unused")
        const models = yield* request("GET", "/v1/models", { token: used.key })
        assert.strictEqual(models.status, 200, models.text)
        const reply = yield* list(token)
        const usedEntry = reply.body.data.find((row: { id: string }) => row.id === used.id)
        const unusedEntry = reply.body.data.find((row: { id: string }) => row.id === unused.id)
        assert.isString(usedEntry.last_used_at)
        assert.strictEqual(new Date(usedEntry.last_used_at).toISOString(), usedEntry.last_used_at)
        assert.isTrue(Date.parse(usedEntry.last_used_at) >= Date.parse(used.created_at))
        assert.strictEqual(unusedEntry.last_used_at, null)
      }))

    it.effect("a user sees only their own keys", () =>
      Effect.gen(function*() {
        const alice = yield* loginWithSms()
        const bob = yield* loginWithSms()
        const aliceKey = yield* createApiKey(alice.token, "alice")
        const bobKey = yield* createApiKey(bob.token, "bob")
        const aliceList = yield* list(alice.token)
        const bobList = yield* list(bob.token)
        assert.deepStrictEqual(aliceList.body.data.map((row: { id: string }) => row.id), [aliceKey.id])
        assert.deepStrictEqual(bobList.body.data.map((row: { id: string }) => row.id), [bobKey.id])
        assert.notInclude(bobList.text, aliceKey.id)
      }))

    it.effect("the database holds the key's SHA-256, never the key", () =>
      Effect.gen(function*() {
        const database = yield* ServerDatabase
        const { token } = yield* loginWithSms()
        const created = yield* createApiKey(token, "hashed")
        const rows = yield* database.query(
          `SELECT key_hash, prefix, last4 FROM api_keys WHERE id = '${created.id.replace(/'/g, "''")}'`
        )
        assert.strictEqual(rows.length, 1)
        assert.strictEqual(rows[0]!.key_hash, sha256(created.key))
        // No column of any table holds the key, or its random part.
        const tables = yield* database.query(
          `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`
        )
        assert.include(tables.map((row) => row.table_name), "api_keys")
        for (const { table_name } of tables) {
          const dump = yield* database.query(`SELECT row_to_json(t)::text AS row FROM "${String(table_name)}" t`)
          for (const { row } of dump) {
            assert.notInclude(String(row), created.key.slice(3), `table ${String(table_name)} holds the key`)
          }
        }
        // Checked in both modes: `${database.where}` names the database the rows were read from.
        assert.include(["services", "embedded"], database.where)
        assert.strictEqual(database.where, servicesMode ? "services" : "embedded")
      }))

    it.effect("delete revokes the key at once; deleting it again is 404", () =>
      Effect.gen(function*() {
        const { token } = yield* loginWithSms()
        const doomed = yield* createApiKey(token, "doomed")
        const kept = yield* createApiKey(token, "kept")
        const before = yield* request("GET", "/v1/models", { token: doomed.key })
        assert.strictEqual(before.status, 200, before.text)

        const deleted = yield* request("POST", "/api/user/apiKey/delete", { token, body: { id: doomed.id } })
        assert.strictEqual(deleted.status, 200, deleted.text)
        assert.deepStrictEqual(deleted.body, { deleted: true })

        assertError(yield* request("GET", "/v1/models", { token: doomed.key }), 401, "unauthorized")
        const listed = yield* list(token)
        assert.deepStrictEqual(listed.body.data.map((row: { id: string }) => row.id), [kept.id])
        const keptStillWorks = yield* request("GET", "/v1/models", { token: kept.key })
        assert.strictEqual(keptStillWorks.status, 200, keptStillWorks.text)

        assertError(yield* request("POST", "/api/user/apiKey/delete", { token, body: { id: doomed.id } }), 404, "not_found")
        assertError(yield* request("POST", "/api/user/apiKey/delete", { token, body: { id: "key_doesNotExist" } }), 404, "not_found")
        assertError(yield* request("POST", "/api/user/apiKey/delete", { token, body: {} }), 400, "invalid_request")
      }))

    it.effect("another user's key id is 404, and that key keeps working", () =>
      Effect.gen(function*() {
        const owner = yield* loginWithSms()
        const other = yield* loginWithSms()
        const key = yield* createApiKey(owner.token, "owned")
        const attempt = yield* request("POST", "/api/user/apiKey/delete", { token: other.token, body: { id: key.id } })
        assertError(attempt, 404, "not_found")
        const stillWorks = yield* request("GET", "/v1/models", { token: key.key })
        assert.strictEqual(stillWorks.status, 200, stillWorks.text)
        const listed = yield* list(owner.token)
        assert.deepStrictEqual(listed.body.data.map((row: { id: string }) => row.id), [key.id])
      }))

    it.effect("the key routes need a login token; an API key is not one", () =>
      Effect.gen(function*() {
        const { token } = yield* loginWithSms()
        const key = yield* createApiKey(token, "not a login")
        const routes = [
          ["/api/user/apiKey/create", { name: "x" }],
          ["/api/user/apiKey/list", undefined],
          ["/api/user/apiKey/delete", { id: key.id }]
        ] as const
        for (const [path, body] of routes) {
          assertError(yield* request("POST", path, { body }), 401, "unauthorized")
          assertError(yield* request("POST", path, { body, token: key.key }), 401, "unauthorized")
          assertError(yield* request("POST", path, { body, headers: { cookie: `token=${key.key}` } }), 401, "unauthorized")
          assertError(yield* request("POST", path, { body, token: "not-a-token" }), 401, "unauthorized")
        }
        // None of the refused calls did anything: one key, still live.
        const listed = yield* list(token)
        assert.deepStrictEqual(listed.body.data.map((row: { id: string }) => row.id), [key.id])
        const stillWorks = yield* request("GET", "/v1/models", { token: key.key })
        assert.strictEqual(stillWorks.status, 200, stillWorks.text)
      }))
  })
})
