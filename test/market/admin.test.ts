import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { loginWithSms, request } from "../support/Client.js"
import { TestServer } from "../support/TestServer.js"
import { assertError, createAgent, ENV, LIVE, newUser, notificationsOf, publish } from "../agents/agents-support.js"

/**
 * The review console's API (issue 27 item 4): the operators of ADMIN_PHONES see the queue and decide through the
 * same services as `/internal/*`; the creator is notified; anyone else gets 404 for every route.
 */

const OPERATOR = "+15550009999"

describe("review console", () => {
  layer(TestServer.layer({ ...ENV, ADMIN_PHONES: `+15550009998, ${OPERATOR}` }), LIVE)((it) => {
    it.effect("others get 404; the operator sees, diffs and decides submissions and applications", () =>
      Effect.gen(function*() {
        const creator = yield* newUser
        const other = yield* newUser
        const operator = (yield* loginWithSms(OPERATOR)).token
        assertError(yield* request("GET", "/api/admin/queue", { token: other.token }), 404, "not_found")
        assertError(yield* request("GET", "/api/admin/queue"), 401, "unauthorized")
        // The profile says who may review, so the web app needs no probe of the console.
        const me = yield* request("GET", "/api/user/me", { token: other.token })
        assert.deepStrictEqual(me.body, { id: other.userId, phone: me.body.phone, may_review: false }, me.text)
        assert.strictEqual((yield* request("GET", "/api/user/me", { token: operator })).body.may_review, true)
        assertError(yield* request("GET", "/api/user/me"), 401, "unauthorized")

        const agent = yield* createAgent(creator.token, { name: "Queue Expert", instructions: "first" })
        const first = yield* publish(creator.token, agent.identifier)
        assertError(yield* request("POST", `/api/admin/submissions/${first.id}/approve`, { token: other.token }), 404, "not_found")
        const queue = yield* request("GET", "/api/admin/queue", { token: operator })
        assert.strictEqual(queue.status, 200, queue.text)
        const item = queue.body.submissions.find((s: { id: string }) => s.id === first.id)
        assert.deepInclude(item, { agent: agent.identifier, name: "Queue Expert", version: 1, published_version: null })
        const detail = yield* request("GET", `/api/admin/submissions/${first.id}`, { token: operator })
        assert.strictEqual(detail.body.published, null)
        assert.strictEqual(detail.body.submitted.instructions, "first")
        const approved = yield* request("POST", `/api/admin/submissions/${first.id}/approve`, { token: operator })
        assert.deepStrictEqual(approved.body, { id: first.id, version: 1, status: "approved" })
        // Once decided, it cannot be decided again, by either door.
        assertError(yield* request("POST", `/api/admin/submissions/${first.id}/reject`, { token: operator, body: { reason: "late" } }), 400, "invalid_request")

        // An update is shown against the published version; a rejection carries its reason to the creator.
        yield* request("PATCH", `/v1/agents/${agent.identifier}`, { token: creator.token, body: { instructions: "second" } })
        const second = yield* publish(creator.token, agent.identifier)
        const diff = yield* request("GET", `/api/admin/submissions/${second.id}`, { token: operator })
        assert.strictEqual(diff.body.published.instructions, "first")
        assert.strictEqual(diff.body.submitted.instructions, "second")
        assertError(yield* request("POST", `/api/admin/submissions/${second.id}/reject`, { token: operator, body: {} }), 400, "invalid_request")
        const rejected = yield* request("POST", `/api/admin/submissions/${second.id}/reject`, { token: operator, body: { reason: "Too vague." } })
        assert.strictEqual(rejected.body.status, "rejected", rejected.text)
        const notes = yield* notificationsOf(creator.token)
        assert.deepStrictEqual(notes.data.map((n) => n.kind).slice(0, 2), ["agent_rejected", "agent_approved"])
        assert.include(notes.data[0]!.body, "Too vague.")

        // Creator applications.
        const applied = yield* request("POST", "/api/creator/apply", {
          token: other.token,
          body: { displayName: "Ada", bio: "Writing tools.", accountType: "individual", email: "ada@example.com" }
        })
        assert.strictEqual(applied.status, 201, applied.text)
        const withApplication = yield* request("GET", "/api/admin/queue", { token: operator })
        assert.isTrue(withApplication.body.applications.some((a: { user_id: string }) => a.user_id === other.userId))
        const decided = yield* request("POST", `/api/admin/applications/${other.userId}/approve`, { token: operator })
        assert.strictEqual(decided.body.status, "approved", decided.text)
        assert.strictEqual((yield* notificationsOf(other.token)).data[0]!.kind, "creator_approved")
      }))
  })
})
