import { Effect } from "effect"
import { Agents } from "../agents/Agents.js"
import { errorType } from "../platform/Errors.js"
import { toNumber } from "../platform/Money.js"
import { McpRepo } from "./Repo.js"
import { type McpCaller, ToolFailure } from "./Tool.js"

/**
 * What the MCP resources read beyond the tools (docs/mcp.md, Resources): an expert's versions and its last runs, for
 * its owner only (anyone else: `not_found`, or `forbidden` for a published expert of someone else's, as the tools
 * answer). A version shows what the tools show of an expert (rule 2: no prompt layers, subagents or case demos);
 * a run its outcome, and what it cost and why it failed only when the caller paid for it (others' runs are theirs).
 */

/** How many of an expert's runs its `runs` resource shows, newest first. */
export const LAST_RUNS = 20

const proxy = <A, E extends { readonly _tag: string; readonly message: string }, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.mapError(effect, (error) => new ToolFailure({ type: errorType(error._tag), message: error.message }))

export class McpResources extends Effect.Service<McpResources>()("atrium/mcp/McpResources", {
  effect: Effect.gen(function*() {
    const repo = yield* McpRepo
    const agents = yield* Agents

    const versions = (identifier: string, caller: McpCaller) =>
      Effect.gen(function*() {
        const agent = yield* proxy(agents.owned(identifier, caller.userId))
        const rows = yield* repo.versions(agent.id)
        return {
          identifier,
          published_version: agent.publishedVersion,
          data: rows.map((row) => {
            const config = row.config as {
              name: string
              description: string
              category: string
              model?: string
              billing: { type: "FREE" | "UNLOCK"; price: string | number; free_trial_per_user: number; allow_trial: boolean }
              tools?: ReadonlyArray<{ name: string }>
            }
            return {
              identifier,
              version: row.version,
              published: row.version === agent.publishedVersion,
              name: config.name,
              description: config.description,
              category: config.category,
              model: config.model ?? null,
              billing: { ...config.billing, price: Number(config.billing.price) },
              tools: (config.tools ?? []).map((tool) => tool.name),
              created_at: row.createdAt.toISOString(),
              // A version made by an accepted evolution suggestion went live without review: no submission.
              submission: row.submissionId === null ? null : {
                id: row.submissionId,
                status: row.submissionStatus!,
                reason: row.reason,
                submitted_at: row.submittedAt!.toISOString(),
                decided_at: row.decidedAt === null ? null : row.decidedAt.toISOString()
              }
            }
          })
        }
      })

    const runs = (identifier: string, caller: McpCaller) =>
      Effect.gen(function*() {
        const agent = yield* proxy(agents.owned(identifier, caller.userId))
        const rows = yield* repo.lastRuns(agent.id, LAST_RUNS + 1)
        return {
          identifier,
          data: rows.slice(0, LAST_RUNS).map((row) => {
            const yours = row.payerId === caller.userId
            return {
              id: row.id,
              version: row.agentVersion,
              status: row.status,
              error_code: row.failureCode,
              error_message: yours ? row.failureMessage : null,
              by_you: yours,
              in_session: row.sessionId !== null,
              usage: { input_tokens: row.inputTokens, output_tokens: row.outputTokens },
              credits_charged: yours ? toNumber(BigInt(row.creditsCharged)) : null,
              created_at: row.createdAt.toISOString(),
              finished_at: row.finishedAt === null ? null : row.finishedAt.toISOString()
            }
          }),
          has_more: rows.length > LAST_RUNS
        }
      })

    return { versions, runs } as const
  }),
  dependencies: [Agents.Default, McpRepo.Default]
}) {}
