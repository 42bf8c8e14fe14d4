import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { makeAtriumFetchClient } from "../../src/client.js"
import { TestServer } from "../support/TestServer.js"
import { agentWith, apiKeyOf, ENV, LIVE, newUser } from "../runs/runs-support.js"

/** Issue 16 item 6: the typed client derived from the server's own HttpApi (`atrium/client`), against the real server. */
describe("the typed client (HttpApiClient of AtriumApi)", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("calls endpoints with their types, as a login user and with an API key for an end user", () =>
      Effect.gen(function*() {
        const { url } = yield* TestServer
        const user = yield* newUser
        const client = yield* makeAtriumFetchClient({ baseUrl: url, token: user.token })

        const models = yield* client.models.list({ urlParams: {} })
        assert.include(models.data.map((model) => model.id), "builtin")

        const created = yield* client.agents.create({ payload: { name: "Typed", category: "coding", instructions: "Be brief." } })
        assert.strictEqual(created.status, "draft")
        const listed = yield* client.agents.list({ urlParams: { limit: 10 } })
        assert.deepStrictEqual(listed.data.map((agent) => agent.identifier), [created.identifier])
        const one = yield* client.agents.get({ path: { identifier: created.identifier } })
        assert.strictEqual(one.name, "Typed")

        // An API key speaks for an end user: sessions are theirs.
        const agent = yield* agentWith(user.token)
        const keyed = yield* makeAtriumFetchClient({ baseUrl: url, token: yield* apiKeyOf(user), endUserId: "client-user" })
        const session = yield* keyed.sessions.create({ payload: { agent } })
        assert.match(session.id, /^ses_/)
        const sessions = yield* keyed.sessions.list({ urlParams: {} })
        assert.deepStrictEqual(sessions.data.map((s) => s.id), [session.id])

        // A failure is the endpoint's tagged error, with the server's message.
        const missing = yield* Effect.flip(client.agents.get({ path: { identifier: "no-such-agent" } }))
        assert.strictEqual(missing._tag, "NotFound")
        assert.include((missing as { message: string }).message, "no-such-agent")
        const taken = yield* Effect.flip(client.agents.create({ payload: { name: "Again", identifier: created.identifier } }))
        assert.strictEqual(taken._tag, "IdentifierTaken")
      }))
  })
})
