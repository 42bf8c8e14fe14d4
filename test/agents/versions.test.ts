import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { request } from "../support/Client.js"
import { TestServer } from "../support/TestServer.js"
import { approved, assertError, createAgent, ENV, getAgent, LIVE, newUser, patchAgent, publish } from "./agents-support.js"

/**
 * An expert's version history (issue 48 item 3, docs/agents.md "Versions"): every publish freezes a version; its
 * creator lists them, reads one whole and restores one as the draft, which publishes nothing and keeps the live
 * settings. Nobody else reads or restores anything.
 */

const versions = (token: string, identifier: string, query = "") =>
  request("GET", `/v1/agents/${identifier}/versions${query}`, { token })

describe("agent versions", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("versions listed newest first with their review, read whole, and one restored as the draft", () =>
      Effect.gen(function*() {
        const owner = yield* newUser
        const agent = yield* createAgent(owner.token, { name: "Versioned", instructions: "Answer in French." })
        const id = agent.identifier
        const first = yield* publish(owner.token, id)
        yield* approved(first.id)
        assert.strictEqual((yield* patchAgent(owner.token, id, { instructions: "Answer in German.", name: "Versioned Two" })).status, 200)
        const second = yield* publish(owner.token, id)
        assert.strictEqual((yield* patchAgent(owner.token, id, { instructions: "Answer in Latin.", trace_content: true })).status, 200)

        const listed = yield* versions(owner.token, id)
        assert.strictEqual(listed.status, 200, listed.text)
        assert.deepStrictEqual(
          listed.body.data.map((v: any) => [v.version, v.review_status, v.live]),
          [[second.version, "pending", false], [first.version, "approved", true]]
        )
        const paged = yield* versions(owner.token, id, `?limit=1&after=${second.version}`)
        assert.deepStrictEqual([paged.body.data.map((v: any) => v.version), paged.body.has_more], [[first.version], false])

        const one = yield* request("GET", `/v1/agents/${id}/versions/${first.version}`, { token: owner.token })
        assert.strictEqual(one.status, 200, one.text)
        assert.deepInclude(one.body, { version: first.version, review_status: "approved", live: true })
        assert.deepInclude(one.body.agent, { identifier: id, name: "Versioned", instructions: "Answer in French." })

        // Restored: the draft is version 1 again; nothing new is published or submitted; trace_content stays on.
        const restored = yield* request("POST", `/v1/agents/${id}/versions/${first.version}/restore`, { token: owner.token })
        assert.strictEqual(restored.status, 200, restored.text)
        assert.deepInclude(restored.body, { name: "Versioned", instructions: "Answer in French.", trace_content: true, published_version: first.version })
        const after = yield* getAgent(owner.token, id)
        assert.deepInclude(after.body, { instructions: "Answer in French.", trace_content: true })
        assert.strictEqual(after.body.pending_submission.version, second.version)
        assert.strictEqual((yield* versions(owner.token, id)).body.data.length, 2)
      }))

    it.effect("another person reads and restores nothing; a version that does not exist is a 404; a bad number a 400", () =>
      Effect.gen(function*() {
        const owner = yield* newUser
        const other = yield* newUser
        const draft = yield* createAgent(owner.token, { name: "Private draft", instructions: "secret-instructions-7q" })
        yield* publish(owner.token, draft.identifier)
        const live = yield* createAgent(owner.token, { name: "Live one", instructions: "live-instructions-3k" })
        yield* approved((yield* publish(owner.token, live.identifier)).id)

        // A draft's existence is not told (404); a published expert's is public, its versions are not (403).
        for (const [identifier, status] of [[draft.identifier, 404], [live.identifier, 403]] as const) {
          for (const reply of [
            yield* versions(other.token, identifier),
            yield* request("GET", `/v1/agents/${identifier}/versions/1`, { token: other.token }),
            yield* request("POST", `/v1/agents/${identifier}/versions/1/restore`, { token: other.token })
          ]) {
            assert.strictEqual(reply.status, status, reply.text)
            assert.notInclude(reply.text, "instructions-")
          }
        }
        assert.strictEqual((yield* getAgent(owner.token, draft.identifier)).body.instructions, "secret-instructions-7q")
        assertError(yield* request("GET", `/v1/agents/${draft.identifier}/versions/9`, { token: owner.token }), 404, "not_found")
        assertError(yield* request("POST", `/v1/agents/${draft.identifier}/versions/9/restore`, { token: owner.token }), 404, "not_found")
        assertError(yield* request("GET", `/v1/agents/${draft.identifier}/versions/one`, { token: owner.token }), 400, "invalid_request")
      }))
  })
})
