import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { assertError, call, type Caller, LIVE, newAccount, serverWith, upload } from "../files/support.js"

/**
 * Environments (spec 4.4; issue 4 item 7) over real HTTP: CRUD, secrets that are never returned whole, owner-only
 * access partitioned per end user like files, files that must be the caller's own, and the refusal to delete one a
 * session uses.
 */

const SECRET = "sk-live-0123456789abcdefWXYZ"

const create = (caller: Caller, body: Record<string, unknown>) =>
  Effect.gen(function*() {
    const reply = yield* call(caller, "POST", "/v1/environments", body)
    assert.strictEqual(reply.status, 201, reply.text)
    return reply.body
  })

describe("environments", () => {
  layer(serverWith(), LIVE)((it) => {
    it.effect("create, read, list, update and delete", () =>
      Effect.gen(function*() {
        const alice = (yield* newAccount).asEndUser("alice")
        const file = yield* upload(alice, new TextEncoder().encode("col1,col2\n"), { filename: "data.csv", contentType: "text/csv" })
        const created = yield* create(alice, {
          name: "Data science",
          description: "pandas and a CSV",
          packages: ["pandas==2.2.2", "numpy"],
          env: { API_TOKEN: SECRET, REGION: "eu" },
          files: [file.id],
          setup_script: "pip install -r requirements.txt"
        })
        assert.deepStrictEqual(Object.keys(created).sort(), [
          "created_at", "description", "env", "files", "id", "name", "packages", "setup_script", "updated_at"
        ])
        assert.match(created.id, /^env_[A-Za-z0-9]+$/)
        assert.strictEqual(created.name, "Data science")
        assert.strictEqual(created.description, "pandas and a CSV")
        assert.deepStrictEqual(created.packages, ["pandas==2.2.2", "numpy"])
        assert.deepStrictEqual(created.env, { API_TOKEN: "****WXYZ", REGION: "****" })
        assert.deepStrictEqual(created.files, [file.id])
        assert.strictEqual(created.setup_script, "pip install -r requirements.txt")
        assert.strictEqual(new Date(created.created_at).toISOString(), created.created_at)
        assert.strictEqual(created.updated_at, created.created_at)

        const got = yield* call(alice, "GET", `/v1/environments/${created.id}`)
        assert.strictEqual(got.status, 200, got.text)
        assert.deepStrictEqual(got.body, created)

        const listed = yield* call(alice, "GET", "/v1/environments")
        assert.strictEqual(listed.status, 200, listed.text)
        assert.deepStrictEqual(listed.body, { data: [created], has_more: false })

        // PATCH changes what it names; `env` is merged (set, remove with null, keep the rest).
        const patched = yield* call(alice, "PATCH", `/v1/environments/${created.id}`, {
          name: "Data science v2",
          env: { REGION: null, DEBUG: "1" }
        })
        assert.strictEqual(patched.status, 200, patched.text)
        assert.strictEqual(patched.body.name, "Data science v2")
        assert.deepStrictEqual(patched.body.env, { API_TOKEN: "****WXYZ", DEBUG: "****" })
        assert.deepStrictEqual(patched.body.packages, created.packages)
        assert.deepStrictEqual(patched.body.files, created.files)
        assert.strictEqual(patched.body.description, created.description)
        assert.isAtLeast(new Date(patched.body.updated_at).getTime(), new Date(created.updated_at).getTime())
        const cleared = yield* call(alice, "PATCH", `/v1/environments/${created.id}`, { files: [], packages: [] })
        assert.deepStrictEqual([cleared.body.files, cleared.body.packages], [[], []])

        const deleted = yield* call(alice, "DELETE", `/v1/environments/${created.id}`)
        assert.strictEqual(deleted.status, 200, deleted.text)
        assert.deepStrictEqual(deleted.body, { id: created.id, deleted: true })
        assertError(yield* call(alice, "GET", `/v1/environments/${created.id}`), 404, "not_found")
        assertError(yield* call(alice, "DELETE", `/v1/environments/${created.id}`), 404, "not_found")
        assert.deepStrictEqual((yield* call(alice, "GET", "/v1/environments")).body.data, [])
      }))

    it.effect("a secret value is never returned whole, in any response", () =>
      Effect.gen(function*() {
        const alice = (yield* newAccount).asEndUser("alice")
        const created = yield* call(alice, "POST", "/v1/environments", { name: "secrets", env: { TOKEN: SECRET, PIN: "4321" } })
        const replies = [
          created,
          yield* call(alice, "GET", `/v1/environments/${created.body.id}`),
          yield* call(alice, "GET", "/v1/environments"),
          yield* call(alice, "PATCH", `/v1/environments/${created.body.id}`, { env: { OTHER: `${SECRET}-2` } })
        ]
        for (const reply of replies) {
          assert.strictEqual(Math.floor(reply.status / 100), 2, reply.text)
          assert.notInclude(reply.text, SECRET)
          assert.notInclude(reply.text, SECRET.slice(0, -4))
          assert.notInclude(reply.text, "4321")
        }
        assert.deepStrictEqual(replies[3]!.body.env, { TOKEN: "****WXYZ", PIN: "****", OTHER: "****YZ-2" })
      }))

    it.effect("owner only, partitioned per end user: everyone else gets 404", () =>
      Effect.gen(function*() {
        const account = yield* newAccount
        const alice = account.asEndUser("alice")
        const mine = yield* create(alice, { name: "alice's" })
        const others: Record<string, Caller> = {
          "another end user": account.asEndUser("bob"),
          "the account without an end user": account.asLogin,
          "another account": (yield* newAccount).asEndUser("alice")
        }
        for (const [who, caller] of Object.entries(others)) {
          assertError(yield* call(caller, "GET", `/v1/environments/${mine.id}`), 404, "not_found")
          assertError(yield* call(caller, "PATCH", `/v1/environments/${mine.id}`, { name: "taken" }), 404, "not_found")
          assertError(yield* call(caller, "DELETE", `/v1/environments/${mine.id}`), 404, "not_found")
          const list = yield* call(caller, "GET", "/v1/environments")
          assert.deepStrictEqual(list.body.data, [], who)
        }
        // Untouched by all of that.
        const still = yield* call(alice, "GET", `/v1/environments/${mine.id}`)
        assert.deepStrictEqual(still.body, mine)
        // Environments do not need an end user: a login token has its own.
        const own = yield* create(account.asLogin, { name: "the account's own" })
        assert.deepStrictEqual((yield* call(account.asLogin, "GET", "/v1/environments")).body.data.map((e: any) => e.id), [own.id])
      }))

    it.effect("files must be the caller's own; a file an environment lists cannot be deleted", () =>
      Effect.gen(function*() {
        const account = yield* newAccount
        const alice = account.asEndUser("alice")
        const bob = account.asEndUser("bob")
        const alicesFile = yield* upload(alice, new TextEncoder().encode("a"))
        const bobsFile = yield* upload(bob, new TextEncoder().encode("b"))

        const foreign = yield* call(alice, "POST", "/v1/environments", { name: "x", files: [bobsFile.id] })
        assertError(foreign, 400, "invalid_request")
        assert.include(foreign.body.error.message, "files")
        assert.include(foreign.body.error.message, bobsFile.id)
        assertError(yield* call(alice, "POST", "/v1/environments", { name: "x", files: ["file_missing"] }), 400, "invalid_request")

        const env = yield* create(alice, { name: "uses a file", files: [alicesFile.id, alicesFile.id] })
        assert.deepStrictEqual(env.files, [alicesFile.id])
        const patched = yield* call(alice, "PATCH", `/v1/environments/${env.id}`, { files: [alicesFile.id, bobsFile.id] })
        assertError(patched, 400, "invalid_request")
        assert.deepStrictEqual((yield* call(alice, "GET", `/v1/environments/${env.id}`)).body.files, [alicesFile.id])

        const refused = yield* call(alice, "DELETE", `/v1/files/${alicesFile.id}`)
        assertError(refused, 409, "file_in_use")
        assert.include(refused.body.error.message, env.id)
        assert.strictEqual((yield* call(alice, "GET", `/v1/files/${alicesFile.id}`)).status, 200)

        yield* call(alice, "PATCH", `/v1/environments/${env.id}`, { files: [] })
        const deleted = yield* call(alice, "DELETE", `/v1/files/${alicesFile.id}`)
        assert.strictEqual(deleted.status, 200, deleted.text)
      }))

    it.effect("an environment a session uses cannot be deleted (409)", () =>
      Effect.gen(function*() {
        const alice = (yield* newAccount).asEndUser("alice")
        const env = yield* create(alice, { name: "busy" })
        const idle = yield* create(alice, { name: "idle" })
        const agent = yield* call(alice, "POST", "/v1/agents", { name: "Env user" })
        assert.strictEqual(agent.status, 201, agent.text)
        const session = yield* call(alice, "POST", "/v1/sessions", { agent: agent.body.identifier, environment_id: env.id })
        assert.strictEqual(session.status, 201, session.text)

        const refused = yield* call(alice, "DELETE", `/v1/environments/${env.id}`)
        assertError(refused, 409, "environment_in_use")
        assert.strictEqual((yield* call(alice, "GET", `/v1/environments/${env.id}`)).status, 200)
        assert.strictEqual((yield* call(alice, "DELETE", `/v1/environments/${idle.id}`)).status, 200)

        assert.strictEqual((yield* call(alice, "DELETE", `/v1/sessions/${session.body.id}`)).status, 200)
        assert.strictEqual((yield* call(alice, "DELETE", `/v1/environments/${env.id}`)).status, 200)
      }))

    it.effect("bad requests are 400 invalid_request naming the field", () =>
      Effect.gen(function*() {
        const alice = (yield* newAccount).asEndUser("alice")
        const cases: Array<[string, unknown]> = [
          ["name", {}],
          ["name", { name: "" }],
          ["name", { name: "x".repeat(101) }],
          ["packages", { name: "x", packages: ["two words"] }],
          ["packages", { name: "x", packages: "numpy" }],
          ["env", { name: "x", env: { "1BAD": "v" } }],
          ["env", { name: "x", env: { "A-B": "v" } }],
          ["env", { name: "x", env: { A: 1 } }],
          ["env", { name: "x", env: Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`V${i}`, "v"])) }],
          ["files", { name: "x", files: "file_x" }],
          ["setup_script", { name: "x", setup_script: 42 }],
          ["description", { name: "x", description: "d".repeat(2001) }]
        ]
        for (const [field, body] of cases) {
          const reply = yield* call(alice, "POST", "/v1/environments", body)
          assertError(reply, 400, "invalid_request")
          assert.include(reply.body.error.message, field, JSON.stringify(body).slice(0, 100))
        }
        const env = yield* create(alice, { name: "valid" })
        const patch = yield* call(alice, "PATCH", `/v1/environments/${env.id}`, { env: { "no spaces allowed": "v" } })
        assertError(patch, 400, "invalid_request")
        assert.include(patch.body.error.message, "env")
      }))
  })
})
