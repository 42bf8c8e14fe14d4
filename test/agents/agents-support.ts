import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { type Reply, request } from "../support/Client.js"
import { internalAuth } from "../support/TestServer.js"

/**
 * Helpers shared by the agent and marketplace test files (test/agents/*, test/market/*). Everything goes over real
 * HTTP: `/v1/agents` with a login token (or an API key), the review desk at `/internal/*` from 127.0.0.1 with the operator's bearer.
 */

export { assertError, BILLING_ENV as ENV, balanceOf, LIVE, newUser, type User } from "../billing/billing-support.js"

/** `POST /v1/agents`, expecting 201. */
export const createAgent = (token: string, body: Record<string, unknown>) =>
  Effect.gen(function*() {
    const reply = yield* request("POST", "/v1/agents", { token, body })
    assert.strictEqual(reply.status, 201, reply.text)
    return reply.body as { identifier: string } & Record<string, any>
  })

export const getAgent = (token: string, identifier: string) => request("GET", `/v1/agents/${identifier}`, { token })

export const patchAgent = (token: string, identifier: string, body: unknown) =>
  request("PATCH", `/v1/agents/${identifier}`, { token, body })

/** `POST /v1/agents/:identifier/publish`, expecting a pending submission; returns it. */
export const publish = (token: string, identifier: string) =>
  Effect.gen(function*() {
    const reply = yield* request("POST", `/v1/agents/${identifier}/publish`, { token })
    assert.strictEqual(reply.status, 200, reply.text)
    assert.strictEqual(reply.body.submission.status, "pending", reply.text)
    return reply.body.submission as { id: string; version: number; status: "pending" }
  })

export const approve = (submissionId: string, headers?: Record<string, string>) =>
  request("POST", `/internal/reviews/${submissionId}/approve`, { headers: { ...internalAuth, ...headers } })

export const reject = (submissionId: string, reason: string) =>
  request("POST", `/internal/reviews/${submissionId}/reject`, { body: { reason }, headers: internalAuth })

/** Approves, expecting 200. */
export const approved = (submissionId: string) =>
  Effect.gen(function*() {
    const reply = yield* approve(submissionId)
    assert.strictEqual(reply.status, 200, reply.text)
    return reply.body
  })

/** A draft published and approved: live in the market. */
export const liveAgent = (token: string, body: Record<string, unknown>) =>
  Effect.gen(function*() {
    const agent = yield* createAgent(token, body)
    const submission = yield* publish(token, agent.identifier)
    yield* approved(submission.id)
    return agent.identifier
  })

/** `GET /api/market/agents` with these query parameters (no login). */
export const browse = (query: Record<string, string | number> = {}) =>
  request("GET", `/api/market/agents?${new URLSearchParams(Object.entries(query).map(([k, v]): [string, string] => [k, String(v)]))}`)

/** Every identifier the market lists for `keyword`, across all pages. */
export const marketIdentifiers = (keyword: string) =>
  Effect.gen(function*() {
    const found: Array<string> = []
    for (let page = 1; page < 100; page++) {
      const reply: Reply = yield* browse({ keyword, page, pageSize: 100 })
      assert.strictEqual(reply.status, 200, reply.text)
      found.push(...reply.body.data.map((item: { identifier: string }) => item.identifier))
      if (page * 100 >= reply.body.total) return found
    }
    throw new Error("the market never ended")
  })

export const notificationsOf = (token: string) =>
  Effect.gen(function*() {
    const reply = yield* request("GET", "/api/notifications", { token })
    assert.strictEqual(reply.status, 200, reply.text)
    return reply.body as {
      data: Array<{ id: string; kind: string; title: string; body: string; data: any; read: boolean; read_at: string | null }>
      has_more: boolean
      unread: number
    }
  })

/** A word no other test uses, to find one test's agents in a shared market. */
export const uniqueWord = () => `w${Math.random().toString(36).slice(2, 10)}`
