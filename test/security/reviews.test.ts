import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { request } from "../support/Client.js"
import { TestServer } from "../support/TestServer.js"
import { apiKeyOf, createAgent, ENV, LIVE, liveAgent, newUser } from "../runs/runs-support.js"

/**
 * The authorization suite over the marketplace's per-user writes (issue 48 item 4, docs/marketplace.md): a review is
 * its author's alone (every route is keyed by the caller, none names another's review), and an icon is its expert's
 * owner's alone. Another user cannot change or delete either, and the owner cannot review their own expert.
 */

const PNG = Buffer.from(
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==",
  "base64"
).toString("base64")

describe("security: reviews and icons", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("one user cannot edit or delete another's review; only the owner sets an expert's icon", () =>
      Effect.gen(function*() {
        const owner = yield* newUser
        const [alice, bob] = [yield* newUser, yield* newUser]
        const expert = yield* liveAgent(owner.token, { name: `Reviewed ${Math.random().toString(36).slice(2, 7)}` })
        for (const user of [alice, bob]) {
          const ran = yield* request("POST", "/v1/agents/run", { token: user.token, body: { agent: expert, message: "hi", stream: false } })
          assert.strictEqual(ran.status, 200, ran.text)
        }
        const path = `/api/market/agents/${expert}/review`
        const written = yield* request("PUT", path, { token: alice.token, body: { rating: 5, text: "Alice's words" } })
        assert.strictEqual(written.status, 200, written.text)

        // Bob's PUT writes Bob's review; Alice's is untouched. Bob's DELETE deletes Bob's only.
        const bobs = yield* request("PUT", path, { token: bob.token, body: { rating: 1, text: "Bob's words" } })
        assert.notStrictEqual(bobs.body.id, written.body.id)
        const reviews = () => Effect.map(request("GET", `/api/market/agents/${expert}/reviews`), (r) => r.body.data)
        assert.sameMembers((yield* reviews()).map((r: any) => r.text), ["Alice's words", "Bob's words"])
        assert.strictEqual((yield* request("DELETE", path, { token: bob.token })).status, 200)
        assert.strictEqual((yield* request("DELETE", path, { token: bob.token })).status, 404)
        assert.deepStrictEqual((yield* reviews()).map((r: any) => [r.id, r.text]), [[written.body.id, "Alice's words"]])
        assert.strictEqual((yield* request("GET", path, { token: bob.token })).body.review, null, "Bob never reads Alice's as his")
        // The owner cannot review their own expert, nor delete someone else's.
        assert.strictEqual((yield* request("PUT", path, { token: owner.token, body: { rating: 5 } })).status, 403)
        assert.strictEqual((yield* request("DELETE", path, { token: owner.token })).status, 404)
        // An API key acts for end users, who are not the reviewing person: the review routes take a login only.
        const key = yield* apiKeyOf(alice)
        const byKey = yield* request("PUT", path, { token: key, headers: { "x-end-user-id": "eu-1" }, body: { rating: 1 } })
        assert.strictEqual(byKey.status, 401, byKey.text)
        assert.strictEqual((yield* reviews()).length, 1)

        // Icons: another user cannot set or remove the icon of a published expert (403) or see a draft's (404).
        const icon = `/v1/agents/${expert}/icon`
        assert.strictEqual((yield* request("PUT", icon, { token: alice.token, body: { image: PNG } })).status, 403)
        assert.strictEqual((yield* request("PUT", icon, { token: owner.token, body: { image: PNG } })).status, 200)
        assert.strictEqual((yield* request("DELETE", icon, { token: alice.token })).status, 403)
        assert.strictEqual((yield* request("GET", `/api/market/agents/${expert}/icon`)).headers.get("content-type"), "image/png")
        const draft = yield* createAgent(owner.token, { name: "Secret draft" })
        assert.strictEqual((yield* request("GET", `/v1/agents/${draft.identifier}/icon`, { token: alice.token })).status, 404)
        assert.strictEqual((yield* request("PUT", `/v1/agents/${draft.identifier}/icon`, { token: alice.token, body: { image: PNG } })).status, 404)
        assert.strictEqual((yield* request("GET", `/api/market/agents/${draft.identifier}/icon`)).status, 404)
        assert.strictEqual((yield* request("GET", `/v1/agents/${draft.identifier}/icon`, { token: owner.token })).status, 200)
        // Featuring is the operators' (none here): 404 for everyone else.
        assert.strictEqual((yield* request("POST", `/api/admin/agents/${expert}/feature`, { token: owner.token })).status, 404)
      }))
  })
})
