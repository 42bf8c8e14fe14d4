import { Effect, Layer, Option } from "effect"
import { AgentsRepo } from "../agents/Repo.js"
import type { UserId } from "../platform/Ids.js"
import { RunnableAgents } from "../runtime/Ports.js"
import { Runs } from "./Runs.js"

/**
 * `GET /v1/models` lists the agents a caller can name as `model` besides the models (docs/runs.md): the caller's own
 * (their drafts run) and the most recently published ones, so OpenAI clients that pick from the model list find
 * them and `models.retrieve(agent)` answers.
 */

/** How many published agents the list carries: the newest, enough for a picker; any other still runs by name. */
const PUBLISHED_LISTED = 200

export const AgentModelsLive = Layer.effect(
  RunnableAgents,
  Effect.gen(function*() {
    const agents = yield* AgentsRepo
    const runs = yield* Runs
    return {
      list: (userId: UserId) =>
        Effect.gen(function*() {
          const own = yield* agents.byOwner(userId)
          const published = yield* agents.published({ offset: 0, limit: PUBLISHED_LISTED })
          const seen = new Set<string>()
          const listed = [
            ...own.map((agent) => ({ identifier: agent.identifier, description: agent.draft.description, model: agent.draft.model })),
            ...published.agents.map((agent) => ({ identifier: agent.identifier, description: agent.config.description, model: agent.config.model }))
          ]
          return listed.filter((agent) => !seen.has(agent.identifier) && seen.add(agent.identifier) !== undefined)
        }),
      find: (identifier: string, userId: UserId) =>
        Effect.map(runs.runnable(identifier, userId), Option.map((agent) => ({
          identifier: agent.identifier,
          description: (agent.config as { description?: string }).description ?? "",
          model: agent.config.model
        })))
    }
  })
).pipe(Layer.provide([AgentsRepo.Default, Runs.Default]))
