import type * as Prompt from "@effect/ai/Prompt"
import { Effect, Option, Stream } from "effect"
import { type AgentConfig, defaultBilling } from "../agents/Agent.js"
import { AgentsRepo } from "../agents/Repo.js"
import { InvalidRequest, NotFound } from "../platform/Errors.js"
import type { UserId } from "../platform/Ids.js"
import type { Micros } from "../platform/Money.js"
import { RunId } from "../runtime/Domain.js"
import type { InternalEvent } from "../runtime/Events.js"
import { ModelCatalog } from "../runtime/models/Catalog.js"
import type { RunnableAgent, RunRequest, RunResult } from "../runtime/Run.js"
import { RunEngine } from "../runtime/RunEngine.js"
import type { Partition } from "../identity/Partition.js"
import type { CallerIdentity } from "../identity/Domain.js"
import { mayRun, mayRunVersion, ownedBy, runsDraft } from "./Policy.js"

/**
 * Stateless runs: who may run what, for whom, and paid by whom. A caller runs an agent's published version; its
 * owner runs the draft (what an IDE's "test" means). Files and memory belong to the caller's account and, with an
 * API key, to its `X-End-User-Id`.
 */

/**
 * The partition a caller acts in: the account and the `X-End-User-Id` it names ('' when none: a login or OAuth
 * caller acting for itself). The same rule as files and environments (src/files/Repo.ts).
 */
/** A bare model as an agent of no one: no tools, no instructions beyond the caller's own system messages. */
const bareModel = (modelId: string, ownerId: UserId): RunnableAgent => {
  const config: AgentConfig = {
    name: modelId,
    description: "",
    category: "other",
    instructions: "",
    model: modelId,
    tools: [],
    subagents: [],
    opening_message: "",
    case_demos: [],
    billing: defaultBilling
  }
  return { id: null, identifier: modelId, ownerId, version: null, config }
}

export class Runs extends Effect.Service<Runs>()("atrium/runs/Runs", {
  effect: Effect.gen(function*() {
    const agents = yield* AgentsRepo
    const engine = yield* RunEngine
    const catalog = yield* ModelCatalog

    /** The agent `identifier` as `userId` may run it: the owner's draft, anyone else's published version. */
    const runnable = (identifier: string, userId: UserId) =>
      Effect.gen(function*() {
        const agent = yield* agents.byIdentifier(identifier)
        if (Option.isNone(agent)) return Option.none<RunnableAgent>()
        const { draft, id, ownerId, publishedVersion } = agent.value
        // Trace capture is the expert's live setting, not its version's (docs/traces.md).
        const traceContent = draft.trace_content === true
        if (runsDraft(userId, agent.value)) return Option.some<RunnableAgent>({ id, identifier, ownerId, version: null, config: draft, traceContent })
        if (!mayRun(userId, agent.value) || publishedVersion === null) return Option.none<RunnableAgent>()
        const config = yield* agents.version(id, publishedVersion)
        return Option.map(config, (config): RunnableAgent => ({ id, identifier, ownerId, version: publishedVersion, config, traceContent }))
      })

    /** A published version of `identifier` as its owner runs it (an eval run of that version); none for anyone else. */
    const ownVersion = (identifier: string, ownerId: UserId, version: number) =>
      Effect.gen(function*() {
        const agent = yield* agents.byIdentifier(identifier)
        if (Option.isNone(agent) || !mayRunVersion(ownerId, agent.value)) return Option.none<RunnableAgent>()
        const { draft, id } = agent.value
        const config = yield* agents.version(id, version)
        return Option.map(config, (config): RunnableAgent => ({ id, identifier, ownerId, version, config, traceContent: draft.trace_content === true }))
      })

    const resolveSubagent = (identifier: string, payer: Partition) => runnable(identifier, payer.accountId)

    /**
     * What a run that names `name` runs, read again where it runs (a background run's workflow, on any runner): the
     * agent as `accountId` may run it, else a bare model of the catalog (a background `/v1/responses` may name one).
     */
    const runnableOrModel = (name: string, accountId: UserId) =>
      Effect.flatMap(runnable(name, accountId), (agent) =>
        Option.isSome(agent)
          ? Effect.succeed(agent)
          : Effect.map(catalog.find(name), Option.map((model) => bareModel(model.id, accountId))))

    /** The agent a run names; 404 before any stream starts (spec: an unknown agent is a JSON error). */
    const agentFor = Effect.fn("Runs.agentFor")(function*(identifier: string, caller: CallerIdentity) {
      const agent = yield* runnable(identifier, caller.userId)
      if (Option.isNone(agent)) return yield* new NotFound({ message: `No agent ${identifier}.` })
      return agent.value
    })

    /** `/v1/chat/completions` names an agent or a model from `GET /v1/models`. */
    const agentOrModel = Effect.fn("Runs.agentOrModel")(function*(name: string, caller: CallerIdentity) {
      const agent = yield* runnable(name, caller.userId)
      if (Option.isSome(agent)) return agent.value
      const model = yield* catalog.find(name)
      if (Option.isSome(model)) return bareModel(model.value.id, caller.userId)
      return yield* new NotFound({ message: `No agent or model ${name} (see GET /v1/agents and GET /v1/models).` })
    })

    const request = (
      caller: CallerIdentity,
      agent: RunnableAgent,
      message: string,
      options: { budget?: Micros | undefined; history?: ReadonlyArray<Prompt.MessageEncoded> | undefined }
    ): RunRequest => ({
      runId: RunId.random(),
      agent,
      payer: ownedBy(caller),
      history: options.history ?? [],
      message,
      budget: Option.fromNullable(options.budget),
      sessionId: Option.none(),
      workspace: "",
      parentRunId: Option.none(),
      depth: 0
    })

    /** A run as events; interrupting the stream (a client that left) cancels the run. */
    const stream = (run: RunRequest): Stream.Stream<InternalEvent> => engine.stream(run, resolveSubagent)

    /** A run to its end, each event told to `emit` as it happens (a stream written by pushes: `Sse.written`). */
    const execute = (run: RunRequest, emit: (event: InternalEvent) => void) =>
      engine.execute(run, (event) => Effect.sync(() => emit(event)), resolveSubagent)

    /** A run to its end: the result and the events it told, for answers that are not streamed. */
    const collect = (run: RunRequest) =>
      Effect.gen(function*() {
        const events: Array<InternalEvent> = []
        const result: RunResult = yield* engine.execute(run, (event) => Effect.sync(() => void events.push(event)), resolveSubagent)
        return { result, events }
      })

    const invalid = (message: string) => new InvalidRequest({ message })

    return { runnable, ownVersion, runnableOrModel, resolveSubagent, agentFor, agentOrModel, request, stream, execute, collect, invalid } as const
  }),
  dependencies: [AgentsRepo.Default, RunEngine.Default, ModelCatalog.Default]
}) {}
