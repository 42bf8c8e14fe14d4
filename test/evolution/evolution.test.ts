import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import {
  approved,
  assertError,
  createAgent,
  ENV,
  getAgent,
  LIVE,
  liveAgent,
  newUser,
  patchAgent,
  publish
} from "../agents/agents-support.js"
import { createApiKey, request } from "../support/Client.js"
import { TestServer } from "../support/TestServer.js"
import {
  acceptSuggestion,
  dismissSuggestion,
  eventTypes,
  findSuggestion,
  runOnce,
  runRow,
  statsOf,
  suggestionsOf,
  versionConfig
} from "./evolution-support.js"

/**
 * Self-evolution over HTTP (`/v1/agents/:identifier/evolution/*`, `/v1/evolution/suggestions/:id/*`): suggestions
 * derived from recorded runs, accepted at once without review (spec 4.10 rule 9), the owner's only.
 */

/** An owner's live agent whose calculator is denied, and one run by another user that was denied it. */
const deniedCalculator = Effect.gen(function*() {
  const owner = yield* newUser
  const identifier = yield* liveAgent(owner.token, { name: "Calc", tools: [{ name: "calculator", permission: "deny" }] })
  const user = yield* newUser
  const run = yield* runOnce(user.token, identifier, '/tool calculator {"expression":"3*3"}')
  assert.include(eventTypes(run), "tool_call.denied")
  return { owner, user, identifier }
})

const listOk = (token: string, identifier: string) =>
  Effect.gen(function*() {
    const reply = yield* suggestionsOf(token, identifier)
    assert.strictEqual(reply.status, 200, reply.text)
    return reply.body as { identifier: string; data: Array<any>; has_more: boolean }
  })

describe("evolution over HTTP", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.scoped("the owner lists, accepts and dismisses; others are refused; credentials are required", () =>
      Effect.gen(function*() {
        const { identifier, owner, user } = yield* deniedCalculator
        const list = yield* listOk(owner.token, identifier)
        assert.strictEqual(list.has_more, false)
        const allow = findSuggestion(list, "allow_denied_tool", "calculator")
        const remove = findSuggestion(list, "remove_denied_tool", "calculator")
        assert.deepStrictEqual(
          Object.keys(allow).sort(),
          ["accepted_at", "agent", "applied_version", "change", "created_at", "dismissed_at", "drafted_by", "evidence", "id",
            "kind", "rationale", "status", "subject", "title", "updated_at"]
        )
        assert.strictEqual(allow.agent, identifier)

        // An API key of the owner works the same.
        const key = yield* createApiKey(owner.token)
        assert.deepStrictEqual((yield* listOk(key.key, identifier)).data.map((s) => s.id).sort(), list.data.map((s) => s.id).sort())

        assertError(yield* request("GET", `/v1/agents/${identifier}/evolution/suggestions`), 401, "unauthorized")
        assertError(yield* suggestionsOf(user.token, identifier), 403, "forbidden")
        assertError(yield* statsOf(user.token, identifier), 403, "forbidden")
        assertError(yield* acceptSuggestion(user.token, allow.id), 404, "not_found")
        assertError(yield* dismissSuggestion(user.token, allow.id), 404, "not_found")
        assertError(yield* acceptSuggestion(owner.token, "sug_nope"), 404, "not_found")
        // An id of another kind is a suggestion that is not there: 404, not 400.
        assertError(yield* acceptSuggestion(owner.token, "run_nope"), 404, "not_found")
        assertError(yield* suggestionsOf(owner.token, "no-such-agent"), 404, "not_found")
        const draft = yield* createAgent(owner.token, { name: "Private" })
        assertError(yield* suggestionsOf(user.token, draft.identifier), 404, "not_found")

        // Dismissed: not made again from the same runs, and no longer acceptable.
        const dismissed = yield* dismissSuggestion(owner.token, remove.id)
        assert.strictEqual(dismissed.status, 200, dismissed.text)
        assert.strictEqual(dismissed.body.status, "dismissed")
        assert.isString(dismissed.body.dismissed_at)
        assertError(yield* acceptSuggestion(owner.token, remove.id), 400, "invalid_request")
        const after = yield* listOk(owner.token, identifier)
        assert.strictEqual(after.data.length, 2)
        assert.deepStrictEqual(after.data.map((s) => s.status), ["pending", "dismissed"], "open ones first")

        const accepted = yield* acceptSuggestion(owner.token, allow.id)
        assert.strictEqual(accepted.status, 200, accepted.text)
        assert.deepStrictEqual(accepted.body.agent, {
          identifier,
          published_version: 2,
          applied_version: 2,
          resubmitted_version: null
        })
        assertError(yield* dismissSuggestion(owner.token, allow.id), 400, "invalid_request")
        const ran = yield* runOnce(user.token, identifier, '/tool calculator {"expression":"3*3"}')
        assert.include(ran.output, "9")
        assert.include(eventTypes(ran), "tool_call.completed")
      }))

    it.scoped("rule 9: the opening message others see changes the moment a suggestion is accepted", () =>
      Effect.gen(function*() {
        const owner = yield* newUser
        const identifier = yield* liveAgent(owner.token, {
          name: "Paywalled",
          opening_message: "Welcome!",
          billing: { type: "UNLOCK", price: 4, free_trial_per_user: 1 }
        })
        const user = yield* newUser
        const first = yield* runOnce(user.token, identifier, "question one")
        assert.strictEqual(first.output, "You said: question one", "the one free trial")
        const second = yield* runOnce(user.token, identifier, "question two")
        assert.strictEqual(second.output, "")
        assert.include(eventTypes(second), "usage.trial_exhausted")

        const list = yield* listOk(owner.token, identifier)
        const unanswered = findSuggestion(list, "unanswered_questions", "trial_exhausted")
        assert.deepStrictEqual(unanswered.evidence, { trial_exhausted: 1, runs: 2 })
        assert.deepStrictEqual(unanswered.change, {
          type: "append_opening_message",
          text: "Note: the first question is free; unlock this expert for 4 credits to ask as many as you like."
        })

        const opening = () => request("GET", `/v1/agents/${identifier}/opening-message`, { token: user.token })
        assert.strictEqual((yield* opening()).body.message, "Welcome!")
        const accepted = yield* acceptSuggestion(owner.token, unanswered.id)
        assert.strictEqual(accepted.status, 200, accepted.text)
        assert.strictEqual((yield* opening()).body.message, `Welcome!\n\n${unanswered.change.text}`)
        const profile = yield* request("GET", `/v1/agents/${identifier}/profile`, { token: user.token })
        assert.strictEqual(profile.body.version, 2)
        assert.strictEqual(profile.body.opening_message, `Welcome!\n\n${unanswered.change.text}`)
        assert.deepStrictEqual(profile.body.billing, { type: "UNLOCK", price: 4, free_trial_per_user: 1, allow_trial: true })
      }))

    it.scoped("a submission waiting for review is resubmitted with the change, so approving it cannot undo it", () =>
      Effect.gen(function*() {
        const { identifier, owner, user } = yield* deniedCalculator
        const edited = yield* patchAgent(owner.token, identifier, { description: "second edition" })
        assert.strictEqual(edited.status, 200, edited.text)
        const waiting = yield* publish(owner.token, identifier)
        assert.strictEqual(waiting.version, 2)

        const allow = findSuggestion(yield* listOk(owner.token, identifier), "allow_denied_tool", "calculator")
        const accepted = yield* acceptSuggestion(owner.token, allow.id)
        assert.strictEqual(accepted.status, 200, accepted.text)
        assert.deepStrictEqual(accepted.body.agent, { identifier, published_version: 3, applied_version: 3, resubmitted_version: 4 })

        // Live now: the published version plus the change, without the unreviewed edit.
        const live = yield* versionConfig(identifier, 3)
        assert.deepStrictEqual(live.tools, [{ name: "calculator", permission: "allow" }])
        assert.strictEqual(live.description, "")
        const ran = yield* runOnce(user.token, identifier, '/tool calculator {"expression":"4+4"}')
        assert.include(ran.output, "8")
        assert.strictEqual((yield* runRow(ran.id)).agent_version, 3)

        // Review now looks at the draft with the change; the old submission is superseded.
        const status = (yield* request("GET", `/v1/agents/${identifier}`, { token: owner.token })).body
        assert.strictEqual(status.published_version, 3)
        assert.strictEqual(status.pending_submission.version, 4)
        const server = yield* TestServer
        const old = yield* server.query(`SELECT status FROM agent_submissions WHERE id = '${waiting.id}'`)
        assert.strictEqual(old[0]!.status, "superseded")
        yield* approved(status.pending_submission.id)
        const final = yield* versionConfig(identifier, 4)
        assert.strictEqual(final.description, "second edition")
        assert.deepStrictEqual(final.tools, [{ name: "calculator", permission: "allow" }])
        assert.strictEqual((yield* getAgent(owner.token, identifier)).body.published_version, 4)
      }))

    it.scoped("accepting twice at once applies once", () =>
      Effect.gen(function*() {
        const { identifier, owner } = yield* deniedCalculator
        const allow = findSuggestion(yield* listOk(owner.token, identifier), "allow_denied_tool", "calculator")
        const replies = yield* Effect.all(
          Array.from({ length: 4 }, () => acceptSuggestion(owner.token, allow.id)),
          { concurrency: "unbounded" }
        )
        for (const reply of replies) assert.strictEqual(reply.status, 200, reply.text)
        assert.strictEqual(replies.filter((r) => r.body.already_accepted === false).length, 1)
        const server = yield* TestServer
        const versions = yield* server.query(
          `SELECT count(*)::int AS n FROM agent_versions v JOIN agents a ON a.id = v.agent_id WHERE a.identifier = '${identifier}'`
        )
        assert.strictEqual(Number(versions[0]!.n), 2)
      }))

    it.scoped("suggestions whose change is no longer needed are dismissed; stats before anything is accepted", () =>
      Effect.gen(function*() {
        const owner = yield* newUser
        const agent = yield* createAgent(owner.token, { name: "Drafty", tools: [{ name: "get_time", permission: "deny" }] })
        const run = yield* runOnce(owner.token, agent.identifier, "/tool get_time {}")
        assert.include(eventTypes(run), "tool_call.denied")
        const list = yield* listOk(owner.token, agent.identifier)
        assert.strictEqual(list.data.filter((s) => s.status === "pending").length, 2)

        const stats = yield* statsOf(owner.token, agent.identifier)
        assert.strictEqual(stats.status, 200, stats.text)
        assert.deepStrictEqual(stats.body.suggestions, { made: 2, pending: 2, accepted: 0, dismissed: 0 })
        assert.isNull(stats.body.last_accepted_at)
        assert.isNull(stats.body.runs.before_last_accepted)
        assert.isNull(stats.body.runs.after_last_accepted)
        assert.isNull(stats.body.failure_rate_change)
        assert.deepStrictEqual(stats.body.runs.all, {
          runs: 1,
          completed: 1,
          failed: 0,
          cancelled: 0,
          failure_rate: 0,
          failures: {},
          runs_with_denied_tools: 1,
          denied_tool_calls: 1,
          denied_tools: { get_time: 1 },
          unanswered: 0
        })

        // The owner removes the tool by hand: both suggestions about it no longer change anything.
        const patched = yield* patchAgent(owner.token, agent.identifier, { tools: [] })
        assert.strictEqual(patched.status, 200, patched.text)
        const after = yield* listOk(owner.token, agent.identifier)
        assert.deepStrictEqual(after.data.map((s) => s.status), ["dismissed", "dismissed"])
      }))

    it.scoped("the OpenAPI document lists the evolution endpoints", () =>
      Effect.gen(function*() {
        const doc = (yield* request("GET", "/openapi.json")).body
        for (const path of [
          "/v1/agents/{identifier}/evolution/suggestions",
          "/v1/evolution/suggestions/{id}/accept",
          "/v1/evolution/suggestions/{id}/dismiss",
          "/v1/agents/{identifier}/evolution/stats"
        ]) assert.property(doc.paths, path)
      }))
  })
})
