import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { createApiKey, request } from "../support/Client.js"
import { TestServer } from "../support/TestServer.js"
import {
  approved,
  assertError,
  createAgent,
  ENV,
  getAgent,
  liveAgent,
  LIVE,
  newUser,
  patchAgent,
  publish
} from "./agents-support.js"

/**
 * Agents (spec 4.3; issue 4 item 1): drafts, identifiers, who sees what, validation and billing fields, over HTTP.
 * Review and versions are in review.test.ts, unlocks in purchases.test.ts.
 */

const SLUG = /^[a-z0-9](?:[a-z0-9-]{1,62}[a-z0-9])$/

describe("agents", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("POST creates a draft whose identifier is a slug of the name; defaults are filled in", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const reply = yield* request("POST", "/v1/agents", {
          token: user.token,
          body: { name: "Travel Planner!", description: "Plans trips", category: "lifestyle" }
        })
        assert.strictEqual(reply.status, 201, reply.text)
        const agent = reply.body
        assert.match(agent.identifier, /^travel-planner-[a-z0-9]{6}$/)
        assert.match(agent.identifier, SLUG)
        assert.strictEqual(agent.status, "draft")
        assert.strictEqual(agent.name, "Travel Planner!")
        assert.strictEqual(agent.description, "Plans trips")
        assert.strictEqual(agent.category, "lifestyle")
        assert.strictEqual(agent.model, "builtin")
        assert.strictEqual(agent.instructions, "")
        assert.deepStrictEqual(agent.tools, [])
        assert.deepStrictEqual(agent.subagents, [])
        assert.strictEqual(agent.opening_message, "")
        assert.deepStrictEqual(agent.case_demos, [])
        assert.deepStrictEqual(agent.billing, { type: "FREE", price: 0, free_trial_per_user: 3, allow_trial: true })
        assert.strictEqual(agent.published_version, null)
        assert.strictEqual(agent.pending_submission, null)
        // The same name twice gives two agents, each with an identifier of its own.
        const again = yield* createAgent(user.token, { name: "Travel Planner!" })
        assert.notStrictEqual(again.identifier, agent.identifier)
        assert.match(again.identifier, /^travel-planner-[a-z0-9]{6}$/)
        // A name with nothing slug-worthy still gets a valid identifier.
        const odd = yield* createAgent(user.token, { name: "¿¡!" })
        assert.match(odd.identifier, SLUG)
      }))

    it.effect("an explicit identifier is used as is; a taken one is 409 identifier_taken, for anyone", () =>
      Effect.gen(function*() {
        const alice = yield* newUser
        const bob = yield* newUser
        const identifier = `tax-helper-${Date.now().toString(36)}`
        const agent = yield* createAgent(alice.token, { name: "Tax helper", identifier })
        assert.strictEqual(agent.identifier, identifier)
        assertError(yield* request("POST", "/v1/agents", { token: bob.token, body: { name: "Mine", identifier } }), 409, "identifier_taken")
        assertError(yield* request("POST", "/v1/agents", { token: alice.token, body: { name: "Again", identifier } }), 409, "identifier_taken")
        // Bob's attempt changed nothing of Alice's agent.
        const detail = yield* getAgent(alice.token, identifier)
        assert.strictEqual(detail.body.name, "Tax helper")
        for (const bad of ["Has Caps", "-dash-first", "ab", "a_b_c", "x".repeat(65)]) {
          const reply = yield* request("POST", "/v1/agents", { token: alice.token, body: { name: "Bad", identifier: bad } })
          assertError(reply, 400, "invalid_request")
          assert.include(reply.body.error.message, "identifier")
        }
      }))

    it.effect("all configuration fields are accepted by POST and by PATCH", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const helper = yield* createAgent(user.token, { name: "Helper" })
        const config = {
          name: "Full",
          description: "Everything set",
          category: "coding",
          instructions: "You are a careful reviewer.",
          model: "builtin",
          tools: [{ name: "get_time", permission: "allow" }, { name: "write_file", permission: "ask" }],
          subagents: [helper.identifier],
          opening_message: "Hello! Paste your code.",
          case_demos: [{ title: "Demo", input: "x = 1", output: "Looks fine." }],
          billing: { type: "UNLOCK", price: 12.5, free_trial_per_user: 5, allow_trial: false }
        }
        const created = yield* createAgent(user.token, config)
        const expected = { ...config, billing: { type: "UNLOCK", price: 12.5, free_trial_per_user: 5, allow_trial: false } }
        for (const [key, value] of Object.entries(expected)) assert.deepStrictEqual(created[key], value, key)

        const blank = yield* createAgent(user.token, { name: "Blank" })
        const patched = yield* patchAgent(user.token, blank.identifier, config)
        assert.strictEqual(patched.status, 200, patched.text)
        for (const [key, value] of Object.entries(expected)) assert.deepStrictEqual(patched.body[key], value, key)
        // A PATCH touches only what it names.
        const renamed = yield* patchAgent(user.token, blank.identifier, { name: "Renamed" })
        assert.strictEqual(renamed.body.name, "Renamed")
        assert.strictEqual(renamed.body.instructions, config.instructions)
        assert.deepStrictEqual(renamed.body.tools, config.tools)
        assert.deepStrictEqual((yield* getAgent(user.token, blank.identifier)).body.name, "Renamed")
      }))

    it.effect("GET /v1/agents lists the caller's agents only", () =>
      Effect.gen(function*() {
        const alice = yield* newUser
        const bob = yield* newUser
        const a1 = yield* createAgent(alice.token, { name: "Alice one" })
        const a2 = yield* createAgent(alice.token, { name: "Alice two" })
        // Even Bob's published agent is not in Alice's list.
        const b1 = yield* liveAgent(bob.token, { name: "Bob one" })
        const list = yield* request("GET", "/v1/agents", { token: alice.token })
        assert.strictEqual(list.status, 200, list.text)
        assert.strictEqual(list.body.has_more, false)
        assert.deepStrictEqual(list.body.data.map((a: any) => a.identifier).sort(), [a1.identifier, a2.identifier].sort())
        const bobs = yield* request("GET", "/v1/agents", { token: bob.token })
        assert.deepStrictEqual(bobs.body.data.map((a: any) => a.identifier), [b1])
        assert.strictEqual(bobs.body.data[0].status, "published")
        const fresh = yield* newUser
        assert.deepStrictEqual((yield* request("GET", "/v1/agents", { token: fresh.token })).body.data, [])
      }))

    it.effect("an API key acts for its owner; no credentials is 401", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const key = yield* createApiKey(user.token)
        const created = yield* request("POST", "/v1/agents", { token: key.key, body: { name: "Via key" } })
        assert.strictEqual(created.status, 201, created.text)
        const detail = yield* getAgent(user.token, created.body.identifier)
        assert.strictEqual(detail.status, 200, detail.text)
        assert.strictEqual(detail.body.instructions, "")
        assertError(yield* request("GET", "/v1/agents"), 401, "unauthorized")
        assertError(yield* request("POST", "/v1/agents", { body: { name: "x" } }), 401, "unauthorized")
      }))

    it.effect("detail shows pending_submission: null, then {id, version, status, submitted_at} after publish", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* createAgent(user.token, { name: "Pending" })
        assert.strictEqual((yield* getAgent(user.token, agent.identifier)).body.pending_submission, null)
        const submission = yield* publish(user.token, agent.identifier)
        const detail = yield* getAgent(user.token, agent.identifier)
        assert.strictEqual(detail.status, 200, detail.text)
        const pending = detail.body.pending_submission
        assert.deepStrictEqual(Object.keys(pending).sort(), ["id", "status", "submitted_at", "version"])
        assert.strictEqual(pending.id, submission.id)
        assert.strictEqual(pending.version, 1)
        assert.strictEqual(pending.status, "pending")
        assert.strictEqual(new Date(pending.submitted_at).toISOString(), pending.submitted_at)
        assert.strictEqual(detail.body.status, "draft")
        assert.strictEqual(detail.body.published_version, null)
      }))

    it.effect("others get 404 for an unpublished agent (GET, PATCH, publish), exactly as for a missing one", () =>
      Effect.gen(function*() {
        const owner = yield* newUser
        const other = yield* newUser
        const agent = yield* createAgent(owner.token, { name: "Secret draft", instructions: "secret sauce" })
        const missing = `no-such-agent-${Date.now().toString(36)}`
        for (const identifier of [agent.identifier, missing]) {
          const get = yield* getAgent(other.token, identifier)
          assertError(get, 404, "not_found")
          assert.notInclude(get.text, "secret sauce")
          assertError(yield* patchAgent(other.token, identifier, { name: "Hijacked" }), 404, "not_found")
          assertError(yield* request("POST", `/v1/agents/${identifier}/publish`, { token: other.token }), 404, "not_found")
          assertError(yield* request("GET", `/v1/agents/${identifier}/profile`, { token: other.token }), 404, "not_found")
          assertError(yield* request("GET", `/v1/agents/${identifier}/opening-message`, { token: other.token }), 404, "not_found")
        }
        // A pending version does not make it visible either.
        yield* publish(owner.token, agent.identifier)
        assertError(yield* getAgent(other.token, agent.identifier), 404, "not_found")
        assertError(yield* patchAgent(other.token, agent.identifier, { name: "Hijacked" }), 404, "not_found")
        const mine = yield* getAgent(owner.token, agent.identifier)
        assert.strictEqual(mine.body.name, "Secret draft")
      }))

    it.effect("a published agent: others read the published version (no prompt layers) and may not change it (403)", () =>
      Effect.gen(function*() {
        const owner = yield* newUser
        const other = yield* newUser
        const identifier = yield* liveAgent(owner.token, {
          name: "Public one",
          instructions: "secret sauce",
          opening_message: "Hi there",
          tools: [{ name: "calculator", permission: "allow" }]
        })
        const seen = yield* getAgent(other.token, identifier)
        assert.strictEqual(seen.status, 200, seen.text)
        assert.strictEqual(seen.body.name, "Public one")
        assert.strictEqual(seen.body.status, "published")
        assert.strictEqual(seen.body.published_version, 1)
        assert.strictEqual(seen.body.pending_submission, null)
        assert.deepStrictEqual(seen.body.tools, ["calculator"])
        assert.notProperty(seen.body, "instructions")
        assert.notInclude(seen.text, "secret sauce")
        assertError(yield* patchAgent(other.token, identifier, { name: "Hijacked" }), 403, "forbidden")
        assertError(yield* request("POST", `/v1/agents/${identifier}/publish`, { token: other.token }), 403, "forbidden")
        assert.strictEqual((yield* getAgent(owner.token, identifier)).body.name, "Public one")
      }))

    it.effect("validation: unknown model, category or tool, a repeated tool, bad demos are 400 naming the field", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* createAgent(user.token, { name: "Valid" })
        const cases: ReadonlyArray<readonly [Record<string, unknown>, string]> = [
          [{ model: "gpt-imaginary" }, "model"],
          [{ category: "astrology" }, "category"],
          [{ tools: [{ name: "launch_missiles", permission: "allow" }] }, "tools"],
          [{ tools: [{ name: "get_time", permission: "sometimes" }] }, "tools"],
          [{ tools: [{ name: "get_time", permission: "allow" }, { name: "get_time", permission: "deny" }] }, "tools"],
          [{ case_demos: [{ title: "no input" }] }, "case_demos"],
          [{ name: "" }, "name"]
        ]
        for (const [body, field] of cases) {
          const created = yield* request("POST", "/v1/agents", { token: user.token, body: { name: "X", ...body } })
          assertError(created, 400, "invalid_request")
          assert.include(created.body.error.message, field, JSON.stringify(body))
          const patched = yield* patchAgent(user.token, agent.identifier, body)
          assertError(patched, 400, "invalid_request")
          assert.include(patched.body.error.message, field, JSON.stringify(body))
        }
        // Nothing of the refused PATCHes stuck.
        const detail = yield* getAgent(user.token, agent.identifier)
        assert.strictEqual(detail.body.model, "builtin")
        assert.strictEqual(detail.body.category, "other")
        assert.deepStrictEqual(detail.body.tools, [])
        assert.strictEqual(detail.body.name, "Valid")
      }))

    it.effect("subagents: own agents and published ones only; a missing one, someone else's draft or itself is 400", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const other = yield* newUser
        const mine = yield* createAgent(user.token, { name: "My helper" })
        const theirDraft = yield* createAgent(other.token, { name: "Their draft" })
        const theirLive = yield* liveAgent(other.token, { name: "Their live" })
        const agent = yield* createAgent(user.token, { name: "Lead", subagents: [mine.identifier, theirLive] })
        assert.deepStrictEqual(agent.subagents, [mine.identifier, theirLive])
        const missing = yield* patchAgent(user.token, agent.identifier, { subagents: ["does-not-exist"] })
        assertError(missing, 400, "invalid_request")
        assert.include(missing.body.error.message, "subagents")
        // Someone else's draft is indistinguishable from a missing agent.
        const hidden = yield* patchAgent(user.token, agent.identifier, { subagents: [theirDraft.identifier] })
        assertError(hidden, 400, "invalid_request")
        assert.strictEqual(
          hidden.body.error.message,
          missing.body.error.message.replace("does-not-exist", theirDraft.identifier)
        )
        assertError(yield* patchAgent(user.token, agent.identifier, { subagents: [agent.identifier] }), 400, "invalid_request")
        assertError(
          yield* request("POST", "/v1/agents", { token: user.token, body: { name: "Lead 2", subagents: ["nope-nope"] } }),
          400,
          "invalid_request"
        )
        assert.deepStrictEqual((yield* getAgent(user.token, agent.identifier)).body.subagents, [mine.identifier, theirLive])
      }))

    it.effect("billing: FREE forces price 0; UNLOCK needs a positive price; trial defaults 3 and true, kept on change", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const free = yield* createAgent(user.token, { name: "Free", billing: { type: "FREE", price: 25 } })
        assert.deepStrictEqual(free.billing, { type: "FREE", price: 0, free_trial_per_user: 3, allow_trial: true })

        const unlock = yield* createAgent(user.token, { name: "Paid", billing: { type: "UNLOCK", price: "9.99" } })
        assert.deepStrictEqual(unlock.billing, { type: "UNLOCK", price: 9.99, free_trial_per_user: 3, allow_trial: true })

        for (const billing of [
          { type: "UNLOCK" },
          { type: "UNLOCK", price: 0 },
          { type: "UNLOCK", price: "0.000000" },
          { type: "UNLOCK", price: -1 },
          { type: "UNLOCK", price: "1.0000001" },
          { type: "UNLOCK", price: "ten" },
          { type: "PAY_PER_USE", price: 1 },
          { type: "UNLOCK", price: 1, free_trial_per_user: -1 }
        ]) {
          const reply = yield* request("POST", "/v1/agents", { token: user.token, body: { name: "Bad", billing } })
          assertError(reply, 400, "invalid_request")
          assert.include(reply.body.error.message, "billing", JSON.stringify(billing))
        }

        // Trial settings survive a change of type and price; switching to FREE zeroes the price.
        const trial = yield* patchAgent(user.token, unlock.identifier, {
          billing: { type: "UNLOCK", price: 5, free_trial_per_user: 0, allow_trial: false }
        })
        assert.deepStrictEqual(trial.body.billing, { type: "UNLOCK", price: 5, free_trial_per_user: 0, allow_trial: false })
        const toFree = yield* patchAgent(user.token, unlock.identifier, { billing: { type: "FREE" } })
        assert.deepStrictEqual(toFree.body.billing, { type: "FREE", price: 0, free_trial_per_user: 0, allow_trial: false })
        // Back to UNLOCK without a price: the price is 0 now, so it is refused and nothing changes.
        assertError(yield* patchAgent(user.token, unlock.identifier, { billing: { type: "UNLOCK" } }), 400, "invalid_request")
        assert.strictEqual((yield* getAgent(user.token, unlock.identifier)).body.billing.type, "FREE")
      }))

    it.effect("profile and opening-message: the published version for everyone, the draft's message for the owner", () =>
      Effect.gen(function*() {
        const owner = yield* newUser
        const other = yield* newUser
        const agent = yield* createAgent(owner.token, {
          name: "Greeter",
          description: "Says hello",
          category: "education",
          instructions: "secret sauce",
          opening_message: "Welcome, v1!",
          case_demos: [{ input: "hi", output: "hello" }],
          billing: { type: "UNLOCK", price: 3 }
        })
        // Not published: the owner reads the draft's message, the profile does not exist yet.
        const own = yield* request("GET", `/v1/agents/${agent.identifier}/opening-message`, { token: owner.token })
        assert.deepStrictEqual(own.body, { message: "Welcome, v1!" })
        assertError(yield* request("GET", `/v1/agents/${agent.identifier}/profile`, { token: owner.token }), 404, "not_found")

        const submission = yield* publish(owner.token, agent.identifier)
        yield* approved(submission.id)
        yield* patchAgent(owner.token, agent.identifier, { opening_message: "Welcome, draft!", name: "Greeter 2" })

        const profile = yield* request("GET", `/v1/agents/${agent.identifier}/profile`, { token: other.token })
        assert.strictEqual(profile.status, 200, profile.text)
        assert.strictEqual(profile.body.identifier, agent.identifier)
        assert.strictEqual(profile.body.name, "Greeter")
        assert.strictEqual(profile.body.description, "Says hello")
        assert.strictEqual(profile.body.category, "education")
        assert.strictEqual(profile.body.opening_message, "Welcome, v1!")
        assert.deepStrictEqual(profile.body.case_demos, [{ input: "hi", output: "hello" }])
        assert.deepStrictEqual(profile.body.billing, { type: "UNLOCK", price: 3, free_trial_per_user: 3, allow_trial: true })
        assert.strictEqual(profile.body.version, 1)
        assert.isString(profile.body.published_at)
        assert.notInclude(profile.text, "secret sauce")

        const theirs = yield* request("GET", `/v1/agents/${agent.identifier}/opening-message`, { token: other.token })
        assert.deepStrictEqual(theirs.body, { message: "Welcome, v1!" })
        const mine = yield* request("GET", `/v1/agents/${agent.identifier}/opening-message`, { token: owner.token })
        assert.deepStrictEqual(mine.body, { message: "Welcome, draft!" })
      }))

    it.effect("GET /v1/agents/:identifier/skills: skills whose tools the agent has, none denied", () =>
      Effect.gen(function*() {
        const owner = yield* newUser
        const other = yield* newUser
        const skillsOf = (token: string, identifier: string) =>
          Effect.gen(function*() {
            const reply = yield* request("GET", `/v1/agents/${identifier}/skills`, { token })
            assert.strictEqual(reply.status, 200, reply.text)
            assert.strictEqual(reply.body.has_more, false)
            return reply.body.data.map((skill: { name: string }) => skill.name) as Array<string>
          })
        const agent = yield* createAgent(owner.token, {
          name: "Skilled",
          tools: [
            { name: "get_time", permission: "allow" },
            { name: "calculator", permission: "deny" },
            { name: "read_file", permission: "allow" },
            { name: "memory_save", permission: "ask" },
            { name: "memory_search", permission: "allow" }
          ]
        })
        // calculator is denied; files needs write_file and list_files too.
        assert.deepStrictEqual(yield* skillsOf(owner.token, agent.identifier), ["memory", "time"])
        const full = yield* request("GET", `/v1/agents/${agent.identifier}/skills`, { token: owner.token })
        assert.deepStrictEqual(full.body.data.find((s: any) => s.name === "time"), {
          name: "time",
          title: "Current time",
          description: "Tells the current date and time in any time zone.",
          tools: ["get_time"]
        })
        assertError(yield* request("GET", `/v1/agents/${agent.identifier}/skills`, { token: other.token }), 404, "not_found")

        const submission = yield* publish(owner.token, agent.identifier)
        yield* approved(submission.id)
        yield* patchAgent(owner.token, agent.identifier, {
          tools: [
            { name: "write_file", permission: "allow" },
            { name: "read_file", permission: "allow" },
            { name: "list_files", permission: "ask" },
            { name: "calculator", permission: "allow" }
          ]
        })
        // The owner sees the draft's skills, everyone else the published version's.
        assert.deepStrictEqual(yield* skillsOf(owner.token, agent.identifier), ["files", "math"])
        assert.deepStrictEqual(yield* skillsOf(other.token, agent.identifier), ["memory", "time"])
        const none = yield* createAgent(owner.token, { name: "Toolless" })
        assert.deepStrictEqual(yield* skillsOf(owner.token, none.identifier), [])
        assertError(yield* request("GET", `/v1/agents/${agent.identifier}/skills`), 401, "unauthorized")
      }))
  })
})
