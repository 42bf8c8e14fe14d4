import type * as Prompt from "@effect/ai/Prompt"
import { Duration, Effect, Option } from "effect"
import { type AgentConfig, type CATEGORIES, defaultBilling } from "../agents/Agent.js"
import { Agents } from "../agents/Agents.js"
import { InvalidRequest, NotFound } from "../platform/Errors.js"
import type { AgentId, UserId } from "../platform/Ids.js"
import { RunId } from "../runtime/Domain.js"
import { toNumber } from "../platform/Money.js"
import { BUILTIN_MODEL_ID } from "../runtime/models/Builtin.js"
import type { RunnableAgent, RunResult } from "../runtime/Run.js"
import { RunEngine } from "../runtime/RunEngine.js"
import {
  agentLine,
  applyRequests,
  checkMaterials,
  digest,
  type Draft,
  distillerPrompt,
  firstAnswer,
  firstDraft,
  laterAnswer,
  LIMITS,
  type Material,
  readMessage
} from "./Distiller.js"
import { DistillationConfig } from "./Config.js"
import { type DistillationRow, DistillationsRepo, type TranscriptEntry } from "./Repo.js"
import { foldRun, noProgress, type ProgressReport } from "./RunFold.js"
import { partitionOf } from "../identity/Partition.js"
import { DistillationFailed, DistillationTimedOut, DistillationBusy, DistillationId } from "./Domain.js"
import type { CallerIdentity } from "../identity/Domain.js"
import { ownedBy } from "./Policy.js"

export interface StartInput {
  readonly topic: string
  readonly materials: ReadonlyArray<Material>
}

const DISTILLER_IDENTIFIER = "atrium-distiller"

const historyOf = (messages: ReadonlyArray<TranscriptEntry>): Array<Prompt.MessageEncoded> =>
  messages.map((m): Prompt.MessageEncoded =>
    m.role === "user"
      ? { role: "user", content: [{ type: "text", text: m.content }] }
      : { role: "assistant", content: [{ type: "text", text: m.content }] }
  )

const runView = (runId: RunId, result: RunResult) => ({
  id: runId,
  status: result.status,
  credits_charged: toNumber(result.creditsCharged),
  usage: { input_tokens: result.inputTokens, output_tokens: result.outputTokens }
})

export const distillationView = (row: DistillationRow) => ({
  sessionId: row.id,
  topic: row.topic,
  draft: row.draft,
  agent: row.agentIdentifier === null ? null : { identifier: row.agentIdentifier },
  materials: row.materials.map((m) => ({ filename: m.filename, bytes: Buffer.byteLength(m.content, "utf8") })),
  turns: row.turns,
  created_at: row.createdAt.toISOString(),
  updated_at: row.updatedAt.toISOString()
})

/**
 * Distillation (spec 4.10 rule 6): a conversation of a creator with the platform's distiller, which reads source
 * materials and drafts an agent from them, takes requests for changes, and creates the agent draft when asked. Each
 * message is one run of the distiller on the run engine, paid by the caller like any run; the draft itself is kept
 * by the platform (docs/distillation.md). Only the account that started a distillation can see or continue it.
 */
export class Distillations extends Effect.Service<Distillations>()("atrium/distillation/Distillations", {
  effect: Effect.gen(function*() {
    const repo = yield* DistillationsRepo
    const engine = yield* RunEngine
    const agents = yield* Agents
    const { model, timeout } = yield* DistillationConfig
    /** The builtin model only echoes: the platform's own wording is the answer then. */
    const wordsItself = model !== BUILTIN_MODEL_ID

    /** The distiller as the run engine sees it: an agent of no one's, run for (and paid by) the caller. */
    const distiller = (ownerId: UserId, topic: string, materials: ReadonlyArray<Material>, draft: Draft): RunnableAgent => {
      const config: AgentConfig = {
        name: "Distiller",
        description: "The platform's distiller",
        category: "other",
        instructions: distillerPrompt(topic, materials, draft),
        model,
        tools: [],
        subagents: [],
        opening_message: "",
        case_demos: [],
        billing: defaultBilling
      }
      return { id: null, identifier: DISTILLER_IDENTIFIER, ownerId, version: null, config }
    }

    /** One message to the distiller, run to its end within the limit. */
    const turn = (
      caller: CallerIdentity,
      agent: RunnableAgent,
      history: ReadonlyArray<TranscriptEntry>,
      message: string,
      progress: ProgressReport
    ) =>
      Effect.gen(function*() {
        const runId = RunId.random()
        const folded = yield* foldRun(engine, {
          runId,
          agent,
          payer: partitionOf(caller),
          history: historyOf(history),
          message,
          budget: Option.none(),
          sessionId: Option.none(),
          workspace: "",
          parentRunId: Option.none(),
          depth: 0
        }, { timeout, progress })
        if (folded._tag === "TimedOut") {
          return yield* new DistillationTimedOut({
            message: `The distiller did not answer within ${Duration.format(timeout)} (DISTILLATION_TIMEOUT); the run was ` +
              "stopped. Try again, perhaps with fewer or shorter materials."
          })
        }
        const { result } = folded
        if (result.status === "failed") {
          const failure = Option.getOrElse(result.failure, () => ({ code: "run_failed", message: "The run failed." }))
          return yield* new DistillationFailed({
            code: failure.code,
            message: `The distiller's run failed (${failure.code}): ${failure.message}`
          })
        }
        return { runId, result }
      })

    const now = () => new Date().toISOString()

    const start = Effect.fn("Distillations.start")(function*(
      caller: CallerIdentity,
      input: StartInput,
      progress: ProgressReport = noProgress
    ) {
      const topic = input.topic.trim()
      if (topic.length === 0 || topic.length > LIMITS.topic) {
        return yield* new InvalidRequest({ message: `Invalid request: topic must be 1-${LIMITS.topic} characters.` })
      }
      const problem = checkMaterials(input.materials)
      if (problem !== undefined) return yield* new InvalidRequest({ message: `Invalid request: ${problem}` })
      const materials = input.materials.map((m) => ({ filename: m.filename.trim(), content: m.content }))
      const digests = materials.map((m) => digest(topic, m))
      const draft = firstDraft(topic, materials, digests)
      const message = `Distil an expert on "${topic}" from ${materials.length === 1 ? "this file" : `these ${materials.length} files`}: ` +
        `${materials.map((m) => m.filename).join(", ")}.`
      const { result, runId } = yield* turn(caller, distiller(caller.userId, topic, materials, draft), [], message, progress)
      const answer = wordsItself && result.output.trim().length > 0 ? result.output : firstAnswer(topic, digests, draft)
      const row = yield* repo.insert({
        id: DistillationId.random(),
        ownerId: caller.userId,
        topic,
        materials,
        draft,
        messages: [
          { role: "user", content: message, at: now() },
          { role: "assistant", content: answer, at: now(), run_id: runId }
        ]
      })
      return { ...distillationView(row), answer, run: runView(runId, result) }
    })

    const notFound = (id: DistillationId) => new NotFound({ message: `Distillation ${id} not found.` })

    const continueWith = Effect.fn("Distillations.continue")(function*(
      caller: CallerIdentity,
      input: { readonly sessionId: DistillationId; readonly message: string },
      progress: ProgressReport = noProgress
    ) {
      const message = input.message
      if (message.trim().length === 0 || message.length > LIMITS.message) {
        return yield* new InvalidRequest({ message: `Invalid request: message must be 1-${LIMITS.message} characters.` })
      }
      const claim = yield* repo.claim(input.sessionId, ownedBy(caller), timeout)
      if (claim._tag === "Missing") return yield* notFound(input.sessionId)
      if (claim._tag === "Busy") {
        return yield* new DistillationBusy({
          message: `Distillation ${input.sessionId} is answering another message; send this one when that is done.`
        })
      }
      const row = claim.row
      return yield* Effect.gen(function*() {
        const requests = readMessage(message)
        const outcome = applyRequests(row.draft, requests)
        const digests = row.materials.map((m) => digest(row.topic, m))
        const { result, runId } = yield* turn(
          caller,
          distiller(caller.userId, row.topic, row.materials, outcome.draft),
          row.messages,
          message,
          progress
        )
        let agent: { identifier: string; id: AgentId; created: boolean } | null = null
        if (requests.create) {
          // The category was checked against the list when it was set (`applyRequests`, `categoryOf`).
          const fields = { ...outcome.draft, category: outcome.draft.category as (typeof CATEGORIES)[number] }
          const written = row.agentIdentifier === null
            ? yield* agents.create(caller.userId, fields)
            : yield* agents.update(row.agentIdentifier, caller.userId, fields)
          agent = { identifier: written.identifier, id: written.id, created: row.agentIdentifier === null }
        }
        const platformAnswer = laterAnswer(outcome, outcome.draft, digests, agent, row.agentIdentifier)
        const answer = wordsItself && result.output.trim().length > 0
          ? agent === null ? result.output : `${result.output}\n\n${agentLine(agent)}`
          : platformAnswer
        const saved = yield* repo.finish(row.id, caller.userId, {
          draft: outcome.draft,
          messages: [
            ...row.messages,
            { role: "user", content: message, at: now() },
            { role: "assistant", content: answer, at: now(), run_id: runId }
          ],
          agentId: agent?.id ?? row.agentId
        })
        return {
          ...distillationView(saved),
          agent: saved.agentIdentifier === null ? null : { identifier: saved.agentIdentifier, created: agent?.created ?? false },
          answer,
          run: runView(runId, result)
        }
      }).pipe(Effect.ensuring(repo.release(row.id)))
    })

    /** The whole conversation: draft, transcript and the agent it created. */
    const get = Effect.fn("Distillations.get")(function*(caller: CallerIdentity, id: DistillationId) {
      const row = yield* repo.byId(id, ownedBy(caller))
      if (Option.isNone(row)) return yield* notFound(id)
      return { ...distillationView(row.value), messages: row.value.messages }
    })

    const list = Effect.fn("Distillations.list")(function*(caller: CallerIdentity) {
      const rows = yield* repo.byOwner(ownedBy(caller))
      return { data: rows.map(distillationView), has_more: false }
    })

    return { start, continue: continueWith, get, list, timeout } as const
  }),
  dependencies: [DistillationConfig.Default, DistillationsRepo.Default, RunEngine.Default, Agents.Default]
}) {}
