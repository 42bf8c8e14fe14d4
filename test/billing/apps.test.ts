import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { createApiKey, loginWithSms, type Reply, request } from "../support/Client.js"
import { TestServer } from "../support/TestServer.js"

/**
 * OAuth apps and their meters (issue 3 item 4; spec 2.6) over real HTTP: registration, the one-time client secret,
 * updates including the daily cap, meters with exact decimal prices, and that only the owner sees or changes any of
 * it (someone else's app answers exactly like one that does not exist).
 */

const assertError = (reply: Reply, status: number, type: string) => {
  assert.strictEqual(reply.status, status, reply.text)
  assert.deepStrictEqual(Object.keys(reply.body), ["error"], reply.text)
  assert.strictEqual(reply.body.error.type, type, reply.text)
  assert.isString(reply.body.error.message)
}

const REDIRECT = "https://app.example.com/oauth/callback"

const createApp = (token: string, body: unknown = { name: "My app", redirect_uris: [REDIRECT] }) =>
  request("POST", "/api/apps", { token, body })

/** Creates an app and fails the test when that is refused. */
const newApp = (token: string, name = "My app", redirectUris: ReadonlyArray<string> = [REDIRECT]) =>
  Effect.gen(function*() {
    const reply = yield* createApp(token, { name, redirect_uris: redirectUris })
    assert.strictEqual(reply.status, 201, reply.text)
    return reply.body as {
      id: string
      name: string
      client_id: string
      client_secret: string
      redirect_uris: Array<string>
      daily_cap_per_user: number | null
      created_at: string
    }
  })

const createMeter = (token: string, appId: string, body: unknown) =>
  request("POST", `/api/apps/${appId}/meters`, { token, body })

const listApps = (token: string) =>
  Effect.gen(function*() {
    const reply = yield* request("GET", "/api/apps", { token })
    assert.strictEqual(reply.status, 200, reply.text)
    assert.deepStrictEqual(Object.keys(reply.body), ["data", "has_more"])
    return reply.body.data as Array<Record<string, unknown>>
  })

const APP_FIELDS = ["client_id", "created_at", "daily_cap_per_user", "id", "name", "redirect_uris"]

describe("OAuth apps and meters", () => {
  // Every test logs in fresh users through the SMS inbox; the per-address hourly cap must not get in the way.
  it.layer(TestServer.layer({ SMS_IP_HOURLY_LIMIT: "10000" }))((it) => {
    it.effect("POST /api/apps answers 201 with id, name, client_id, client_secret, redirect_uris, daily_cap_per_user, created_at", () =>
      Effect.gen(function*() {
        const { token } = yield* loginWithSms()
        const reply = yield* createApp(token, {
          name: "Weather bot",
          redirect_uris: [REDIRECT, "http://127.0.0.1:8080/cb?x=1"]
        })
        assert.strictEqual(reply.status, 201, reply.text)
        assert.deepStrictEqual(Object.keys(reply.body).sort(), [...APP_FIELDS, "client_secret"].sort())
        assert.strictEqual(reply.body.name, "Weather bot")
        assert.deepStrictEqual(reply.body.redirect_uris, [REDIRECT, "http://127.0.0.1:8080/cb?x=1"])
        assert.isNull(reply.body.daily_cap_per_user)
        for (const field of ["id", "client_id", "client_secret"]) {
          assert.isString(reply.body[field])
          assert.isTrue(reply.body[field].length >= 16, `${field} is long and random`)
        }
        assert.notStrictEqual(reply.body.client_id, reply.body.client_secret)
        assert.strictEqual(new Date(reply.body.created_at).toISOString(), reply.body.created_at)
        // Two apps never share credentials.
        const other = yield* newApp(token)
        assert.notStrictEqual(other.id, reply.body.id)
        assert.notStrictEqual(other.client_id, reply.body.client_id)
        assert.notStrictEqual(other.client_secret, reply.body.client_secret)
      }))

    it.effect("the client secret appears only in the create response: not in GET /api/apps, not in PATCH", () =>
      Effect.gen(function*() {
        const { token } = yield* loginWithSms()
        const app = yield* newApp(token)
        const listed = yield* listApps(token)
        assert.strictEqual(listed.length, 1)
        assert.deepStrictEqual(Object.keys(listed[0]!).sort(), APP_FIELDS)
        const patched = yield* request("PATCH", `/api/apps/${app.id}`, { token, body: { name: "Renamed" } })
        assert.strictEqual(patched.status, 200, patched.text)
        assert.deepStrictEqual(Object.keys(patched.body).sort(), APP_FIELDS)
        for (const reply of [JSON.stringify(listed), patched.text]) {
          assert.notInclude(reply, app.client_secret)
          assert.notInclude(reply, "secret")
        }
      }))

    it.effect("GET /api/apps lists the caller's apps only, in creation order, as they were created", () =>
      Effect.gen(function*() {
        const alice = yield* loginWithSms()
        const bob = yield* loginWithSms()
        const first = yield* newApp(alice.token, "Alice one")
        const second = yield* newApp(alice.token, "Alice two", [REDIRECT, "https://b.example.com/cb"])
        const bobs = yield* newApp(bob.token, "Bob's")
        const aliceList = yield* listApps(alice.token)
        assert.deepStrictEqual(aliceList.map((app) => app.id), [first.id, second.id])
        const { client_secret: _, ...secondView } = second
        assert.deepStrictEqual(aliceList[1], secondView)
        assert.deepStrictEqual((yield* listApps(bob.token)).map((app) => app.id), [bobs.id])
        const carol = yield* loginWithSms()
        assert.deepStrictEqual(yield* listApps(carol.token), [])
      }))

    it.effect("PATCH /api/apps/:id changes name, redirect_uris and daily_cap_per_user (a decimal, 0, or null); the rest stays", () =>
      Effect.gen(function*() {
        const { token } = yield* loginWithSms()
        const app = yield* newApp(token)
        const patch = (body: unknown) =>
          Effect.gen(function*() {
            const reply = yield* request("PATCH", `/api/apps/${app.id}`, { token, body })
            assert.strictEqual(reply.status, 200, reply.text)
            return reply.body
          })
        const renamed = yield* patch({ name: "New name" })
        assert.strictEqual(renamed.name, "New name")
        assert.deepStrictEqual(renamed.redirect_uris, [REDIRECT])
        assert.isNull(renamed.daily_cap_per_user)
        assert.strictEqual(renamed.client_id, app.client_id)
        assert.strictEqual(renamed.created_at, app.created_at)

        const uris = yield* patch({ redirect_uris: ["https://new.example.com/cb", "http://localhost:3000/cb"] })
        assert.deepStrictEqual(uris.redirect_uris, ["https://new.example.com/cb", "http://localhost:3000/cb"])
        assert.strictEqual(uris.name, "New name")

        const capped = yield* patch({ daily_cap_per_user: 12.5 })
        assert.strictEqual(capped.daily_cap_per_user, 12.5)
        assert.strictEqual((yield* patch({ daily_cap_per_user: "0.000001" })).daily_cap_per_user, 0.000001)
        // A patch that does not mention the cap leaves it as it is.
        const untouched = yield* patch({ name: "Again" })
        assert.strictEqual(untouched.daily_cap_per_user, 0.000001)
        assert.deepStrictEqual(untouched.redirect_uris, ["https://new.example.com/cb", "http://localhost:3000/cb"])
        // 0 is a cap that blocks everything: it must not be confused with "none".
        assert.strictEqual((yield* patch({ daily_cap_per_user: 0 })).daily_cap_per_user, 0)
        assert.strictEqual((yield* patch({})).daily_cap_per_user, 0)
        assert.isNull((yield* patch({ daily_cap_per_user: null })).daily_cap_per_user)

        const listed = yield* listApps(token)
        assert.strictEqual(listed[0]!.name, "Again")
        assert.isNull(listed[0]!.daily_cap_per_user)
        assert.deepStrictEqual(listed[0]!.redirect_uris, ["https://new.example.com/cb", "http://localhost:3000/cb"])
      }))

    it.effect("PATCH refuses a negative cap, one with more than 6 decimals, an empty name: 400 invalid_request, nothing changes", () =>
      Effect.gen(function*() {
        const { token } = yield* loginWithSms()
        const app = yield* newApp(token)
        for (const body of [{ daily_cap_per_user: -1 }, { daily_cap_per_user: 0.0000001 }, { daily_cap_per_user: "x" }, { name: "" }]) {
          const reply = yield* request("PATCH", `/api/apps/${app.id}`, { token, body })
          assertError(reply, 400, "invalid_request")
        }
        const listed = yield* listApps(token)
        assert.strictEqual(listed[0]!.name, "My app")
        assert.isNull(listed[0]!.daily_cap_per_user)
      }))

    it.effect("redirect_uris must be absolute http(s) URLs without a fragment, at least one: otherwise 400 invalid_request", () =>
      Effect.gen(function*() {
        const { token } = yield* loginWithSms()
        const bad: Array<unknown> = [
          [],
          ["/relative/callback"],
          ["callback"],
          ["ftp://files.example.com/cb"],
          ["javascript:alert(1)"],
          ["https://app.example.com/cb#fragment"],
          ["https://app.example.com/cb#"],
          [REDIRECT, "not a url"],
          "https://app.example.com/cb"
        ]
        for (const redirect_uris of bad) {
          const reply = yield* createApp(token, { name: "Bad", redirect_uris })
          assertError(reply, 400, "invalid_request")
          assert.include(reply.body.error.message, "redirect_uris", JSON.stringify(redirect_uris))
        }
        assertError(yield* createApp(token, { name: "No uris" }), 400, "invalid_request")
        assertError(yield* createApp(token, { redirect_uris: [REDIRECT] }), 400, "invalid_request")
        assertError(yield* createApp(token, { name: "", redirect_uris: [REDIRECT] }), 400, "invalid_request")
        // The same rules hold for a PATCH.
        const app = yield* newApp(token)
        for (const redirect_uris of bad) {
          const reply = yield* request("PATCH", `/api/apps/${app.id}`, { token, body: { redirect_uris } })
          assertError(reply, 400, "invalid_request")
        }
        const listed = yield* listApps(token)
        assert.strictEqual(listed.length, 1, "no refused app was created")
        assert.deepStrictEqual(listed[0]!.redirect_uris, [REDIRECT])
      }))

    it.effect("another user's app is 404 for PATCH and for creating, listing and updating its meters; nothing changes", () =>
      Effect.gen(function*() {
        const owner = yield* loginWithSms()
        const stranger = yield* loginWithSms()
        const app = yield* newApp(owner.token)
        const meter = yield* createMeter(owner.token, app.id, { event_name: "search", credits_per_use: 2 })
        assert.strictEqual(meter.status, 201, meter.text)

        assertError(
          yield* request("PATCH", `/api/apps/${app.id}`, { token: stranger.token, body: { name: "Mine now", daily_cap_per_user: 0 } }),
          404,
          "not_found"
        )
        assertError(yield* createMeter(stranger.token, app.id, { event_name: "steal", credits_per_use: 0 }), 404, "not_found")
        assertError(yield* request("GET", `/api/apps/${app.id}/meters`, { token: stranger.token }), 404, "not_found")
        assertError(
          yield* request("PATCH", `/api/apps/${app.id}/meters/${meter.body.id}`, {
            token: stranger.token,
            body: { credits_per_use: 0, disabled: true }
          }),
          404,
          "not_found"
        )
        // Exactly like an app that does not exist.
        assertError(yield* request("PATCH", "/api/apps/app_doesnotexist", { token: owner.token, body: { name: "x" } }), 404, "not_found")
        assertError(yield* request("GET", "/api/apps/app_doesnotexist/meters", { token: owner.token }), 404, "not_found")

        const listed = yield* listApps(owner.token)
        assert.strictEqual(listed[0]!.name, "My app")
        assert.isNull(listed[0]!.daily_cap_per_user)
        const meters = yield* request("GET", `/api/apps/${app.id}/meters`, { token: owner.token })
        assert.deepStrictEqual(meters.body.data, [meter.body])
      }))

    it.effect("a meter of another app is 404 through the caller's own app", () =>
      Effect.gen(function*() {
        const owner = yield* loginWithSms()
        const stranger = yield* loginWithSms()
        const app = yield* newApp(owner.token)
        const meter = yield* createMeter(owner.token, app.id, { event_name: "search", credits_per_use: 2 })
        const own = yield* newApp(stranger.token)
        assertError(
          yield* request("PATCH", `/api/apps/${own.id}/meters/${meter.body.id}`, { token: stranger.token, body: { disabled: true } }),
          404,
          "not_found"
        )
        assertError(
          yield* request("PATCH", `/api/apps/${app.id}/meters/mtr_doesnotexist`, { token: owner.token, body: { disabled: true } }),
          404,
          "not_found"
        )
        const meters = yield* request("GET", `/api/apps/${app.id}/meters`, { token: owner.token })
        assert.isFalse(meters.body.data[0].disabled)
      }))

    it.effect("without a login token every apps route is 401; an API key is no login token", () =>
      Effect.gen(function*() {
        const { token } = yield* loginWithSms()
        const app = yield* newApp(token)
        const key = yield* createApiKey(token)
        const routes: Array<[string, string, unknown]> = [
          ["POST", "/api/apps", { name: "x", redirect_uris: [REDIRECT] }],
          ["GET", "/api/apps", undefined],
          ["PATCH", `/api/apps/${app.id}`, { name: "x" }],
          ["POST", `/api/apps/${app.id}/meters`, { event_name: "x", credits_per_use: 1 }],
          ["GET", `/api/apps/${app.id}/meters`, undefined],
          ["PATCH", `/api/apps/${app.id}/meters/mtr_x`, { disabled: true }]
        ]
        for (const [method, path, body] of routes) {
          assertError(yield* request(method, path, body === undefined ? {} : { body }), 401, "unauthorized")
          assertError(yield* request(method, path, { token: "not-a-token", ...(body === undefined ? {} : { body }) }), 401, "unauthorized")
          assertError(yield* request(method, path, { token: key.key, ...(body === undefined ? {} : { body }) }), 401, "unauthorized")
        }
        assert.strictEqual((yield* listApps(token)).length, 1)
      }))

    it.effect("the login cookie works like the bearer token", () =>
      Effect.gen(function*() {
        const { token } = yield* loginWithSms()
        const app = yield* newApp(token)
        const reply = yield* request("GET", "/api/apps", { headers: { cookie: `token=${token}` } })
        assert.strictEqual(reply.status, 200, reply.text)
        assert.deepStrictEqual(reply.body.data.map((a: { id: string }) => a.id), [app.id])
      }))

    it.effect("POST /api/apps/:id/meters answers 201 {id, event_name, credits_per_use, type: PER_USE, disabled: false}", () =>
      Effect.gen(function*() {
        const { token } = yield* loginWithSms()
        const app = yield* newApp(token)
        const reply = yield* createMeter(token, app.id, { event_name: "image.generate", credits_per_use: 2.5 })
        assert.strictEqual(reply.status, 201, reply.text)
        assert.deepStrictEqual(Object.keys(reply.body).sort(), ["credits_per_use", "disabled", "event_name", "id", "type"])
        assert.isString(reply.body.id)
        assert.isTrue(reply.body.id.length > 0)
        assert.deepStrictEqual(
          { ...reply.body, id: "" },
          { id: "", event_name: "image.generate", credits_per_use: 2.5, type: "PER_USE", disabled: false }
        )
      }))

    it.effect("credits_per_use is exact with up to 6 decimals (number or string) and may be 0; a 7th decimal, a negative or a non-number is 400", () =>
      Effect.gen(function*() {
        const { token } = yield* loginWithSms()
        const app = yield* newApp(token)
        const accepted: Array<[unknown, number]> = [
          [0.000001, 0.000001],
          ["0.000001", 0.000001],
          [0.1, 0.1],
          ["12.345678", 12.345678],
          [0, 0],
          [1000000, 1000000]
        ]
        for (const [i, [price, expected]] of accepted.entries()) {
          const reply = yield* createMeter(token, app.id, { event_name: `ok.${i}`, credits_per_use: price })
          assert.strictEqual(reply.status, 201, `${JSON.stringify(price)}: ${reply.text}`)
          assert.strictEqual(reply.body.credits_per_use, expected)
        }
        const refused: Array<unknown> = [0.0000001, "0.0000001", 1.2345678, -1, -0.5, "-1", "abc", "", null, true, "1e3"]
        for (const [i, price] of refused.entries()) {
          const reply = yield* createMeter(token, app.id, { event_name: `bad.${i}`, credits_per_use: price })
          assertError(reply, 400, "invalid_request")
          assert.include(reply.body.error.message, "credits_per_use", JSON.stringify(price))
        }
        assertError(yield* createMeter(token, app.id, { event_name: "missing" }), 400, "invalid_request")
        assertError(yield* createMeter(token, app.id, { credits_per_use: 1 }), 400, "invalid_request")
        assertError(yield* createMeter(token, app.id, { event_name: "", credits_per_use: 1 }), 400, "invalid_request")
        assertError(yield* createMeter(token, app.id, { event_name: "e".repeat(101), credits_per_use: 1 }), 400, "invalid_request")
        assert.strictEqual((yield* createMeter(token, app.id, { event_name: "e".repeat(100), credits_per_use: 1 })).status, 201)
        const listed = yield* request("GET", `/api/apps/${app.id}/meters`, { token })
        assert.deepStrictEqual(
          listed.body.data.map((m: { credits_per_use: number }) => m.credits_per_use),
          [...accepted.map(([, expected]) => expected), 1]
        )
      }))

    it.effect("a second meter with the same event_name in one app is 400 invalid_request; another app may use the name", () =>
      Effect.gen(function*() {
        const { token } = yield* loginWithSms()
        const app = yield* newApp(token)
        const other = yield* newApp(token)
        assert.strictEqual((yield* createMeter(token, app.id, { event_name: "search", credits_per_use: 1 })).status, 201)
        const duplicate = yield* createMeter(token, app.id, { event_name: "search", credits_per_use: 5 })
        assertError(duplicate, 400, "invalid_request")
        assert.include(duplicate.body.error.message, "event_name")
        assert.strictEqual((yield* createMeter(token, other.id, { event_name: "search", credits_per_use: 5 })).status, 201)
        const listed = yield* request("GET", `/api/apps/${app.id}/meters`, { token })
        assert.deepStrictEqual(listed.body.data.map((m: { credits_per_use: number }) => m.credits_per_use), [1])
      }))

    it.effect("PATCH a meter changes credits_per_use and disabled independently; GET lists the meters as they are", () =>
      Effect.gen(function*() {
        const { token } = yield* loginWithSms()
        const app = yield* newApp(token)
        const search = (yield* createMeter(token, app.id, { event_name: "search", credits_per_use: 1 })).body
        const render = (yield* createMeter(token, app.id, { event_name: "render", credits_per_use: 3 })).body
        const patch = (body: unknown) =>
          Effect.gen(function*() {
            const reply = yield* request("PATCH", `/api/apps/${app.id}/meters/${search.id}`, { token, body })
            assert.strictEqual(reply.status, 200, reply.text)
            return reply.body
          })
        const priced = yield* patch({ credits_per_use: "0.25" })
        assert.deepStrictEqual(priced, { id: search.id, event_name: "search", credits_per_use: 0.25, type: "PER_USE", disabled: false })
        const disabled = yield* patch({ disabled: true })
        assert.deepStrictEqual(disabled, { ...priced, disabled: true })
        const free = yield* patch({ credits_per_use: 0 })
        assert.deepStrictEqual(free, { ...priced, credits_per_use: 0, disabled: true })
        const enabled = yield* patch({ disabled: false })
        assert.deepStrictEqual(enabled, { ...free, disabled: false })
        assert.deepStrictEqual(yield* patch({}), enabled)
        for (const body of [{ credits_per_use: -1 }, { credits_per_use: 0.0000001 }, { disabled: "yes" }]) {
          const reply = yield* request("PATCH", `/api/apps/${app.id}/meters/${search.id}`, { token, body })
          assertError(reply, 400, "invalid_request")
        }
        const listed = yield* request("GET", `/api/apps/${app.id}/meters`, { token })
        assert.strictEqual(listed.status, 200, listed.text)
        assert.deepStrictEqual(listed.body, { data: [enabled, render], has_more: false })
      }))
  })
})
