import { Effect, Option } from "effect"
import { type AgentConfig, defaultBilling } from "../agents/Agent.js"
import { type AgentRow, AgentsRepo } from "../agents/Repo.js"
import { foldRun, noProgress } from "../distillation/RunFold.js"
import { duration } from "../platform/Config.js"
import { Forbidden, InvalidRequest, NotFound } from "../platform/Errors.js"
import { SubmissionId } from "../agents/Domain.js"
import type { UserId } from "../platform/Ids.js"
import { RunId } from "../runtime/Domain.js"
import { ModelCatalog } from "../runtime/models/Catalog.js"
import type { RunnableAgent } from "../runtime/Run.js"
import { RunEngine } from "../runtime/RunEngine.js"
import { SuggestionId } from "./Domain.js"
import { EvolutionRepo, type SuggestionRow } from "./Repo.js"
import { evolutionAccess, isSuggestionOf } from "./Policy.js"
import { allowed } from "../platform/Policy.js"
import {
  alternativesOf,
  applies,
  applyChange,
  type Candidate,
  derive,
  type Kind,
  type Outcomes,
  withinLimits
} from "./Suggestions.js"

/**
 * Self-evolution (spec 4.10, rule 9): improvement suggestions for an agent, derived from its recorded runs (the
 * `runs` table, which stateless runs, tests and sessions all write), shown to its owner, and applied at once when
 * accepted. Only the agent's owner sees or decides its suggestions.
 */

/** Who wrote a suggestion's text: the platform's templates, or the agent's own model (`model:<id>`). */
const TEMPLATE = "template"

/** The most a model-drafted text may cost its owner (1 credit), and its length. */
const DRAFT_BUDGET = 1_000_000n
const DRAFT_MAX_CHARS = 1000

const DRAFTER_INSTRUCTIONS = "You improve AI agents. Reply with only the text to add to an agent's instructions (or, " +
  "when asked, to its opening message): at most three sentences, addressed to the agent (or, for an opening " +
  "message, to its users), with no preamble and no quotes."

/** A model's reply as the text of a change: trimmed, unquoted, a bounded length; none when nothing is left. */
const draftedText = (output: string): Option.Option<string> => {
  const text = output.trim().replace(/^["'`]+|["'`]+$/g, "").replace(/\n{3,}/g, "\n\n").trim()
  return text.length === 0 ? Option.none() : Option.some(text.slice(0, DRAFT_MAX_CHARS).trim())
}

export const suggestionView = (s: SuggestionRow, identifier: string) => ({
  id: s.id,
  agent: identifier,
  kind: s.kind,
  subject: s.subject,
  title: s.title,
  rationale: s.rationale,
  change: s.change,
  evidence: s.evidence,
  drafted_by: s.draftedBy,
  status: s.status,
  applied_version: s.appliedVersion,
  created_at: s.createdAt.toISOString(),
  updated_at: s.updatedAt.toISOString(),
  accepted_at: s.acceptedAt === null ? null : s.acceptedAt.toISOString(),
  dismissed_at: s.dismissedAt === null ? null : s.dismissedAt.toISOString()
})
export type SuggestionView = ReturnType<typeof suggestionView>

const ratio = (part: number, whole: number) => whole === 0 ? 0 : Math.round((part / whole) * 10_000) / 10_000

export const outcomesView = (o: Outcomes) => ({
  runs: o.total,
  completed: o.completed,
  failed: o.failed,
  cancelled: o.cancelled,
  failure_rate: ratio(o.failed, o.total),
  failures: o.failures,
  runs_with_denied_tools: o.deniedRuns,
  denied_tool_calls: o.deniedCalls,
  denied_tools: Object.fromEntries(
    Object.keys(o.deniedTools).sort().map((name) => [name, o.deniedTools[name]!.calls])
  ),
  unanswered: o.trialExhausted + o.emptyAnswers
})

const PENDING_FIRST: Record<string, number> = { pending: 0, accepted: 1, dismissed: 2 }

export class Evolution extends Effect.Service<Evolution>()("atrium/evolution/Evolution", {
  effect: Effect.gen(function*() {
    const repo = yield* EvolutionRepo
    const agents = yield* AgentsRepo
    const catalog = yield* ModelCatalog
    const engine = yield* RunEngine
    const draftTimeout = yield* duration("EVOLUTION_DRAFT_TIMEOUT", "30 seconds")

    /**
     * The text of a new suggestion's change, drafted by the agent's own model when that is a real one (the builtin
     * model only echoes). It is one run of the run engine, paid by the owner like any run (at most `DRAFT_BUDGET`)
     * and recorded without an agent, so it is no evidence about the agent. None (keep the template) when the model
     * is the builtin one, or fails, or is slow, or the owner cannot pay.
     */
    const draftWithModel = (agent: AgentRow, live: AgentConfig, candidate: Candidate) =>
      Effect.gen(function*() {
        const change = candidate.change
        if (change.type !== "append_instructions" && change.type !== "append_opening_message") return Option.none<string>()
        const entry = Option.getOrUndefined(yield* catalog.find(live.model))
        if (entry === undefined || entry.provider === "builtin") return Option.none<string>()
        const drafter: RunnableAgent = {
          id: null,
          identifier: "atrium-evolution",
          ownerId: agent.ownerId,
          version: null,
          config: { ...live, instructions: DRAFTER_INSTRUCTIONS, tools: [], subagents: [], billing: defaultBilling }
        }
        const target = change.type === "append_opening_message" ? "its opening message, which users see first" : "its instructions"
        const message = [
          "The agent's instructions:",
          "<<<",
          live.instructions.trim().length === 0 ? "(none)" : live.instructions,
          ">>>",
          "",
          `What its recorded runs show: ${candidate.rationale}`,
          `A generic addition to ${target} would be: "${change.text}"`,
          `Write the addition to ${target} for this agent.`
        ].join("\n")
        const folded = yield* foldRun(engine, {
          runId: RunId.random(),
          agent: drafter,
          payer: { accountId: agent.ownerId, endUserId: "" },
          history: [],
          message,
          budget: Option.some(DRAFT_BUDGET),
          sessionId: Option.none(),
          workspace: "",
          parentRunId: Option.none(),
          depth: 0
        }, { timeout: draftTimeout, progress: noProgress })
        if (folded._tag === "TimedOut" || folded.result.status !== "completed") return Option.none<string>()
        return draftedText(folded.result.output)
      })

    /** The agent if `userId` owns it; 404 for anyone else's draft (as everywhere), 403 for their published agent. */
    const ownedAgent = (identifier: string, userId: UserId) =>
      Effect.flatMap(agents.byIdentifier(identifier), (agent): Effect.Effect<AgentRow, NotFound | Forbidden> => {
        const access = Option.isSome(agent) ? evolutionAccess(userId, agent.value) : "hidden"
        if (access === "creator" && Option.isSome(agent)) return Effect.succeed(agent.value)
        if (access === "forbidden") return Effect.fail(new Forbidden({ message: `Only the creator of ${identifier} can see or change its evolution.` }))
        return Effect.fail(new NotFound({ message: `No agent ${identifier}.` }))
      })

    /** What users run: the published version, or the draft while nothing is published. */
    const liveConfig = (agent: AgentRow) =>
      agent.publishedVersion === null
        ? Effect.succeed(agent.draft)
        : Effect.map(agents.version(agent.id, agent.publishedVersion), Option.getOrElse(() => agent.draft))

    const stillApplies = (agent: AgentRow, live: AgentConfig, s: { readonly change: SuggestionRow["change"] }) =>
      applies(agent.draft, s.change) || applies(live, s.change)

    /**
     * Derives the agent's suggestions from its runs and stores them, idempotently: an open suggestion of the same
     * kind and subject is updated in place (same id); one whose change no longer does anything is dismissed.
     */
    const refresh = Effect.fn("Evolution.refresh")(function*(agent: AgentRow) {
      const live = yield* liveConfig(agent)
      // Stale first: a suggestion dismissed now moves the evidence cutoff of its kind before anything is derived.
      const existing = yield* repo.list(agent.id)
      yield* repo.dismiss(
        existing.filter((s) => s.status === "pending" && !stillApplies(agent, live, s)).map((s) => s.id)
      )
      const decided = yield* repo.lastDecided(agent.id)
      const cutoffs = new Map<number, Outcomes>()
      for (const at of decided.values()) {
        if (!cutoffs.has(at.getTime())) cutoffs.set(at.getTime(), yield* repo.outcomes(agent.id, at))
      }
      const allTime = yield* repo.outcomes(agent.id, null)
      const decidedAt = (kind: Kind, subject: string) => decided.get(`${kind}\u0000${subject}`)
      // Allowing and removing a tool are answers to the same denials: deciding either deals with the tool's denials
      // before it. Those count as dealt with for `unknown_tool_calls` too (asked with the tool's name), so a tool
      // removed on their account is not reported as an unknown tool from the same runs.
      const toolDecidedAt = (tool: string) => [decidedAt("allow_denied_tool", tool), decidedAt("remove_denied_tool", tool)]
      const evidenceFor = (kind: Kind, subject: string) => {
        const candidates = kind === "allow_denied_tool" || kind === "remove_denied_tool"
          ? toolDecidedAt(subject)
          : kind === "unknown_tool_calls"
          ? [decidedAt(kind, ""), ...toolDecidedAt(subject)]
          : [decidedAt(kind, subject)]
        const at = candidates.reduce<Date | undefined>((latest, date) =>
          date !== undefined && (latest === undefined || date > latest) ? date : latest, undefined)
        return at === undefined ? allTime : cutoffs.get(at.getTime())!
      }
      const models = (yield* catalog.list).map((entry) => entry.id)
      const candidates = derive(live, allTime, evidenceFor, models)
      const fresh = candidates.filter((candidate: Candidate) => stillApplies(agent, live, candidate))
      const open = new Set(
        existing.filter((s) => s.status === "pending" && stillApplies(agent, live, s)).map((s) => `${s.kind}\u0000${s.subject}`)
      )
      yield* Effect.forEach(fresh, (candidate) =>
        Effect.gen(function*() {
          // A model drafts the text once, when the suggestion is new; an open one keeps its text (the repository
          // does not overwrite a model's text with a template's).
          const drafted = open.has(`${candidate.kind}\u0000${candidate.subject}`)
            ? Option.none<string>()
            : yield* draftWithModel(agent, live, candidate)
          const written: Candidate = Option.match(drafted, {
            onNone: () => candidate,
            onSome: (text) => ({ ...candidate, change: { ...candidate.change, text } as Candidate["change"] })
          })
          yield* repo.upsert(agent.id, SuggestionId.random(), written, Option.isSome(drafted) ? `model:${live.model}` : TEMPLATE)
        }), { discard: true })
      return yield* repo.list(agent.id)
    })

    /** The agent's suggestions, derived afresh: open ones first, then decided ones, newest first. */
    const list = Effect.fn("Evolution.list")(function*(identifier: string, userId: UserId) {
      const agent = yield* ownedAgent(identifier, userId)
      const rows = yield* refresh(agent)
      const sorted = [...rows].sort((a, b) =>
        PENDING_FIRST[a.status]! - PENDING_FIRST[b.status]! || b.createdAt.getTime() - a.createdAt.getTime()
      )
      return { identifier, data: sorted.map((s) => suggestionView(s, identifier)), has_more: false }
    })

    /** A suggestion of one of `userId`'s agents; anyone else's is as absent as a missing one. */
    const ownSuggestion = (suggestionId: SuggestionId, userId: UserId) =>
      Effect.flatMap(repo.byId(suggestionId), (found) =>
        allowed(found, (suggestion) => isSuggestionOf(userId, suggestion), () => new NotFound({ message: `No suggestion ${suggestionId}.` })))

    const acceptedView = (
      identifier: string,
      suggestion: SuggestionRow,
      agent: { publishedVersion: number | null; resubmittedVersion: number | null },
      alreadyAccepted: boolean
    ) => ({
      suggestion: suggestionView(suggestion, identifier),
      agent: {
        identifier,
        published_version: agent.publishedVersion,
        applied_version: suggestion.appliedVersion,
        resubmitted_version: agent.resubmittedVersion
      },
      already_accepted: alreadyAccepted,
      message: alreadyAccepted
        ? "This suggestion was accepted before; nothing more was changed."
        : suggestion.appliedVersion === null
        ? "Applied to the draft at once. Nothing is published yet, so only you run it."
        : `Applied at once without review: version ${suggestion.appliedVersion} is live and the draft has the change too.`
    })

    /**
     * Applies a suggestion at once, without review (spec 4.10 rule 9), to the draft and to the version others run.
     * Accepting it again answers the same result and changes nothing.
     */
    const accept = Effect.fn("Evolution.accept")(function*(suggestionId: SuggestionId, userId: UserId) {
      const found = yield* ownSuggestion(suggestionId, userId)
      const { identifier, suggestion } = found
      const agent = yield* ownedAgent(identifier, userId)
      if (suggestion.status === "accepted") {
        return acceptedView(identifier, suggestion, { publishedVersion: agent.publishedVersion, resubmittedVersion: null }, true)
      }
      if (suggestion.status === "dismissed") {
        return yield* new InvalidRequest({ message: `Suggestion ${suggestionId} was dismissed; it can no longer be accepted.` })
      }
      // Decided meanwhile by another request: answer as that left it.
      const asDecidedNow = Effect.gen(function*() {
        const now = yield* ownSuggestion(suggestionId, userId)
        if (now.suggestion.status === "accepted") {
          const fresh = yield* ownedAgent(identifier, userId)
          return acceptedView(identifier, now.suggestion, { publishedVersion: fresh.publishedVersion, resubmittedVersion: null }, true)
        }
        return yield* new InvalidRequest({ message: `Suggestion ${suggestionId} was dismissed; it can no longer be accepted.` })
      })
      const live = yield* liveConfig(agent)
      if (!stillApplies(agent, live, suggestion)) {
        yield* repo.dismiss([suggestion.id])
        // A concurrent accept of this very suggestion is what made it "no longer apply": answer as accepted.
        if ((yield* ownSuggestion(suggestionId, userId)).suggestion.status === "accepted") return yield* asDecidedNow
        return yield* new InvalidRequest({
          message: `Suggestion ${suggestionId} no longer applies: the agent already has this change. It was dismissed.`
        })
      }
      if (suggestion.change.type === "set_model") {
        const model = suggestion.change.model
        if (Option.isNone(yield* catalog.find(model))) {
          return yield* new InvalidRequest({ message: `Suggestion ${suggestionId} names a model that is not available: ${model}.` })
        }
      }
      for (const config of [agent.draft, live]) {
        const problem = withinLimits(applyChange(config, suggestion.change))
        if (problem !== undefined) {
          return yield* new InvalidRequest({ message: `Suggestion ${suggestionId} cannot be applied: ${problem}.` })
        }
      }
      const applied = yield* repo.accept(
        suggestion.id,
        (config) => applyChange(config, suggestion.change),
        alternativesOf(suggestion.kind),
        SubmissionId.random()
      )
      if (Option.isNone(applied)) return yield* asDecidedNow
      yield* Effect.logInfo("evolution suggestion accepted").pipe(
        Effect.annotateLogs({ suggestion: suggestion.id, agent: identifier, version: applied.value.appliedVersion ?? "draft" })
      )
      return acceptedView(identifier, applied.value.suggestion, applied.value, false)
    })

    /** Sets a suggestion aside; it is not made again from the runs it was derived from. */
    const dismiss = Effect.fn("Evolution.dismiss")(function*(suggestionId: SuggestionId, userId: UserId) {
      const { identifier, suggestion } = yield* ownSuggestion(suggestionId, userId)
      if (suggestion.status === "accepted") {
        return yield* new InvalidRequest({ message: `Suggestion ${suggestionId} was accepted; it cannot be dismissed.` })
      }
      yield* repo.dismiss([suggestion.id])
      const now = yield* ownSuggestion(suggestionId, userId)
      return suggestionView(now.suggestion, identifier)
    })

    /**
     * Suggestions made and decided, and the agent's run outcomes overall and before and after the last accepted
     * suggestion (by when each run started). Reads only: suggestions are derived when listed.
     */
    const stats = Effect.fn("Evolution.stats")(function*(identifier: string, userId: UserId) {
      const agent = yield* ownedAgent(identifier, userId)
      const summary = yield* repo.summary(agent.id)
      const all = yield* repo.outcomes(agent.id, null)
      const last = summary.lastAcceptedAt
      const before = last === null ? null : yield* repo.outcomes(agent.id, null, last)
      const after = last === null ? null : yield* repo.outcomes(agent.id, last)
      return {
        identifier,
        suggestions: {
          made: summary.made,
          pending: summary.pending,
          accepted: summary.accepted,
          dismissed: summary.dismissed
        },
        last_accepted_at: last === null ? null : last.toISOString(),
        published_version: agent.publishedVersion,
        runs: {
          all: outcomesView(all),
          before_last_accepted: before === null ? null : outcomesView(before),
          after_last_accepted: after === null ? null : outcomesView(after)
        },
        failure_rate_change: before === null || after === null || after.total === 0
          ? null
          : Math.round((ratio(after.failed, after.total) - ratio(before.failed, before.total)) * 10_000) / 10_000
      }
    })

    return { list, accept, dismiss, stats } as const
  }),
  dependencies: [EvolutionRepo.Default, AgentsRepo.Default, ModelCatalog.Default, RunEngine.Default]
}) {}
