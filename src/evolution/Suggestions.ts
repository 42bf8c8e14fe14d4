import type { AgentConfig } from "../agents/Agent.js"
import { Change } from "./Domain.js"

/**
 * What self-evolution suggests, as pure functions: the evidence an agent's recorded runs give (`Evidence`), the
 * suggestions derived from it (`derive`), and how a suggestion's change applies to an agent configuration
 * (`applyChange`). The wording comes from deterministic templates (see docs/evolution.md: with the builtin model
 * nothing could write better prose; `drafted_by` records who wrote a suggestion's text).
 */


export const KINDS = [
  "failed_runs",
  "allow_denied_tool",
  "remove_denied_tool",
  "unknown_tool_calls",
  "interrupted_runs",
  "unanswered_questions"
] as const
export type Kind = (typeof KINDS)[number]

/** Outcomes of an agent's finished runs over some period (from the `runs` table). */
export interface Outcomes {
  readonly total: number
  readonly completed: number
  readonly failed: number
  readonly cancelled: number
  /** Failed runs by `failure_code`. */
  readonly failures: Readonly<Record<string, number>>
  /** Runs in which at least one tool call was denied, and how many calls were denied in all. */
  readonly deniedRuns: number
  readonly deniedCalls: number
  /**
   * Denials by the tool they were for: in how many runs and how many calls. Runs recorded before the engine named
   * denied tools count in `deniedRuns` and `deniedCalls` only.
   */
  readonly deniedTools: Readonly<Record<string, { readonly runs: number; readonly calls: number }>>
  /** Completed runs in which the model never ran: the caller's free trial was used up (`usage.trial_exhausted`). */
  readonly trialExhausted: number
  /** Completed runs in which the model ran but the answer had no text. */
  readonly emptyAnswers: number
}

export const emptyOutcomes: Outcomes = {
  total: 0,
  completed: 0,
  failed: 0,
  cancelled: 0,
  failures: {},
  deniedRuns: 0,
  deniedCalls: 0,
  deniedTools: {},
  trialExhausted: 0,
  emptyAnswers: 0
}

/** A suggestion before it is stored: `kind` and `subject` say what it is about (one open suggestion per pair). */
export interface Candidate {
  readonly kind: Kind
  readonly subject: string
  readonly title: string
  readonly rationale: string
  readonly change: Change
  readonly evidence: Readonly<Record<string, number>>
}

const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`

/** What the instructions gain for runs that failed with `code` (templates; see docs/evolution.md). */
const FAILURE_TEMPLATES: Readonly<Record<string, { title: string; text: string }>> = {
  budget_exhausted: {
    title: "Answer more economically",
    text: "Keep answers economical: give the essential answer first, in a few short paragraphs at most, and call " +
      "tools only when the answer needs them."
  },
  max_steps: {
    title: "Stop calling tools sooner",
    text: "Use few tool calls: when two tool calls have not given you what you need, stop and answer with what you " +
      "have, saying what is missing."
  },
  model_output_invalid: {
    title: "Keep answers in plain text",
    text: "Answer in plain text, and call tools only with arguments that match their parameters exactly."
  }
}

const GENERIC_FAILURE = {
  title: "Make answers simpler",
  text: "Keep each answer focused on the question asked; when a request is ambiguous or very long, ask one short " +
    "clarifying question instead of attempting everything at once."
}

export const INTERRUPTED_TEXT = "Lead with the answer in two or three sentences, then offer more detail only if the " +
  "user asks for it: long answers get interrupted."

export const EMPTY_ANSWER_TEXT = "Always answer in words: when you cannot answer a question, say so plainly, say " +
  "what you would need to answer it, and suggest where the user could look."

export const unknownToolsText = (config: AgentConfig) => {
  const usable = config.tools.filter((tool) => tool.permission !== "deny").map((tool) => tool.name)
  return usable.length === 0
    ? "You have no tools: answer directly from what you know and never try to call a tool."
    : `Only call the tools you have (${usable.join(", ")}); for anything else, answer directly.`
}

export const trialNoticeText = (config: AgentConfig) => {
  const trials = config.billing.allow_trial ? config.billing.free_trial_per_user : 0
  const free = trials === 0 ? "" : trials === 1 ? "the first question is free; " : `the first ${trials} questions are free; `
  return `Note: ${free}unlock this expert for ${config.billing.price} credits to ask as many as you like.`
}

/**
 * The suggestions `evidence` supports for an agent configured as `config` (the published version when there is
 * one, else the draft: what users actually ran). `evidenceFor(kind, subject)` gives the outcomes counted since the
 * last decided suggestion of that kind and subject (for a tool's denials, of either answer to them), so a suggestion
 * accepted or dismissed is not made again from the same runs. `catalog` lists the model ids that exist.
 */
export const derive = (
  config: AgentConfig,
  allTime: Outcomes,
  evidenceFor: (kind: Kind, subject: string) => Outcomes,
  catalog: ReadonlyArray<string>
): Array<Candidate> => {
  const candidates: Array<Candidate> = []

  // Failed runs, one suggestion per failure code.
  for (const code of Object.keys(allTime.failures).sort()) {
    const since = evidenceFor("failed_runs", code)
    const n = since.failures[code] ?? 0
    if (n === 0) continue
    const evidence = { failed_runs: n, runs: since.total }
    const rationale = `${plural(n, "run")} of ${since.total} failed with ${code}.`
    if (code === "model_unavailable" && !catalog.includes(config.model) && catalog.length > 0) {
      candidates.push({
        kind: "failed_runs",
        subject: code,
        title: `Switch to an available model (${catalog[0]})`,
        rationale: `${rationale} The configured model ${config.model} is not available on this platform.`,
        change: { type: "set_model", model: catalog[0]! },
        evidence
      })
      continue
    }
    const template = FAILURE_TEMPLATES[code] ?? GENERIC_FAILURE
    candidates.push({
      kind: "failed_runs",
      subject: code,
      title: template.title,
      rationale: `${rationale} Adding this to the instructions should make such failures rarer.`,
      change: { type: "append_instructions", text: template.text },
      evidence
    })
  }

  // Denied tool calls, by the tool each was for. A restricted tool (`deny` or `ask`) that was denied: allow it (the
  // model evidently wants it), or remove it (so the model stops reaching for it). A tool that was not denied is no
  // candidate, however it is set.
  const configured = new Set<string>(config.tools.map((tool) => tool.name))
  for (const tool of config.tools.filter((tool) => tool.permission !== "allow")) {
    for (const kind of ["allow_denied_tool", "remove_denied_tool"] as const) {
      const since = evidenceFor(kind, tool.name)
      const denied = since.deniedTools[tool.name]
      if (denied === undefined || denied.calls === 0) continue
      const evidence = { runs_with_denials: denied.runs, denied_calls: denied.calls, runs: since.total }
      const seen = `${plural(denied.calls, "tool call")} ${denied.calls === 1 ? "was" : "were"} denied in ` +
        `${plural(denied.runs, "run")} of ${since.total}; ${tool.name} is set to ${tool.permission}.`
      candidates.push(
        kind === "allow_denied_tool"
          ? {
            kind,
            subject: tool.name,
            title: `Allow ${tool.name}`,
            rationale: `${seen} Allowing it lets the agent use it without ${tool.permission === "ask" ? "asking" : "being refused"}.`,
            change: { type: "set_tool_permission", tool: tool.name, permission: "allow" },
            evidence
          }
          : {
            kind,
            subject: tool.name,
            title: `Remove ${tool.name}`,
            rationale: `${seen} Removing it stops the agent from reaching for a tool it may not use.`,
            change: { type: "remove_tool", tool: tool.name },
            evidence
          }
      )
    }
  }
  // Calls to tools the agent does not have (a model that makes names up, or a tool removed since): nothing to allow,
  // so the agent is told which tools it has. `evidenceFor(kind, name)` counts a name's denials since it was last
  // dealt with, as an unknown tool or as a tool of its own.
  const unknown: Array<string> = []
  let unknownCalls = 0
  for (const name of Object.keys(allTime.deniedTools).filter((name) => !configured.has(name)).sort()) {
    const calls = evidenceFor("unknown_tool_calls", name).deniedTools[name]?.calls ?? 0
    if (calls === 0) continue
    unknown.push(name)
    unknownCalls += calls
  }
  if (unknownCalls > 0) {
    const since = evidenceFor("unknown_tool_calls", "")
    const shown = unknown.length <= 5 ? unknown.join(", ") : `${unknown.slice(0, 5).join(", ")} and ${unknown.length - 5} more`
    candidates.push({
      kind: "unknown_tool_calls",
      subject: "",
      title: "Tell the agent which tools it has",
      rationale: `${plural(unknownCalls, "call")} to tools the agent does not have (${shown}) ` +
        `${unknownCalls === 1 ? "was" : "were"} denied over ${plural(since.total, "run")}.`,
      change: { type: "append_instructions", text: unknownToolsText(config) },
      evidence: { denied_calls: unknownCalls, runs: since.total }
    })
  }

  // Interrupted (cancelled) runs: the user or client stopped waiting.
  const interrupted = evidenceFor("interrupted_runs", "")
  if (interrupted.cancelled > 0) {
    candidates.push({
      kind: "interrupted_runs",
      subject: "",
      title: "Give shorter answers",
      rationale: `${plural(interrupted.cancelled, "run")} of ${interrupted.total} ${interrupted.cancelled === 1 ? "was" : "were"} ` +
        "interrupted before the answer ended.",
      change: { type: "append_instructions", text: INTERRUPTED_TEXT },
      evidence: { interrupted_runs: interrupted.cancelled, runs: interrupted.total }
    })
  }

  // Unanswered questions: the model's answer had no text, or it never ran because the free trial was used up.
  const empty = evidenceFor("unanswered_questions", "empty_answer")
  if (empty.emptyAnswers > 0) {
    candidates.push({
      kind: "unanswered_questions",
      subject: "empty_answer",
      title: "Always answer, even when unsure",
      rationale: `${plural(empty.emptyAnswers, "run")} of ${empty.total} ended without an answer.`,
      change: { type: "append_instructions", text: EMPTY_ANSWER_TEXT },
      evidence: { empty_answers: empty.emptyAnswers, runs: empty.total }
    })
  }
  const trial = evidenceFor("unanswered_questions", "trial_exhausted")
  if (trial.trialExhausted > 0 && config.billing.type === "UNLOCK") {
    candidates.push({
      kind: "unanswered_questions",
      subject: "trial_exhausted",
      title: "Say up front what the free trial covers",
      rationale: `${plural(trial.trialExhausted, "question")} of ${trial.total} went unanswered because the asker's ` +
        "free trial was used up. Telling users in the opening message avoids the surprise.",
      change: { type: "append_opening_message", text: trialNoticeText(config) },
      evidence: { trial_exhausted: trial.trialExhausted, runs: trial.total }
    })
  }
  return candidates
}

const appendText = (base: string, text: string) => base.trim().length === 0 ? text : `${base.trimEnd()}\n\n${text}`

/** `config` with `change` applied; the same object when the change does not apply (already there, no such tool). */
export const applyChange = (config: AgentConfig, change: Change): AgentConfig => {
  switch (change.type) {
    case "append_instructions":
      return config.instructions.includes(change.text)
        ? config
        : { ...config, instructions: appendText(config.instructions, change.text) }
    case "append_opening_message":
      return config.opening_message.includes(change.text)
        ? config
        : { ...config, opening_message: appendText(config.opening_message, change.text) }
    case "set_tool_permission":
      return config.tools.some((tool) => tool.name === change.tool && tool.permission !== change.permission)
        ? {
          ...config,
          tools: config.tools.map((tool) => tool.name === change.tool ? { ...tool, permission: change.permission } : tool)
        }
        : config
    case "remove_tool":
      return config.tools.some((tool) => tool.name === change.tool)
        ? { ...config, tools: config.tools.filter((tool) => tool.name !== change.tool) }
        : config
    case "set_model":
      return config.model === change.model ? config : { ...config, model: change.model }
  }
}

/** Whether `change` would still do anything to `config`. */
export const applies = (config: AgentConfig, change: Change) => applyChange(config, change) !== config

/** Suggestions that exclude each other: accepting one dismisses the others (allow or remove the same tool). */
export const alternativesOf = (kind: Kind): ReadonlyArray<Kind> =>
  kind === "allow_denied_tool" ? ["remove_denied_tool"] : kind === "remove_denied_tool" ? ["allow_denied_tool"] : []

/** Limits of what the configuration can hold (`AgentFields`), checked before a change is written. */
export const withinLimits = (config: AgentConfig): string | undefined => {
  if (config.instructions.length > 20_000) return "the instructions would exceed 20000 characters"
  if (config.opening_message.length > 2000) return "the opening message would exceed 2000 characters"
  return undefined
}
