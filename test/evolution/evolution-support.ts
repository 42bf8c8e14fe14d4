import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { request } from "../support/Client.js"
import { TestServer } from "../support/TestServer.js"

/** Helpers of the evolution and engine-tool tests: runs over `/v1/agents/run`, and what the database recorded. */

export interface RunReply {
  readonly id: string
  readonly status: "completed" | "failed"
  readonly output: string
  readonly credits_charged: number
  readonly error: { code: string; message: string } | null
  readonly events: ReadonlyArray<{ type: string; [key: string]: any }>
}

/** `POST /v1/agents/run` with `stream: false`, as `token`'s holder; expects 200. */
export const runOnce = (token: string, agent: string, message: string, extra: Record<string, unknown> = {}) =>
  Effect.gen(function*() {
    const reply = yield* request("POST", "/v1/agents/run", { token, body: { agent, message, stream: false, ...extra } })
    assert.strictEqual(reply.status, 200, reply.text)
    return reply.body as RunReply
  })

export const eventTypes = (run: { readonly events: ReadonlyArray<{ type: string }> }) => run.events.map((e) => e.type)

/** The `runs` row of a run. */
export const runRow = (runId: string) =>
  Effect.gen(function*() {
    const server = yield* TestServer
    const rows = yield* server.query(
      `SELECT id, agent_id, agent_version, payer_id, status, failure_code, tools_denied, credits_charged::text AS credits
       FROM runs WHERE id = '${runId.replace(/'/g, "")}'`
    )
    assert.strictEqual(rows.length, 1, `run ${runId} recorded`)
    return rows[0] as Record<string, any>
  })

/** The configuration of version `version` of the agent `identifier`, straight from the database. */
export const versionConfig = (identifier: string, version: number) =>
  Effect.gen(function*() {
    const server = yield* TestServer
    const rows = yield* server.query(
      `SELECT v.config FROM agent_versions v JOIN agents a ON a.id = v.agent_id
       WHERE a.identifier = '${identifier.replace(/'/g, "")}' AND v.version = ${Number(version)}`
    )
    assert.strictEqual(rows.length, 1)
    const config = rows[0]!.config
    return (typeof config === "string" ? JSON.parse(config) : config) as Record<string, any>
  })

export const suggestionsOf = (token: string, identifier: string) =>
  request("GET", `/v1/agents/${identifier}/evolution/suggestions`, { token })

export const acceptSuggestion = (token: string, id: string) =>
  request("POST", `/v1/evolution/suggestions/${id}/accept`, { token })

export const dismissSuggestion = (token: string, id: string) =>
  request("POST", `/v1/evolution/suggestions/${id}/dismiss`, { token })

export const statsOf = (token: string, identifier: string) =>
  request("GET", `/v1/agents/${identifier}/evolution/stats`, { token })

/** The one suggestion of `kind` (and `subject`) in a list. */
export const findSuggestion = (list: { data: ReadonlyArray<any> }, kind: string, subject?: string) => {
  const found = list.data.filter((s) => s.kind === kind && (subject === undefined || s.subject === subject))
  assert.strictEqual(found.length, 1, `one ${kind}/${subject ?? "*"} in ${JSON.stringify(list.data.map((s) => [s.kind, s.subject, s.status]))}`)
  return found[0]!
}
