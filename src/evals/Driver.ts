import * as Singleton from "@effect/cluster/Singleton"
import { Config, Effect, Layer, Option } from "effect"
import type { CallerIdentity } from "../identity/Domain.js"
import { partitionOf } from "../identity/Partition.js"
import type { UserId } from "../platform/Ids.js"
import { duration } from "../platform/Config.js"
import { makeWakeup } from "../platform/Wakeup.js"
import { RunId } from "../runtime/Domain.js"
import type { RunnableAgent } from "../runtime/Run.js"
import { BackgroundRuns } from "../runs/Background.js"
import { RunRecords, TERMINAL } from "../runs/Repo.js"
import { Runs } from "../runs/Runs.js"
import type { Grader } from "./Domain.js"
import { combine, DEFAULT_RUBRIC, type Grade, gradeDirect, judgePrompt, type Observation, parseVerdict, type ToolCall, VERDICT_SCHEMA } from "./Graders.js"
import { type EvalRunRow, EvalsRepo, type OpenResult } from "./Repo.js"
import { canEvaluate } from "./Policy.js"

/** Evaluations' settings (docs/evals.md, README settings), read once. */
export class EvalsConfig extends Effect.Service<EvalsConfig>()("atrium/evals/EvalsConfig", {
  effect: Config.all({
    /** How often the cluster's eval driver moves every running eval run on: grades finished rows, starts the next. */
    poll: duration("EVAL_POLL", "250 millis"),
    /**
     * How often it looks while no eval run is running: an eval run made on the driver's own runner wakes it at once,
     * one made on another runner is found by this look.
     */
    idlePoll: duration("EVAL_IDLE_POLL", "2 seconds")
  })
}) {}

/**
 * Wakes this runner's eval driver when an eval run is made here, so an idle driver need not poll the database four
 * times a second to start one promptly (each look was a statement: a third of an idle platform's, issue 45). Where the
 * driver runs elsewhere in the cluster, a wake goes to nobody and its idle look finds the run.
 */
export class EvalDriverWake extends Effect.Service<EvalDriverWake>()("atrium/evals/EvalDriverWake", {
  effect: makeWakeup
}) {}

/** A result marked running whose run never appeared (its pass died between the two) is started again after this. */
const LOST_AFTER_MS = 30_000

/**
 * The eval driver (docs/evals.md, "How an eval run runs"): one in the cluster (a singleton, as the scheduler), whose
 * pass moves every running eval run on from what the database says:
 *  - a row whose background run ended is graded (its output, tool calls, cost and latency), or, with an LLM judge,
 *    its judge's run is started (a bare-model background run on the creator's wallet, answering structured JSON);
 *  - a row whose judge's run ended is graded with the verdict;
 *  - rows are started, in dataset order, while fewer than the run's `concurrency` are under way;
 *  - a run with every row graded is completed.
 * Every row's run is a background run (runs/Background.ts) paid by the creator, its id chosen when the eval run was
 * made: a pass that dies after marking a row running starts the same run again, never a second one.
 */
const parsed = (text: string): unknown => {
  try {
    return text === "" ? {} : JSON.parse(text)
  } catch {
    return text
  }
}

export const makeDriver = Effect.gen(function*() {
  const repo = yield* EvalsRepo
  const background = yield* BackgroundRuns
  const runs = yield* Runs
  const records = yield* RunRecords

  const creator = (ownerId: UserId): CallerIdentity => ({
    userId: ownerId,
    via: "login",
    apiKeyId: Option.none(),
    endUserId: Option.none()
  })

  const toolCallsOf = (runId: RunId) =>
    Effect.map(records.eventsAfter(runId, 0, 2_000), (events) => {
      // A call is told as it changes (pending, running, its end), its arguments whole on one of them or in pieces
      // (`tool_call_chunk`) as the model streamed them.
      const calls = new Map<string, { name: string; arguments: unknown; pieces: string }>()
      for (const event of events) {
        const e = event.payload as { type: string; tool_call_id?: string; name?: string; arguments?: unknown; delta?: string }
        if (e.tool_call_id === undefined) continue
        const before = calls.get(e.tool_call_id)
        if (e.type === "tool_call" && e.name !== undefined) {
          calls.set(e.tool_call_id, { name: e.name, arguments: e.arguments ?? before?.arguments, pieces: before?.pieces ?? "" })
        } else if (e.type === "tool_call_chunk" && before !== undefined && typeof e.delta === "string") {
          before.pieces += e.delta
        }
      }
      return [...calls.values()].map((call): ToolCall => ({ name: call.name, arguments: call.arguments ?? parsed(call.pieces) }))
    })

  const observe = (result: OpenResult) =>
    Effect.map(toolCallsOf(result.runId), (toolCalls): Observation => ({
      output: result.runOutput ?? "",
      status: result.runStatus ?? "failed",
      failure: result.runFailure,
      toolCalls,
      creditsMicros: result.runCredits ?? 0n,
      latencyMs: result.runStartedAt !== null && result.runFinishedAt !== null
        ? Math.max(result.runFinishedAt.getTime() - result.runStartedAt.getTime(), 0)
        : 0
    }))

  const settle = (run: EvalRunRow, result: OpenResult, grades: ReadonlyArray<Grade>, seen: Observation, credits: bigint) => {
    const outcome = combine(grades, seen)
    return repo.grade({
      evalRunId: run.id,
      position: result.position,
      passed: outcome.passed,
      score: outcome.score,
      explanation: outcome.explanation,
      grades,
      credits,
      latencyMs: seen.latencyMs,
      output: seen.output.slice(0, 20_000)
    })
  }

  const startRow = Effect.fn("EvalDriver.startRow")(function*(run: EvalRunRow, result: OpenResult, mark = true) {
    const agent: Option.Option<RunnableAgent> = run.version === null
      ? yield* runs.runnable(run.agent, run.ownerId)
      : yield* runs.ownVersion(run.agent, run.ownerId, run.version)
    if (Option.isNone(agent) || !canEvaluate(run.ownerId, agent.value)) {
      const seen: Observation = { output: "", status: "failed", failure: "agent_unavailable", toolCalls: [], creditsMicros: 0n, latencyMs: 0 }
      return yield* settle(run, result, [], seen, 0n)
    }
    // Not marked: the eval run was cancelled since this pass read it, and the row is not started.
    if (mark && !(yield* repo.markRunning(run.id, result.position))) return
    const input = result.input
    yield* background.start(creator(run.ownerId), agent.value, {
      message: input.message,
      history: input.history.map((m) => ({ role: m.role, content: m.content })),
      budget: null,
      ...(run.version === null ? {} : { version: run.version })
    }, result.runId)
    yield* stopIfCancelled(run, result.runId)
  })

  /**
   * A cancel that came between the mark and the start did not see this run (it was not queued yet): the driver
   * stops it. Either the cancel reads the run's row after it was queued, or this reads the cancel; one of them stops it.
   */
  const stopIfCancelled = (run: EvalRunRow, runId: RunId) =>
    Effect.gen(function*() {
      if (yield* repo.isRunning(run.id)) return
      yield* background.cancel(partitionOf(creator(run.ownerId)), runId).pipe(Effect.ignore)
    })

  const startJudge = Effect.fn("EvalDriver.startJudge")(function*(run: EvalRunRow, result: OpenResult, judge: Extract<Grader, { type: "llm_judge" }>, grades: ReadonlyArray<Grade>, seen: Observation) {
    const model = yield* runs.runnableOrModel(judge.model, run.ownerId)
    if (Option.isNone(model)) {
      const failed: Grade = { grader: "llm_judge", applicable: true, passed: false, score: 0, explanation: `the judge model ${judge.model} is not available` }
      return yield* settle(run, result, [...grades, failed], seen, seen.creditsMicros)
    }
    const judgeRunId = RunId.random()
    if (!(yield* repo.markJudging({ evalRunId: run.id, position: result.position, judgeRunId, grades }))) return
    const rubric = result.expected.rubric ?? judge.rubric ?? DEFAULT_RUBRIC
    yield* background.start(creator(run.ownerId), model.value, {
      message: judgePrompt(rubric, result.input.message, seen.output, result.expected.expected),
      history: [],
      budget: null,
      outputFormat: { type: "json_schema", name: "verdict", schema: VERDICT_SCHEMA, strict: true }
    }, judgeRunId)
    yield* stopIfCancelled(run, judgeRunId)
  })

  const advance = Effect.fn("EvalDriver.advance")(function*(run: EvalRunRow) {
    const graders = run.graders as ReadonlyArray<Grader>
    const judge = graders.find((g): g is Extract<Grader, { type: "llm_judge" }> => g.type === "llm_judge")
    const open = yield* repo.open(run.id)
    if (open.length === 0) return yield* repo.finish(run.id, "completed")
    let busy = 0
    for (const result of open) {
      if (result.status === "running") {
        if (result.runStatus === null) {
          // Marked running, but its run was never queued (the pass died in between): start it again, once.
          if (result.startedAt !== null && Date.now() - result.startedAt.getTime() > LOST_AFTER_MS) {
            yield* startRow(run, result, false)
          }
          busy++
          continue
        }
        if (!TERMINAL.has(result.runStatus)) {
          busy++
          continue
        }
        const seen = yield* observe(result)
        const grades = graders.flatMap((grader) => {
          const grade = gradeDirect(grader, result.expected, seen)
          return grade === undefined ? [] : [grade]
        })
        if (judge !== undefined && seen.status === "completed") {
          yield* startJudge(run, result, judge, grades, seen)
          busy++
        } else {
          yield* settle(run, result, grades, seen, seen.creditsMicros)
        }
      } else if (result.status === "judging") {
        if (result.judgeStatus === null || !TERMINAL.has(result.judgeStatus)) {
          busy++
          continue
        }
        const seen = yield* observe(result)
        const verdict = result.judgeStatus === "completed"
          ? parseVerdict(result.judgeOutput ?? "", judge?.threshold ?? 0.5)
          : { grader: "llm_judge", applicable: true, passed: false, score: 0, explanation: `the judge's run ended ${result.judgeStatus}` }
        const grades = [...((result.grades ?? []) as ReadonlyArray<Grade>), verdict]
        yield* settle(run, result, grades, seen, seen.creditsMicros + (result.judgeCredits ?? 0n))
      }
    }
    for (const result of open) {
      if (busy >= run.concurrency) break
      if (result.status !== "pending") continue
      yield* startRow(run, result)
      busy++
    }
  })

  /** Moves every running eval run on; says how many there were. */
  const pass = Effect.fn("EvalDriver.pass")(function*() {
    const active = yield* repo.active(50)
    // One eval run's trouble (a row that cannot start) is logged and does not hold the others.
    yield* Effect.forEach(active, (run) =>
      advance(run).pipe(Effect.catchAllCause((cause) => Effect.logWarning(`evals: eval run ${run.id} could not move on`, cause))), { discard: true, concurrency: 4 })
    return active.length
  })
  return { pass } as const
})

/**
 * The driver as a cluster singleton: one in the whole cluster, its passes every `EVAL_POLL` while an eval run is
 * running, else at the next wake (`EvalDriverWake`) or every `EVAL_IDLE_POLL`.
 */
export const EvalDriverLive = Singleton.make(
  "atrium/evals/EvalDriver",
  Effect.gen(function*() {
    const { idlePoll, poll } = yield* EvalsConfig
    const wakeup = yield* EvalDriverWake
    const driver = yield* makeDriver
    yield* driver.pass().pipe(
      Effect.flatMap((running) => running > 0 ? Effect.sleep(poll) : wakeup.next(idlePoll)),
      // A failed pass cannot tell whether eval runs are running: it tries again after `EVAL_POLL`, as before.
      Effect.catchAllCause((cause) => Effect.zipRight(Effect.logWarning("evals: an eval driver pass failed", cause), Effect.sleep(poll))),
      Effect.forever
    )
  })
).pipe(Layer.provide([EvalsRepo.Default, EvalsConfig.Default, EvalDriverWake.Default]))
