import { Effect, Either, Option } from "effect"
import type { CallerIdentity } from "../identity/Domain.js"
import type { EvalDatasetId } from "../platform/Ids.js"
import { InvalidRequest, NotFound } from "../platform/Errors.js"
import { RunRecords } from "../runs/Repo.js"
import type { StoredRequest } from "../runs/Background.js"
import { type SpanRow, TracesRepo } from "../traces/Repo.js"
import type { RowInput } from "./Domain.js"
import type { RunId } from "../runtime/Domain.js"
import { Evals } from "./Evals.js"
import { textOf, toStored } from "./Rows.js"
import { isCreatorsOwnRun, isRunOf } from "./Policy.js"
import { creatorReader } from "../traces/Policy.js"

/**
 * "Add to dataset" from a trace (issue 46 item 3, docs/evals.md "Rows from a run"): a run of the dataset's expert
 * becomes a row, its input (a message or a conversation) as the row's input and its answer as `expected` (or the
 * creator's edit of it). The row holds only what the creator may already read:
 *  - their own background run (as the account, no end user): its request and its answer, as `GET /v1/runs/:id`;
 *  - any other run of their expert (a buyer's, an end user's): only the message content its trace kept, which it
 *    kept only when the expert's `trace_content` was on when it ran. Without it the request is refused and the answer
 *    carries nothing of the run: the creator never reads a buyer's words that capture did not keep.
 * A run is added to a dataset once (its id is the row's source).
 */

const INPUT = "gen_ai.input.messages"
const OUTPUT = "gen_ai.output.messages"

const json = (value: unknown): unknown => {
  if (typeof value !== "string") return value
  try {
    return JSON.parse(value)
  } catch {
    return undefined
  }
}

type Turn = { role: "user" | "assistant"; content: string }

/** A conversation (the model's, with its system prompt and tool turns) as a row's input: its user and assistant text. */
const conversationOf = (messages: ReadonlyArray<{ role?: unknown; content?: unknown }>): RowInput["input"] | null => {
  const turns: Array<Turn> = messages.flatMap((m): Array<Turn> => {
    if (m.role !== "user" && m.role !== "assistant") return []
    const content = textOf(m.content)
    return content.trim() === "" ? [] : [{ role: m.role, content }]
  })
  const last = turns[turns.length - 1]
  if (last === undefined || last.role !== "user") return null
  return turns.length === 1 ? last.content : turns
}

/** The run's own model calls (not a delegated run's) in order, from its trace. */
const chatSpans = (spans: ReadonlyArray<SpanRow>, runId: RunId) =>
  spans.filter((span) => span.runId === runId && span.name.startsWith("chat "))

/** What the trace kept of the run: its first model call's conversation and its last call's answer; null when nothing. */
const fromTrace = (spans: ReadonlyArray<SpanRow>, runId: RunId): { input: RowInput["input"]; output: string } | null => {
  const chats = chatSpans(spans, runId)
  const first = chats[0]
  const last = chats[chats.length - 1]
  if (first === undefined || last === undefined) return null
  const messages = json(first.attributes[INPUT])
  if (!Array.isArray(messages)) return null
  const input = conversationOf(messages)
  if (input === null) return null
  const answer = json(last.attributes[OUTPUT])
  return { input, output: textOf(Array.isArray(answer) ? answer : typeof answer === "string" ? answer : []) }
}

export class RunRows extends Effect.Service<RunRows>()("atrium/evals/RunRows", {
  effect: Effect.gen(function*() {
    const evals = yield* Evals
    const traces = yield* TracesRepo
    const records = yield* RunRecords

    const add = Effect.fn("RunRows.add")(function*(caller: CallerIdentity, datasetId: EvalDatasetId, body: { run: RunId; expected?: string | null | undefined }) {
      const dataset = yield* evals.ownDataset(caller, datasetId)
      const creator = { accountId: dataset.ownerId, endUserId: "" }
      // The run's trace as its expert's creator reads it: a run of another expert (theirs or anyone's) is not found.
      const trace = yield* traces.byRun(body.run, creatorReader(dataset.ownerId))
      if (Option.isNone(trace) || !isRunOf(dataset, trace.value)) {
        return yield* new NotFound({ message: `No run ${body.run} of ${dataset.agent} with a trace.` })
      }
      const own = isCreatorsOwnRun(dataset.ownerId, trace.value)
      let found: { input: RowInput["input"]; output: string } | null = null
      if (own) {
        const run = yield* records.byId(creator, body.run)
        const stored = Option.flatMap(yield* records.background(body.run), (row) => Option.fromNullable(row.request as StoredRequest | null))
        if (Option.isSome(run) && Option.isSome(stored)) {
          const history = stored.value.history.map((m) => ({ role: m.role, content: (m as { content?: unknown }).content }))
          const input = conversationOf([...history, { role: "user", content: stored.value.message }])
          if (input !== null) found = { input, output: run.value.output ?? "" }
        }
      }
      found ??= fromTrace(yield* traces.spans(trace.value.traceId), body.run)
      if (found === null) {
        return yield* new InvalidRequest({
          message: own
            ? `Invalid request: run: the input of run ${body.run} is not kept (only a background run's is, or its trace's when "trace_content" is on).`
            : `Invalid request: run: run ${body.run} is not yours and its trace keeps no message content ("trace_content" was off when it ran), so it cannot become a row.`
        })
      }
      const expected = body.expected === undefined ? found.output : body.expected
      const row: RowInput = {
        input: found.input,
        ...(expected === null || expected.trim() === "" ? {} : { expected: expected.slice(0, 100_000) }),
        metadata: { from_run: body.run }
      }
      const stored = toStored(row, "run")
      if (Either.isLeft(stored)) return yield* new InvalidRequest({ message: `Invalid request: ${stored.left}` })
      return yield* evals.addSourced(dataset, [{ ...stored.right, sourceRef: `run:${body.run}` }], "trace")
    })

    return { add } as const
  }),
  dependencies: [Evals.Default, TracesRepo.Default, RunRecords.Default]
}) {}
