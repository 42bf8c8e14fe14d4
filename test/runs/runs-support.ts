import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { createAgent, ENV as AGENTS_ENV } from "../agents/agents-support.js"
import { micros } from "../billing/billing-support.js"
import { request } from "../support/Client.js"
import { pollUntil } from "../support/Poll.js"
import { names, openStream, type ParsedStream, streamOf, type StreamEvent } from "../support/Sse.js"

export { approved, createAgent, liveAgent, newUser, publish, type User, LIVE, balanceOf, assertError } from "../agents/agents-support.js"
export { apiKeyOf, assertLedgerAddsUp, consume, freshKey, fullLedger, micros, walletOf } from "../billing/billing-support.js"

/** Runs tests wait for approvals that expire quickly, so the timeout path is testable. */
export const ENV = { ...AGENTS_ENV, APPROVAL_TIMEOUT: "2 seconds" } as const

/** An agent of `token`'s with these tools (name -> policy) and fields. */
export const agentWith = (
  token: string,
  tools: Record<string, "allow" | "ask" | "deny"> = {},
  fields: Record<string, unknown> = {}
) =>
  Effect.map(
    createAgent(token, {
      name: `Runner ${Math.random().toString(36).slice(2, 8)}`,
      instructions: "Answer briefly.",
      tools: Object.entries(tools).map(([name, permission]) => ({ name, permission })),
      ...fields
    }),
    (agent) => agent.identifier
  )

/** Who calls: a login token, or an API key with its `X-End-User-Id`. */
export interface As {
  readonly token: string
  readonly endUser?: string
}

const headersOf = (as: As): Record<string, string> => as.endUser === undefined ? {} : { "x-end-user-id": as.endUser }

/** `POST /v1/agents/run` read to its end; the grammar of the stream is checked (`parseStream`). */
export const runAgent = (as: As, agent: string, message: string, extra: Record<string, unknown> = {}) =>
  streamOf("/v1/agents/run", { token: as.token, headers: headersOf(as), body: { agent, message, ...extra } })

/** `POST /v1/agents/run` left open, for tests that act in the middle of a run. */
export const openRun = (as: As, agent: string, message: string, extra: Record<string, unknown> = {}) =>
  openStream("/v1/agents/run", { token: as.token, headers: headersOf(as), body: { agent, message, ...extra } })

/** `POST /v1/approvals/:id`. */
export const answer = (as: As, approvalId: string, body: { decision: "approve" | "deny"; reason?: string }) =>
  request("POST", `/v1/approvals/${approvalId}`, { token: as.token, headers: headersOf(as), body })

/** The payloads of the events named `name`. */
export const payloads = (stream: ParsedStream, name: string): Array<Record<string, any>> =>
  stream.events.filter((event) => event.event === name).map((event) => event.data)

export const only = (stream: ParsedStream, name: string): Record<string, any> => {
  const found = payloads(stream, name)
  assert.strictEqual(found.length, 1, `one ${name} in ${names(stream).join(", ")}`)
  return found[0]!
}

export const last = (stream: ParsedStream): StreamEvent => stream.events[stream.events.length - 1]!

/** `expected` appear in this order (each after the one before), other events in between allowed. */
export const assertInOrder = (stream: ParsedStream, expected: ReadonlyArray<string>, from = 0) => {
  const seen = names(stream)
  let at = from
  for (const name of expected) {
    const index = seen.indexOf(name, at)
    assert.isAtLeast(index, 0, `${name} after position ${at} in ${seen.join(", ")}`)
    at = index + 1
  }
}

/** The sum of the `usage.token` credits of a stream, in micro-credits. */
export const tokenMicros = (stream: ParsedStream) =>
  payloads(stream, "usage.token").reduce((sum, usage) => sum + micros(usage.credits), 0)

/** The stream of a run that completed, with every usage.token credit adding up to credits_charged. */
export const assertCompleted = (stream: ParsedStream) => {
  const end = last(stream)
  assert.strictEqual(end.event, "run.completed", names(stream).join(", "))
  assert.isTrue(stream.done)
  return end.data
}

/** The tool output a `/tool` run reported (its one `tool_call.result`). */
export const resultOf = (stream: ParsedStream) => only(stream, "tool_call.result").output

/** The JSON directive of the builtin model that calls a tool. */
export const toolDirective = (name: string, args: unknown = {}) => `/tool ${name} ${JSON.stringify(args)}`

export { names, openStream, streamOf }

/** A chat completions stream (OpenAI's wire format): `data: <json>` blocks or `: ping`, ending with `data: [DONE]`. */
export const parseChatStream = (raw: string) => {
  const blocks = raw.split("\n\n")
  assert.strictEqual(blocks.pop(), "", "a stream ends with a blank line")
  const chunks: Array<Record<string, any>> = []
  let done = false
  let pings = 0
  for (const [index, block] of blocks.entries()) {
    assert.isFalse(done, "nothing follows data: [DONE]")
    if (block === "retry: 1000") {
      assert.strictEqual(index, 0, "retry: comes once, first")
      continue
    }
    if (block === ": ping") {
      pings++
      continue
    }
    if (block === "data: [DONE]") {
      done = true
      continue
    }
    assert.match(block, /^data: \{.*\}$/, `one data line of JSON: ${JSON.stringify(block)}`)
    chunks.push(JSON.parse(block.slice("data: ".length)))
  }
  assert.isTrue(done, "the stream ends with data: [DONE]")
  return { chunks, pings }
}

/**
 * A run's record (`GET /v1/runs/:id`, or `/v1/responses/:id` with `path`), read again until `until` holds: a background
 * run goes on alone, and only its record says how far it got.
 */
export const pollRun = (
  key: string,
  id: string,
  until: (run: Record<string, any>) => boolean,
  options: { readonly headers?: Record<string, string>; readonly path?: string; readonly within?: number } = {}
) =>
  pollUntil(
    Effect.map(request("GET", `${options.path ?? "/v1/runs"}/${id}`, { token: key, headers: options.headers ?? { "x-end-user-id": "u1" } }), (reply) => {
      assert.strictEqual(reply.status, 200, reply.text)
      return reply.body as Record<string, any>
    }),
    until,
    `run ${id} in the state asked for`,
    { within: options.within ?? 30_000 }
  )
