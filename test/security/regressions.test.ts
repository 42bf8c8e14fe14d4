import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as Jose from "jose"
import * as Crypto from "node:crypto"
import { registerApp, userIdOf } from "../support/Billing.js"
import { request } from "../support/Client.js"
import { pollUntil } from "../support/Poll.js"
import { internalAuth, JWT_SECRET, TestServer } from "../support/TestServer.js"
import { agentWith, apiKeyOf, assertError, balanceOf, ENV, LIVE, newUser, streamOf } from "../runs/runs-support.js"

/**
 * Issue 15 item 9: the attack categories that held on main, kept as regression cases next to the seven replays:
 * forged tokens, cross-tenant ids, PKCE, and idempotency under concurrency.
 */

const FORM = "application/x-www-form-urlencoded"

const sign = (claims: Record<string, unknown>, key: Uint8Array, alg = "HS256") =>
  Effect.promise(() => new Jose.SignJWT(claims).setProtectedHeader({ alg, typ: "JWT" }).setIssuedAt().setExpirationTime("1h").sign(key))

describe("security: what held", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("forged login tokens are 401: another key, alg none, a tampered payload, a forged internal bearer", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const claims = { userId: userIdOf(user.token), phone: "+15550000000" }
        const otherKey = yield* sign(claims, new TextEncoder().encode("another-secret-another-secret-0123456789"))
        const [header, payload] = user.token.split(".")
        const none = `${Buffer.from(JSON.stringify({ alg: "none", typ: "JWT" })).toString("base64url")}.${payload}.`
        const tampered = `${header}.${Buffer.from(JSON.stringify({ ...Jose.decodeJwt(user.token), userId: "usr_other" })).toString("base64url")}.${user.token.split(".")[2]}`
        // Right key, but never issued: single device means only the current token of the user counts.
        const unissued = yield* sign(claims, new TextEncoder().encode(JWT_SECRET))
        for (const token of [otherKey, none, tampered, unissued, "", "x.y.z"]) {
          assertError(yield* request("POST", "/api/user/apiKey/list", { token }), 401, "unauthorized")
        }
        const grant = { amount: 5, idempotency_key: Crypto.randomUUID(), reason: "forged" }
        assertError(yield* request("POST", `/internal/wallets/${userIdOf(user.token)}/grants`, { body: grant, token: user.token }), 401, "unauthorized")
      }))

    it.effect("another account's ids are 404: agents, sessions and files reveal nothing across tenants", () =>
      Effect.gen(function*() {
        const owner = yield* newUser
        const stranger = yield* newUser
        const agent = yield* agentWith(owner.token)
        const session = yield* request("POST", "/v1/sessions", { token: owner.token, body: { agent } })
        assert.strictEqual(session.status, 201, session.text)
        assertError(yield* request("GET", `/v1/agents/${agent}`, { token: stranger.token }), 404, "not_found")
        assertError(yield* request("GET", `/v1/sessions/${session.body.id}`, { token: stranger.token }), 404, "not_found")
        assertError(yield* request("DELETE", `/v1/sessions/${session.body.id}`, { token: stranger.token }), 404, "not_found")
        const still = yield* request("GET", `/v1/sessions/${session.body.id}`, { token: owner.token })
        assert.strictEqual(still.status, 200, still.text)
      }))

    it.effect("traces (issue 46): every trace route answers another account and another end user nothing", () =>
      Effect.gen(function*() {
        const owner = yield* newUser
        const stranger = yield* newUser
        const agent = yield* agentWith(owner.token, { calculator: "allow" })
        const run = yield* streamOf("/v1/agents/run", { token: owner.token, body: { agent, message: "/tool calculator {\"expression\": \"1 + 1\"}" } })
        const runId = run.events[0]!.data.run_id as string
        // The owner's trace is there (polled: the writer writes it after the run, within 2 s)...
        const mine = yield* pollUntil(request("GET", `/v1/runs/${runId}/trace`, { token: owner.token }), (reply) => reply.status === 200, "the owner reads the trace", {
          every: 25,
          within: 2_000
        })
        const traceId: string = mine.body.trace_id
        assert.isString(traceId, "the owner reads the trace")
        // ...and nobody else reads any of it, by id or by search (the route matrix of the trace routes).
        const key = yield* apiKeyOf(stranger)
        const callers: ReadonlyArray<{ token: string; headers?: Record<string, string> }> = [
          { token: stranger.token },
          { token: key },
          { token: key, headers: { "x-end-user-id": "someone" } }
        ]
        let crossReads = 0
        for (const caller of callers) {
          const headers = caller.headers ?? { "x-end-user-id": "someone" }
          const one = yield* request("GET", `/v1/runs/${runId}/trace`, { token: caller.token, headers })
          if (one.status !== 404) crossReads++
          for (const query of ["", `?agent=${agent}`, `?after=${traceId}`, "?status=ok&min_credits=0", "?tool=calculator"]) {
            const list = yield* request("GET", `/v1/traces${query}`, { token: caller.token, ...(caller.headers ? { headers: caller.headers } : {}) })
            assert.strictEqual(list.status, 200, list.text)
            crossReads += list.body.data.length
            assert.notInclude(list.text, runId)
          }
        }
        assert.strictEqual(crossReads, 0)
        assertError(yield* request("GET", `/v1/runs/${runId}/trace`), 401, "unauthorized")
        assertError(yield* request("GET", "/v1/traces"), 401, "unauthorized")
      }))

    it.effect("evals (issue 46): every evaluation route answers anyone but the expert's creator nothing", () =>
      Effect.gen(function*() {
        const owner = yield* newUser
        const stranger = yield* newUser
        const agent = yield* agentWith(owner.token)
        const dataset = yield* request("POST", "/v1/evals/datasets", { token: owner.token, body: { agent, name: "private" } })
        assert.strictEqual(dataset.status, 201, dataset.text)
        const id = dataset.body.id as string
        const rows = yield* request("POST", `/v1/evals/datasets/${id}/rows`, { token: owner.token, body: [{ input: "secret question", expected: "You said: secret question" }] })
        assert.strictEqual(rows.status, 201, rows.text)
        const run = yield* request("POST", "/v1/evals/runs", { token: owner.token, body: { dataset: id, agent, graders: [{ type: "exact" }] } })
        assert.strictEqual(run.status, 201, run.text)
        const runId = run.body.id as string
        // A run of the owner's that could become a row ("add to dataset"), by id: no one else may add it.
        const ownRun = (yield* request("POST", "/v1/agents/run", { token: owner.token, body: { agent, message: "secret question", background: true } })).body.id as string
        const ownerKey = yield* apiKeyOf(owner)
        // Another account (login and key), and the creator's own end user: none of them is the creator.
        const callers: ReadonlyArray<{ token: string; headers?: Record<string, string> }> = [
          { token: stranger.token },
          { token: yield* apiKeyOf(stranger) },
          { token: ownerKey, headers: { "x-end-user-id": "someone" } }
        ]
        let leaks = 0
        for (const caller of callers) {
          const as = { token: caller.token, ...(caller.headers ? { headers: caller.headers } : {}) }
          const answers = [
            yield* request("GET", `/v1/evals/datasets/${id}`, as),
            yield* request("GET", `/v1/evals/datasets/${id}/rows`, as),
            yield* request("GET", `/v1/evals/runs/${runId}`, as),
            yield* request("GET", `/v1/evals/runs/${runId}/results`, as),
            yield* request("GET", `/v1/evals/compare?a=${runId}&b=${runId}`, as),
            yield* request("DELETE", `/v1/evals/datasets/${id}`, as),
            yield* request("POST", `/v1/evals/datasets/${id}/rows`, { ...as, body: [{ input: "planted" }] }),
            yield* request("POST", `/v1/evals/datasets/${id}/import`, { ...as, body: { format: "promptfoo", content: "tests:\n  - vars: { input: planted }\n" } }),
            yield* request("POST", `/v1/evals/datasets/${id}/rows/from_feedback`, { ...as, body: {} }),
            yield* request("POST", `/v1/evals/datasets/${id}/rows/from_run`, { ...as, body: { run: `${ownRun}` } }),
            yield* request("POST", `/v1/evals/runs/${runId}/cancel`, as),
            yield* request("POST", "/v1/evals/runs", { ...as, body: { dataset: id, agent, graders: [{ type: "exact" }] } }),
            yield* request("POST", "/v1/evals/datasets", { ...as, body: { agent, name: "mine now" } })
          ]
          for (const answer of answers) {
            if (answer.status !== 404) leaks++
            assert.notInclude(answer.text, "secret question")
          }
          for (const path of ["/v1/evals/datasets", `/v1/evals/datasets?agent=${agent}`, "/v1/evals/runs", `/v1/evals/runs?dataset=${id}`]) {
            const list = yield* request("GET", path, as)
            if (list.status === 200) leaks += list.body.data.length
            assert.notInclude(list.text, id)
          }
        }
        assert.strictEqual(leaks, 0)
        // Nothing was planted or deleted: the owner's dataset is as it was.
        const still = yield* request("GET", `/v1/evals/datasets/${id}`, { token: owner.token })
        assert.strictEqual(still.body.rows, 1, still.text)
        // Nor cancelled.
        assert.notStrictEqual((yield* request("GET", `/v1/evals/runs/${runId}`, { token: owner.token })).body.status, "cancelled")
        for (const path of [`/v1/evals/datasets/${id}`, `/v1/evals/runs/${runId}`, "/v1/evals/datasets"]) {
          assertError(yield* request("GET", path), 401, "unauthorized")
        }
      }))

    it.effect("PKCE: a code exchanged with the wrong verifier is invalid_grant and is used up", () =>
      Effect.gen(function*() {
        const owner = yield* newUser
        const app = yield* registerApp(owner.token)
        const server = yield* TestServer
        const verifier = Crypto.randomBytes(32).toString("base64url")
        const consent = yield* Effect.promise(() =>
          fetch(`${server.url}/oauth/authorize`, {
            method: "POST",
            redirect: "manual",
            headers: { authorization: `Bearer ${owner.token}`, "content-type": FORM },
            body: new URLSearchParams({
              response_type: "code",
              client_id: app.clientId,
              redirect_uri: app.redirectUri,
              code_challenge: Crypto.createHash("sha256").update(verifier).digest("base64url"),
              code_challenge_method: "S256",
              decision: "approve"
            })
          })
        )
        const code = new URL(consent.headers.get("location")!).searchParams.get("code")!
        const exchange = (codeVerifier: string) =>
          request("POST", "/oauth/token", {
            raw: new URLSearchParams({
              grant_type: "authorization_code",
              code,
              redirect_uri: app.redirectUri,
              code_verifier: codeVerifier,
              client_id: app.clientId,
              client_secret: app.clientSecret
            }).toString(),
            headers: { "content-type": FORM }
          })
        const wrong = yield* exchange(Crypto.randomBytes(32).toString("base64url"))
        assert.strictEqual(wrong.status, 400, wrong.text)
        assert.strictEqual(wrong.body.error, "invalid_grant")
        const late = yield* exchange(verifier)
        assert.strictEqual(late.body.error, "invalid_grant", late.text)
      }))

    it.effect("idempotency under concurrency: 30 grants with one key credit once", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const before = yield* balanceOf(user.token)
        const body = { amount: 7, idempotency_key: Crypto.randomUUID(), reason: "burst" }
        const replies = yield* Effect.all(
          Array.from({ length: 30 }, () =>
            request("POST", `/internal/wallets/${userIdOf(user.token)}/grants`, { body, headers: internalAuth })),
          { concurrency: "unbounded" }
        )
        for (const reply of replies) assert.strictEqual(reply.status, 200, reply.text)
        assert.strictEqual(yield* balanceOf(user.token), before + 7)
      }))
  })
})
