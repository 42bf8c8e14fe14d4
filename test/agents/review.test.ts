import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { request } from "../support/Client.js"
import { internalAuth, TestServer } from "../support/TestServer.js"
import {
  approve,
  approved,
  assertError,
  browse,
  createAgent,
  ENV,
  getAgent,
  LIVE,
  marketIdentifiers,
  newUser,
  notificationsOf,
  patchAgent,
  publish,
  reject,
  uniqueWord
} from "./agents-support.js"

/**
 * Versions and review (spec 3.3, 4.10 rule 5; issue 4 item 2). A submission is pending, then approved, rejected or
 * superseded (a newer publish replaced it before a decision). Only an approved version is ever what others see.
 */

const marketItem = (word: string) =>
  Effect.gen(function*() {
    const reply = yield* browse({ keyword: word })
    assert.strictEqual(reply.status, 200, reply.text)
    return reply.body.data as Array<{ identifier: string; name: string; description: string; billing: any }>
  })

describe("review", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("publish submits a version for review; it is not live until approved", () =>
      Effect.gen(function*() {
        const owner = yield* newUser
        const other = yield* newUser
        const word = uniqueWord()
        const agent = yield* createAgent(owner.token, { name: `Reviewed ${word}` })
        const reply = yield* request("POST", `/v1/agents/${agent.identifier}/publish`, { token: owner.token })
        assert.strictEqual(reply.status, 200, reply.text)
        assert.deepStrictEqual(Object.keys(reply.body), ["submission"])
        assert.deepStrictEqual(Object.keys(reply.body.submission).sort(), ["id", "status", "version"])
        assert.strictEqual(reply.body.submission.status, "pending")
        assert.strictEqual(reply.body.submission.version, 1)
        assert.match(reply.body.submission.id, /^sub_/)

        // Pending: nobody else sees it, it is not in the market, the owner's detail says so.
        assertError(yield* getAgent(other.token, agent.identifier), 404, "not_found")
        assertError(yield* request("GET", `/api/market/agents/${agent.identifier}`), 404, "not_found")
        assert.deepStrictEqual(yield* marketIdentifiers(word), [])
        const pending = yield* getAgent(owner.token, agent.identifier)
        assert.strictEqual(pending.body.status, "draft")
        assert.strictEqual(pending.body.published_version, null)
        assert.strictEqual(pending.body.pending_submission.id, reply.body.submission.id)

        const decision = yield* approve(reply.body.submission.id)
        assert.strictEqual(decision.status, 200, decision.text)
        assert.deepStrictEqual(decision.body, { id: reply.body.submission.id, version: 1, status: "approved" })

        // Approved: live for everyone, listed in the market, nothing pending.
        const seen = yield* getAgent(other.token, agent.identifier)
        assert.strictEqual(seen.status, 200, seen.text)
        assert.strictEqual(seen.body.name, `Reviewed ${word}`)
        assert.deepStrictEqual(yield* marketIdentifiers(word), [agent.identifier])
        const live = yield* getAgent(owner.token, agent.identifier)
        assert.strictEqual(live.body.status, "published")
        assert.strictEqual(live.body.published_version, 1)
        assert.strictEqual(live.body.pending_submission, null)

        // The owner was told, in-app.
        const inbox = yield* notificationsOf(owner.token)
        const note = inbox.data.find((n) => n.kind === "agent_approved")
        assert.isDefined(note)
        assert.strictEqual(note!.data.agent, agent.identifier)
        assert.strictEqual(note!.data.version, 1)
        assert.strictEqual(note!.read, false)
        assert.deepStrictEqual((yield* notificationsOf(other.token)).data, [])
      }))

    it.effect("the old version stays online while a new one is pending", () =>
      Effect.gen(function*() {
        const owner = yield* newUser
        const other = yield* newUser
        const v1Word = uniqueWord()
        const v2Word = uniqueWord()
        const agent = yield* createAgent(owner.token, {
          name: `Alpha ${v1Word}`,
          description: "first version",
          opening_message: "v1 says hi",
          billing: { type: "UNLOCK", price: 2 }
        })
        yield* approved((yield* publish(owner.token, agent.identifier)).id)

        yield* patchAgent(owner.token, agent.identifier, {
          name: `Alpha ${v2Word}`,
          description: "second version",
          opening_message: "v2 says hi",
          billing: { type: "UNLOCK", price: 7 }
        })
        const v2 = yield* publish(owner.token, agent.identifier)
        assert.strictEqual(v2.version, 2)

        // Others still see v1 everywhere: detail, profile, opening message, market list and page.
        const seen = yield* getAgent(other.token, agent.identifier)
        assert.strictEqual(seen.body.name, `Alpha ${v1Word}`)
        assert.strictEqual(seen.body.description, "first version")
        assert.strictEqual(seen.body.published_version, 1)
        assert.strictEqual(seen.body.pending_submission, null)
        assert.strictEqual(seen.body.billing.price, 2)
        const profile = yield* request("GET", `/v1/agents/${agent.identifier}/profile`, { token: other.token })
        assert.strictEqual(profile.body.name, `Alpha ${v1Word}`)
        assert.strictEqual(profile.body.version, 1)
        const opening = yield* request("GET", `/v1/agents/${agent.identifier}/opening-message`, { token: other.token })
        assert.deepStrictEqual(opening.body, { message: "v1 says hi" })
        const listed = yield* marketItem(v1Word)
        assert.deepStrictEqual(listed.map((item) => [item.identifier, item.name, item.billing.price]), [
          [agent.identifier, `Alpha ${v1Word}`, 2]
        ])
        assert.deepStrictEqual(yield* marketIdentifiers(v2Word), [], "the pending version's name does not leak")
        const page = yield* request("GET", `/api/market/agents/${agent.identifier}`)
        assert.strictEqual(page.body.version, 1)
        assert.strictEqual(page.body.description, "first version")

        // The owner sees the draft and the waiting submission.
        const mine = yield* getAgent(owner.token, agent.identifier)
        assert.strictEqual(mine.body.name, `Alpha ${v2Word}`)
        assert.strictEqual(mine.body.published_version, 1)
        assert.strictEqual(mine.body.pending_submission.version, 2)
        assert.strictEqual(mine.body.pending_submission.id, v2.id)

        // Approval switches everyone to v2.
        yield* approved(v2.id)
        const after = yield* getAgent(other.token, agent.identifier)
        assert.strictEqual(after.body.name, `Alpha ${v2Word}`)
        assert.strictEqual(after.body.published_version, 2)
        assert.deepStrictEqual(yield* marketIdentifiers(v2Word), [agent.identifier])
        assert.deepStrictEqual(yield* marketIdentifiers(v1Word), [])
      }))

    it.effect("reject keeps the published version online and tells the owner why", () =>
      Effect.gen(function*() {
        const owner = yield* newUser
        const other = yield* newUser
        const agent = yield* createAgent(owner.token, { name: "Stable", description: "good version" })
        yield* approved((yield* publish(owner.token, agent.identifier)).id)
        yield* patchAgent(owner.token, agent.identifier, { description: "dubious version" })
        const v2 = yield* publish(owner.token, agent.identifier)

        const decision = yield* reject(v2.id, "Misleading description")
        assert.strictEqual(decision.status, 200, decision.text)
        assert.deepStrictEqual(decision.body, { id: v2.id, version: 2, status: "rejected" })

        const seen = yield* getAgent(other.token, agent.identifier)
        assert.strictEqual(seen.body.description, "good version")
        assert.strictEqual(seen.body.published_version, 1)
        const mine = yield* getAgent(owner.token, agent.identifier)
        assert.strictEqual(mine.body.pending_submission, null)
        assert.strictEqual(mine.body.published_version, 1)
        assert.strictEqual(mine.body.description, "dubious version", "the draft is the owner's to fix")

        const note = (yield* notificationsOf(owner.token)).data.find((n) => n.kind === "agent_rejected")
        assert.isDefined(note)
        assert.include(note!.body, "Misleading description")
        assert.strictEqual(note!.data.version, 2)
        assert.strictEqual(note!.data.submission_id, v2.id)

        // A decided submission cannot be decided again.
        assertError(yield* approve(v2.id), 400, "invalid_request")
        assertError(yield* reject(v2.id, "again"), 400, "invalid_request")
        assert.strictEqual((yield* getAgent(other.token, agent.identifier)).body.published_version, 1)

        // A first version rejected: nothing goes live.
        const fresh = yield* createAgent(owner.token, { name: "Never live" })
        const only = yield* publish(owner.token, fresh.identifier)
        assert.strictEqual((yield* reject(only.id, "No")).status, 200)
        assertError(yield* getAgent(other.token, fresh.identifier), 404, "not_found")
        assertError(yield* request("POST", `/internal/reviews/${only.id}/reject`, { body: {}, headers: internalAuth }), 400, "invalid_request")
      }))

    it.effect("a newer publish supersedes the pending submission; only the newest can be decided", () =>
      Effect.gen(function*() {
        const owner = yield* newUser
        const other = yield* newUser
        const agent = yield* createAgent(owner.token, { name: "Iterating", description: "v1" })
        const v1 = yield* publish(owner.token, agent.identifier)
        yield* patchAgent(owner.token, agent.identifier, { description: "v2" })
        const v2 = yield* publish(owner.token, agent.identifier)
        assert.strictEqual(v2.version, 2)
        assert.notStrictEqual(v2.id, v1.id)

        assertError(yield* approve(v1.id), 400, "invalid_request")
        assertError(yield* getAgent(other.token, agent.identifier), 404, "not_found")
        const mine = yield* getAgent(owner.token, agent.identifier)
        assert.strictEqual(mine.body.pending_submission.id, v2.id)

        yield* approved(v2.id)
        const seen = yield* getAgent(other.token, agent.identifier)
        assert.strictEqual(seen.body.description, "v2")
        assert.strictEqual(seen.body.published_version, 2)
        assertError(yield* approve(`sub_${"x".repeat(20)}`), 404, "not_found")
      }))

    it.effect("a version is a snapshot: editing the draft after publish changes neither the pending nor the live one", () =>
      Effect.gen(function*() {
        const owner = yield* newUser
        const other = yield* newUser
        const agent = yield* createAgent(owner.token, { name: "Snapshot", description: "as submitted" })
        const v1 = yield* publish(owner.token, agent.identifier)
        yield* patchAgent(owner.token, agent.identifier, { description: "edited after submitting" })
        yield* approved(v1.id)
        assert.strictEqual((yield* getAgent(other.token, agent.identifier)).body.description, "as submitted")
      }))
  })

  // Behind a proxy: the client's address is the right-most X-Forwarded-For entry.
  layer(TestServer.layer({ ...ENV, TRUST_PROXY: "true" }), LIVE)((it) => {
    it.effect("the review desk refuses callers outside the private network (403) and decides nothing", () =>
      Effect.gen(function*() {
        const owner = yield* newUser
        const agent = yield* createAgent(owner.token, { name: "Guarded" })
        const submission = yield* publish(owner.token, agent.identifier)
        const outside = { "x-forwarded-for": "8.8.8.8" }
        assertError(yield* approve(submission.id, outside), 403, "forbidden")
        assertError(
          yield* request("POST", `/internal/reviews/${submission.id}/reject`, { body: { reason: "x" }, headers: { ...internalAuth, ...outside } }),
          403,
          "forbidden"
        )
        assertError(
          yield* request("POST", `/internal/creators/${owner.userId}/approve`, { headers: { ...internalAuth, ...outside } }),
          403,
          "forbidden"
        )
        const still = yield* getAgent(owner.token, agent.identifier)
        assert.strictEqual(still.body.pending_submission.status, "pending")
        assert.strictEqual(still.body.published_version, null)
        // The same request from the private network is served.
        const inside = yield* approve(submission.id, { "x-forwarded-for": "10.1.2.3" })
        assert.strictEqual(inside.status, 200, inside.text)
        assert.strictEqual((yield* getAgent(owner.token, agent.identifier)).body.published_version, 1)
      }))
  })
})
