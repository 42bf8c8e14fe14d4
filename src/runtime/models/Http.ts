import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect, Layer, Option } from "effect"
import { AtriumApi } from "../../Api.js"
import { AuthenticationLive } from "../../identity/Authentication.js"
import { type AgentModel, RunnableAgents } from "../Ports.js"
import { ModelCatalog } from "./Catalog.js"
import { NotFound } from "../../platform/Errors.js"
import { pageOf } from "../../platform/http/Lists.js"
import { Caller } from "../../identity/Domain.js"

export const ModelsHttp = HttpApiBuilder.group(AtriumApi, "models", (handlers) =>
  Effect.gen(function*() {
    const catalog = yield* ModelCatalog
    const agents = yield* RunnableAgents
    const view = (model: Effect.Effect.Success<typeof catalog.list>[number]) => ({
      id: model.id,
      object: "model" as const,
      owned_by: model.provider === "builtin" ? "atrium" : model.provider,
      provider: model.provider,
      provider_kind: model.kind,
      description: model.description,
      context_window: model.contextWindow,
      capabilities: model.capabilities,
      pricing: {
        unit: "1k_tokens" as const,
        input: Number(model.inputPer1k),
        output: Number(model.outputPer1k),
        cached_input: Number(model.cachedInputPer1k)
      }
    })
    /** An agent as a model entry: its identifier, with the rates and context window of the model it runs on. */
    const agentView = (models: ReadonlyArray<Effect.Effect.Success<typeof catalog.list>[number]>) => (agent: AgentModel) => {
      const model = models.find((entry) => entry.id === agent.model) ?? models[0]!
      return { ...view(model), id: agent.identifier, owned_by: "agent", provider: "agent", description: agent.description }
    }
    const retrieve = (id: string) =>
      Effect.gen(function*() {
        const model = yield* catalog.find(id)
        if (Option.isSome(model)) return view(model.value)
        const agent = yield* agents.find(id, (yield* Caller).userId)
        if (Option.isSome(agent)) return agentView(yield* catalog.list)(agent.value)
        return yield* new NotFound({ message: `No model or agent ${id} (see GET /v1/models).` })
      })
    return handlers
      .handle("list", ({ urlParams }) =>
        Effect.gen(function*() {
          const caller = yield* Caller
          const models = yield* catalog.list
          const runnable = yield* agents.list(caller.userId)
          const all = [...models.map(view), ...runnable.filter((a) => !models.some((m) => m.id === a.identifier)).map(agentView(models))]
          return { object: "list" as const, ...(yield* pageOf(all, urlParams, (model) => model.id)) }
        }))
      .handle("retrieve", ({ path }) => retrieve(path.id))
      .handle("retrieveQualified", ({ path }) => retrieve(`${path.provider}/${path.model}`))
  })).pipe(Layer.provide([ModelCatalog.Default, AuthenticationLive]))
