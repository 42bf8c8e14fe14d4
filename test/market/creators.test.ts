import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { request } from "../support/Client.js"
import { internalAuth, TestServer } from "../support/TestServer.js"
import { assertError, ENV, liveAgent, LIVE, newUser, notificationsOf } from "../agents/agents-support.js"

/**
 * Creators (spec 4.10 rule 1; issue 4 item 5): an application enters human review at `/internal/creators/:id`, and
 * its outcome arrives as an in-app notification (`GET /api/notifications`, `POST /api/notifications/:id/read`).
 */

const APPLICATION = {
  displayName: "Ada Writes",
  bio: "I build writing assistants.",
  accountType: "individual",
  email: "ada@example.com"
}

const profileOf = (token: string) =>
  Effect.gen(function*() {
    const reply = yield* request("GET", "/api/creator/profile", { token })
    assert.strictEqual(reply.status, 200, reply.text)
    return reply.body
  })

const apply = (token: string, body: unknown = APPLICATION) => request("POST", "/api/creator/apply", { token, body })
const approveCreator = (userId: string) => request("POST", `/internal/creators/${userId}/approve`, { headers: internalAuth })
const rejectCreator = (userId: string, reason: string) =>
  request("POST", `/internal/creators/${userId}/reject`, { body: { reason }, headers: internalAuth })

describe("creators", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("before applying, the profile says not_applied", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        assert.deepStrictEqual(yield* profileOf(user.token), {
          user_id: user.userId,
          status: "not_applied",
          display_name: null,
          bio: null,
          account_type: null,
          email: null,
          reason: null,
          applied_at: null,
          decided_at: null
        })
        assertError(yield* request("GET", "/api/creator/profile"), 401, "unauthorized")
        assertError(yield* request("POST", "/api/creator/apply", { body: APPLICATION }), 401, "unauthorized")
      }))

    it.effect("apply enters review; approval arrives as a notification, which can be marked read", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const reply = yield* apply(user.token)
        assert.strictEqual(reply.status, 201, reply.text)
        assert.strictEqual(reply.body.status, "pending")
        assert.strictEqual(reply.body.display_name, "Ada Writes")
        assert.strictEqual(reply.body.bio, "I build writing assistants.")
        assert.strictEqual(reply.body.account_type, "individual")
        assert.strictEqual(reply.body.email, "ada@example.com")
        assert.strictEqual(new Date(reply.body.applied_at).toISOString(), reply.body.applied_at)
        assert.strictEqual(reply.body.decided_at, null)
        assert.deepStrictEqual(yield* profileOf(user.token), reply.body)
        // Under review: applying again is refused, and nothing is announced yet.
        assertError(yield* apply(user.token, { ...APPLICATION, displayName: "Other" }), 409, "already_applied")
        assert.strictEqual((yield* profileOf(user.token)).display_name, "Ada Writes")
        assert.deepStrictEqual((yield* notificationsOf(user.token)).data, [])

        const decided = yield* approveCreator(user.userId)
        assert.strictEqual(decided.status, 200, decided.text)
        assert.strictEqual(decided.body.status, "approved")
        const profile = yield* profileOf(user.token)
        assert.strictEqual(profile.status, "approved")
        assert.isString(profile.decided_at)

        const inbox = yield* notificationsOf(user.token)
        assert.strictEqual(inbox.unread, 1)
        assert.strictEqual(inbox.has_more, false)
        assert.strictEqual(inbox.data.length, 1)
        const note = inbox.data[0]!
        assert.strictEqual(note.kind, "creator_approved")
        assert.strictEqual(note.read, false)
        assert.strictEqual(note.read_at, null)
        assert.match(note.id, /^ntf_/)

        const read = yield* request("POST", `/api/notifications/${note.id}/read`, { token: user.token })
        assert.strictEqual(read.status, 200, read.text)
        assert.strictEqual(read.body.id, note.id)
        assert.strictEqual(read.body.read, true)
        assert.isString(read.body.read_at)
        const after = yield* notificationsOf(user.token)
        assert.strictEqual(after.unread, 0)
        assert.strictEqual(after.data[0]!.read, true)
        // Reading twice keeps the first time.
        const again = yield* request("POST", `/api/notifications/${note.id}/read`, { token: user.token })
        assert.strictEqual(again.body.read_at, read.body.read_at)

        // Approved: no second application, no second decision.
        assertError(yield* apply(user.token), 409, "already_applied")
        assertError(yield* approveCreator(user.userId), 400, "invalid_request")
        assertError(yield* rejectCreator(user.userId, "changed my mind"), 400, "invalid_request")
        assert.strictEqual((yield* profileOf(user.token)).status, "approved")
      }))

    it.effect("a notification is its owner's only: another user's id is 404, as is an unknown one", () =>
      Effect.gen(function*() {
        const owner = yield* newUser
        const other = yield* newUser
        yield* apply(owner.token)
        yield* rejectCreator(owner.userId, "Incomplete bio")
        const note = (yield* notificationsOf(owner.token)).data[0]!
        assertError(yield* request("POST", `/api/notifications/${note.id}/read`, { token: other.token }), 404, "not_found")
        assertError(yield* request("POST", "/api/notifications/ntf_unknown/read", { token: owner.token }), 404, "not_found")
        assertError(yield* request("POST", `/api/notifications/usr_${note.id.slice("ntf_".length)}/read`, { token: owner.token }), 404, "not_found")
        assert.strictEqual((yield* notificationsOf(owner.token)).data[0]!.read, false)
        assert.deepStrictEqual((yield* notificationsOf(other.token)).data, [])
        assertError(yield* request("GET", "/api/notifications"), 401, "unauthorized")
      }))

    it.effect("a rejection carries its reason; the applicant may apply again", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        yield* apply(user.token)
        const decided = yield* rejectCreator(user.userId, "Please add a real bio")
        assert.strictEqual(decided.status, 200, decided.text)
        const profile = yield* profileOf(user.token)
        assert.strictEqual(profile.status, "rejected")
        assert.strictEqual(profile.reason, "Please add a real bio")
        const note = (yield* notificationsOf(user.token)).data[0]!
        assert.strictEqual(note.kind, "creator_rejected")
        assert.include(note.body, "Please add a real bio")
        assert.strictEqual(note.data.reason, "Please add a real bio")

        const again = yield* apply(user.token, { ...APPLICATION, bio: "A real bio this time.", accountType: "organization" })
        assert.strictEqual(again.status, 201, again.text)
        assert.strictEqual(again.body.status, "pending")
        assert.strictEqual(again.body.reason, null)
        assert.strictEqual(again.body.decided_at, null)
        assert.strictEqual(again.body.account_type, "organization")
        yield* approveCreator(user.userId)
        const inbox = yield* notificationsOf(user.token)
        assert.deepStrictEqual(inbox.data.map((n) => n.kind), ["creator_approved", "creator_rejected"])
        assert.strictEqual(inbox.unread, 2)
      }))

    it.effect("the review desk: unknown applicant 404, reason required", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        assertError(yield* approveCreator(user.userId), 404, "not_found")
        assertError(yield* approveCreator("usr_nobody"), 404, "not_found")
        yield* apply(user.token)
        assertError(yield* request("POST", `/internal/creators/${user.userId}/reject`, { body: {}, headers: internalAuth }), 400, "invalid_request")
        assertError(yield* rejectCreator(user.userId, ""), 400, "invalid_request")
        assert.strictEqual((yield* profileOf(user.token)).status, "pending")
      }))

    it.effect("apply validates each field and names it", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        for (const [body, field] of [
          [{ ...APPLICATION, email: "not-an-email" }, "email"],
          [{ ...APPLICATION, accountType: "alien" }, "accountType"],
          [{ ...APPLICATION, displayName: "" }, "displayName"],
          [{ bio: "x", accountType: "individual", email: "a@b.co" }, "displayName"]
        ] as const) {
          const reply = yield* apply(user.token, body)
          assertError(reply, 400, "invalid_request")
          assert.include(reply.body.error.message, field)
        }
        assert.strictEqual((yield* profileOf(user.token)).status, "not_applied")
      }))

    it.effect("an approved creator's display name appears on their agents' market pages", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const identifier = yield* liveAgent(user.token, { name: "By a creator" })
        const page = () => request("GET", `/api/market/agents/${identifier}`)
        assert.strictEqual((yield* page()).body.creator, null)
        yield* apply(user.token)
        assert.strictEqual((yield* page()).body.creator, null, "not while pending")
        yield* approveCreator(user.userId)
        assert.deepStrictEqual((yield* page()).body.creator, { id: user.userId, display_name: "Ada Writes" })
      }))
  })
})
