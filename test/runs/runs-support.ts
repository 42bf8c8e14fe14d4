import { Effect } from "effect"
import { createAgent, ENV as AGENTS_ENV } from "../agents/agents-support.js"

export { approved, createAgent, liveAgent, newUser, publish, type User, LIVE, balanceOf, assertError } from "../agents/agents-support.js"

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
