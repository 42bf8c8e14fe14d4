import { Effect, Either, Option } from "effect"
import { AgentsRepo } from "../agents/Repo.js"
import type { AgentConfig } from "../agents/Agent.js"
import { InsufficientCredits } from "../billing/Domain.js"
import type { CallerIdentity } from "../identity/Domain.js"
import { InvalidRequest, NotFound } from "../platform/Errors.js"
import { type AgentId, EvalDatasetId } from "../platform/Ids.js"
import { RunId } from "../runtime/Domain.js"
import { formatCredits, parseCredits } from "../platform/Money.js"
import { BackgroundRuns } from "../runs/Background.js"
import { BUILTIN_THINKING } from "../runtime/models/Builtin.js"
import { BUILTIN_MODEL, ModelCatalog } from "../runtime/models/Catalog.js"
import { EvalRowId, EvalRunId, type Grader, type RowInput } from "./Domain.js"
import { calibrated, estimateRow, type Rates } from "./Estimate.js"
import { type DatasetRow, type EvalRowRow, type EvalRunRow, EvalsRepo, type ResultRow } from "./Repo.js"
import { parseCsv, parseJsonl, parseOpenAiEvals, parsePromptfoo, rowFields, type StoredRow, toStored } from "./Rows.js"
import { Wallets } from "../billing/Wallets.js"
import { configHash } from "../agents/Fingerprint.js"
import { canEvaluate, creatorOf } from "./Policy.js"
import { EvalDriverWake } from "./Driver.js"

/**
 * Evaluations (issue 46 item 3, docs/evals.md): datasets of an expert and their rows, eval runs of a dataset against
 * a version of the expert, their results and comparisons. Only the expert's creator, acting as their account (no
 * `X-End-User-Id`), sees or touches any of it; anyone else gets the 404 of something that is not there.
 */

const notFound = (what: string) => new NotFound({ message: `No ${what}.` })

export const datasetView = (row: DatasetRow) => ({
  id: row.id,
  object: "eval.dataset" as const,
  agent: row.agent,
  name: row.name,
  rows: row.rows,
  created_at: row.createdAt.toISOString()
})

export const rowView = (row: EvalRowRow) => ({
  id: row.id,
  object: "eval.row" as const,
  ...rowFields({ input: row.input as StoredRow["input"], expected: row.expected as StoredRow["expected"] }),
  source: row.source,
  created_at: row.createdAt.toISOString()
})

const passRate = (run: EvalRunRow) => (run.rowsDone === 0 ? null : run.rowsPassed / run.rowsDone)

export const runView = (run: EvalRunRow) => ({
  id: run.id,
  object: "eval.run" as const,
  dataset: run.datasetId,
  agent: run.agent,
  version: run.version,
  status: run.status,
  graders: run.graders as ReadonlyArray<unknown>,
  concurrency: run.concurrency,
  estimate_credits: formatCredits(run.estimateMicros),
  credits: formatCredits(run.credits),
  pass_rate: passRate(run),
  rows_total: run.rowsTotal,
  rows_done: run.rowsDone,
  rows_passed: run.rowsPassed,
  mean_latency_ms: run.meanLatencyMs === null ? null : Math.round(run.meanLatencyMs),
  created_at: run.createdAt.toISOString(),
  finished_at: run.finishedAt?.toISOString() ?? null
})

export const resultView = (row: ResultRow) => ({
  row_id: row.rowId,
  position: row.position,
  status: row.status,
  passed: row.passed,
  score: row.score,
  explanation: row.explanation,
  grades: ((row.grades ?? []) as ReadonlyArray<{ grader: string; applicable: boolean; passed: boolean; score: number; explanation: string }>)
    .filter((grade) => grade.applicable)
    .map(({ explanation, grader, passed, score }) => ({ grader, passed, score, explanation })),
  run_id: row.runId,
  trace_id: row.traceId,
  credits: formatCredits(row.credits),
  latency_ms: row.latencyMs,
  output: row.output
})

const ratesOf = (entry: { id: string; inputPer1k: string; outputPer1k: string }): Rates => ({
  inputPer1k: parseCredits(entry.inputPer1k) ?? 0n,
  outputPer1k: parseCredits(entry.outputPer1k) ?? 0n,
  reasoning: entry.id === BUILTIN_MODEL.id ? BUILTIN_THINKING.join("") : ""
})

/** The most rows a dataset holds: an eval run of it is one background run per row. */
export const MAX_ROWS = 10_000
const DEFAULT_CONCURRENCY = 4

export class Evals extends Effect.Service<Evals>()("atrium/evals/Evals", {
  effect: Effect.gen(function*() {
    const repo = yield* EvalsRepo
    const agents = yield* AgentsRepo
    const catalog = yield* ModelCatalog
    const wallets = yield* Wallets
    const background = yield* BackgroundRuns
    const wake = yield* EvalDriverWake

    const ownAgent = Effect.fn("Evals.ownAgent")(function*(caller: CallerIdentity, identifier: string) {
      const owner = creatorOf(caller)
      const agent = yield* agents.byIdentifier(identifier)
      if (owner === null || Option.isNone(agent) || !canEvaluate(owner, agent.value)) return yield* notFound(`agent ${identifier} of yours`)
      return agent.value
    })

    const ownDataset = Effect.fn("Evals.ownDataset")(function*(caller: CallerIdentity, id: EvalDatasetId) {
      const owner = creatorOf(caller)
      const found = owner === null ? Option.none() : yield* repo.dataset(id, owner)
      if (Option.isNone(found)) return yield* notFound(`dataset ${id}`)
      return found.value
    })

    const createDataset = Effect.fn("Evals.createDataset")(function*(caller: CallerIdentity, input: { agent: string; name: string }) {
      const agent = yield* ownAgent(caller, input.agent)
      const id = EvalDatasetId.random()
      yield* repo.insertDataset({ id, agentId: agent.id, ownerId: agent.ownerId, name: input.name })
      return datasetView(Option.getOrThrow(yield* repo.dataset(id, agent.ownerId)))
    })

    const listDatasets = Effect.fn("Evals.listDatasets")(function*(caller: CallerIdentity, q: { agent?: string | undefined; after?: EvalDatasetId | undefined; limit?: number | undefined }) {
      const owner = creatorOf(caller)
      if (owner === null) return { data: [], has_more: false }
      const agentId = q.agent === undefined ? null : (yield* ownAgent(caller, q.agent)).id
      if (q.after !== undefined) yield* ownDataset(caller, q.after)
      const limit = q.limit ?? 20
      const rows = yield* repo.datasets({ ownerId: owner, agentId, after: q.after ?? null, limit })
      return { data: rows.slice(0, limit).map(datasetView), has_more: rows.length > limit }
    })

    const getDataset = (caller: CallerIdentity, id: EvalDatasetId) => Effect.map(ownDataset(caller, id), datasetView)

    const deleteDataset = Effect.fn("Evals.deleteDataset")(function*(caller: CallerIdentity, id: EvalDatasetId) {
      const dataset = yield* ownDataset(caller, id)
      yield* repo.deleteDataset(dataset.id, dataset.ownerId)
      return { id, object: "eval.dataset" as const, deleted: true as const }
    })

    const append = Effect.fn("Evals.append")(function*(dataset: DatasetRow, rows: ReadonlyArray<StoredRow & { sourceRef?: string }>, source: string) {
      if (dataset.rows + rows.length > MAX_ROWS) {
        return yield* new InvalidRequest({ message: `Invalid request: a dataset holds at most ${MAX_ROWS} rows (this one has ${dataset.rows}).` })
      }
      const ids = yield* repo.insertRows(dataset.id, rows.map((row) => ({ ...row, id: EvalRowId.random() })), source)
      return { object: "eval.rows.added" as const, dataset: dataset.id, added: ids.length, row_ids: ids }
    })

    const invalid = (message: string) => new InvalidRequest({ message: `Invalid request: ${message}` })

    const addRows = Effect.fn("Evals.addRows")(function*(
      caller: CallerIdentity,
      id: EvalDatasetId,
      payload: ReadonlyArray<RowInput> | { format: "csv" | "jsonl"; content: string }
    ) {
      const dataset = yield* ownDataset(caller, id)
      if ("format" in payload) {
        const parsed = payload.format === "csv" ? parseCsv(payload.content) : parseJsonl(payload.content)
        if (Either.isLeft(parsed)) return yield* invalid(`content: ${parsed.left}`)
        if (parsed.right.length === 0) return yield* invalid("content: no rows")
        return yield* append(dataset, parsed.right, payload.format)
      }
      const rows: Array<StoredRow> = []
      for (const [i, row] of payload.entries()) {
        const stored = toStored(row, `[${i}]`)
        if (Either.isLeft(stored)) return yield* invalid(stored.left)
        rows.push(stored.right)
      }
      return yield* append(dataset, rows, "api")
    })

    const importRows = Effect.fn("Evals.importRows")(function*(
      caller: CallerIdentity,
      id: EvalDatasetId,
      payload: { format: "promptfoo" | "openai_evals"; content: string; testing_criteria?: ReadonlyArray<Record<string, unknown>> | undefined }
    ) {
      const dataset = yield* ownDataset(caller, id)
      const parsed = payload.format === "promptfoo" ? parsePromptfoo(payload.content) : parseOpenAiEvals(payload.content, payload.testing_criteria)
      if (Either.isLeft(parsed)) return yield* invalid(`content: ${parsed.left}`)
      const added = yield* append(dataset, parsed.right.rows, payload.format)
      return { ...added, skipped: parsed.right.skipped }
    })

    /** Rows added from somewhere else (a thumbs-down), each once: `sourceRef` names where it came from. */
    const addSourced = Effect.fn("Evals.addSourced")(function*(dataset: DatasetRow, rows: ReadonlyArray<StoredRow & { sourceRef: string }>, source: string) {
      return yield* append(dataset, rows, source)
    })

    const listRows = Effect.fn("Evals.listRows")(function*(caller: CallerIdentity, id: EvalDatasetId, q: { after?: EvalRowId | undefined; limit?: number | undefined }) {
      const dataset = yield* ownDataset(caller, id)
      if (q.after !== undefined && Option.isNone(yield* repo.rowExists(dataset.id, q.after))) {
        return yield* notFound(`row ${q.after} in dataset ${id}`)
      }
      const limit = q.limit ?? 20
      const rows = yield* repo.rowsPage({ datasetId: dataset.id, after: q.after ?? null, limit })
      return { data: rows.slice(0, limit).map(rowView), has_more: rows.length > limit }
    })

    /** The configuration an eval run evaluates: a published version, or the draft. */
    const configFor = Effect.fn("Evals.configFor")(function*(agent: { id: AgentId; identifier: string; draft: AgentConfig }, version: number | undefined) {
      if (version === undefined) return agent.draft
      const config = yield* agents.version(agent.id, version)
      if (Option.isNone(config)) return yield* notFound(`version ${version} of ${agent.identifier}`)
      return config.value
    })

    const judgeRates = Effect.fn("Evals.judgeRates")(function*(graders: ReadonlyArray<Grader>) {
      const judges: Array<{ rates: Rates; rubric: string | undefined }> = []
      for (const grader of graders) {
        if (grader.type !== "llm_judge") continue
        const model = yield* catalog.find(grader.model)
        if (Option.isNone(model)) return yield* invalid(`graders: unknown judge model "${grader.model}" (see GET /v1/models)`)
        judges.push({ rates: ratesOf(model.value), rubric: grader.rubric })
      }
      return judges
    })

    /** The estimate of running `rows` through `config` with these graders (Estimate.ts). */
    const estimate = Effect.fn("Evals.estimate")(function*(agentId: AgentId, config: AgentConfig, rows: ReadonlyArray<EvalRowRow>, graders: ReadonlyArray<Grader>) {
      const model = yield* catalog.find(config.model)
      const rates = Option.match(model, { onNone: (): Rates => ({ inputPer1k: 0n, outputPer1k: 0n, reasoning: "" }), onSome: ratesOf })
      const judges = yield* judgeRates(graders)
      const raw = rows.reduce((sum, row) =>
        sum + estimateRow({
          instructions: config.instructions.trim().length > 0 ? config.instructions : "You are a helpful assistant.",
          input: row.input as StoredRow["input"],
          expected: row.expected as StoredRow["expected"],
          rates,
          judges
        }), 0n)
      const record = yield* repo.calibration(agentId)
      return calibrated(raw, Option.getOrUndefined(Option.map(record, (r) => ({ estimate: r.estimateMicros, actual: r.credits }))))
    })

    const createRun = Effect.fn("Evals.createRun")(function*(caller: CallerIdentity, input: {
      dataset: EvalDatasetId
      agent: string
      version?: number | undefined
      graders: ReadonlyArray<Grader>
      concurrency?: number | undefined
    }) {
      const dataset = yield* ownDataset(caller, input.dataset)
      const agent = yield* ownAgent(caller, input.agent)
      if (agent.id !== dataset.agentId) return yield* invalid(`agent: dataset ${dataset.id} is a dataset of ${dataset.agent}, not ${agent.identifier}`)
      const config = yield* configFor(agent, input.version)
      const rows = yield* repo.allRows(dataset.id)
      if (rows.length === 0) return yield* invalid(`dataset: ${dataset.id} has no rows yet`)
      const estimateMicros = yield* estimate(agent.id, config, rows, input.graders)
      // The rows run on the creator's wallet: an eval run it cannot pay for is refused before any row starts.
      const balance = yield* wallets.balance(agent.ownerId)
      if (balance < estimateMicros) {
        return yield* new InsufficientCredits({
          message: `This eval run is estimated at ${formatCredits(estimateMicros)} credits; the balance is ${formatCredits(balance)}.`
        })
      }
      const id = EvalRunId.random()
      yield* repo.insertRun({
        id,
        datasetId: dataset.id,
        agentId: agent.id,
        agent: agent.identifier,
        version: input.version ?? null,
        configHash: configHash(config),
        ownerId: agent.ownerId,
        graders: input.graders,
        concurrency: input.concurrency ?? DEFAULT_CONCURRENCY,
        estimateMicros,
        results: rows.map((row) => ({ position: row.position, rowId: row.id, runId: RunId.random() }))
      })
      yield* wake.wake
      return runView(Option.getOrThrow(yield* repo.evalRun(id, agent.ownerId)))
    })

    const ownRun = Effect.fn("Evals.ownRun")(function*(caller: CallerIdentity, id: EvalRunId) {
      const owner = creatorOf(caller)
      const found = owner === null ? Option.none() : yield* repo.evalRun(id, owner)
      if (Option.isNone(found)) return yield* notFound(`eval run ${id}`)
      return found.value
    })

    const getRun = (caller: CallerIdentity, id: EvalRunId) => Effect.map(ownRun(caller, id), runView)

    /**
     * Cancels an eval run (docs/evals.md, "Cancelling"): its pending rows never start, and its rows' runs under way
     * (answers and judges) are cancelled through the runs' own cancel, so they are billed only for the steps they
     * finished. Idempotent: an eval run that has ended is answered as it is.
     */
    const cancelRun = Effect.fn("Evals.cancelRun")(function*(caller: CallerIdentity, id: EvalRunId) {
      const run = yield* ownRun(caller, id)
      if (yield* repo.cancel(run.id, run.ownerId)) {
        const partition = { accountId: run.ownerId, endUserId: "" }
        const flying = yield* repo.inFlight(run.id)
        // A run not queued yet (the driver marked its row and is starting it) is stopped by the driver itself.
        yield* Effect.forEach(
          flying.flatMap((row) => (row.judgeRunId === null ? [row.runId] : [row.runId, row.judgeRunId])),
          (runId) => background.cancel(partition, runId).pipe(Effect.catchTag("NotFound", () => Effect.void)),
          { discard: true }
        )
      }
      return runView(Option.getOrThrow(yield* repo.evalRun(run.id, run.ownerId)))
    })

    const listRuns = Effect.fn("Evals.listRuns")(function*(caller: CallerIdentity, q: { dataset?: EvalDatasetId | undefined; agent?: string | undefined; after?: EvalRunId | undefined; limit?: number | undefined }) {
      const owner = creatorOf(caller)
      if (owner === null) return { data: [], has_more: false }
      if (q.after !== undefined) yield* ownRun(caller, q.after)
      const limit = q.limit ?? 20
      const rows = yield* repo.evalRuns({ ownerId: owner, datasetId: q.dataset ?? null, agent: q.agent ?? null, after: q.after ?? null, limit })
      return { data: rows.slice(0, limit).map(runView), has_more: rows.length > limit }
    })

    const results = Effect.fn("Evals.results")(function*(caller: CallerIdentity, id: EvalRunId, q: { after?: EvalRowId | undefined; limit?: number | undefined }) {
      const run = yield* ownRun(caller, id)
      // `after` is the last row id of the previous page (read as its position in this run).
      let after = 0
      if (q.after !== undefined) {
        const all = yield* repo.allResults(run.id)
        const at = all.find((row) => row.rowId === q.after)
        if (at === undefined) return yield* notFound(`row ${q.after} in eval run ${id}`)
        after = at.position
      }
      const limit = q.limit ?? 20
      const rows = yield* repo.results({ evalRunId: run.id, after, limit })
      const view = run.status === "cancelled"
        ? (row: ResultRow) => resultView(row.status === "graded" ? row : { ...row, status: "cancelled" })
        : resultView
      return { data: rows.slice(0, limit).map(view), has_more: rows.length > limit }
    })

    /** Two runs side by side (docs/evals.md, "Compare"): their figures, and the rows of both whose outcome differs. */
    const compare = Effect.fn("Evals.compare")(function*(caller: CallerIdentity, a: EvalRunId, b: EvalRunId) {
      const first = yield* ownRun(caller, a)
      const second = yield* ownRun(caller, b)
      const mine = new Map((yield* repo.allResults(first.id)).map((row) => [row.rowId, row]))
      const theirs = yield* repo.allResults(second.id)
      const side = (row: ResultRow) => ({ passed: row.passed, score: row.score, output: row.output })
      const changed = theirs.flatMap((row) => {
        const before = mine.get(row.rowId)
        if (before === undefined || before.status !== "graded" || row.status !== "graded") return []
        // Changed: it passes in one and not the other, or its answer is not the same.
        return before.passed !== row.passed || before.output !== row.output ? [{ row_id: row.rowId, a: side(before), b: side(row) }] : []
      })
      const rateA = passRate(first)
      const rateB = passRate(second)
      const delta = (x: bigint, y: bigint) => (y >= x ? formatCredits(y - x) : `-${formatCredits(x - y)}`)
      return {
        a: runView(first),
        b: runView(second),
        pass_rate_delta: rateA === null || rateB === null ? null : rateB - rateA,
        credits_delta: delta(first.credits, second.credits),
        mean_latency_ms_delta: first.meanLatencyMs === null || second.meanLatencyMs === null ? null : Math.round(second.meanLatencyMs - first.meanLatencyMs),
        changed
      }
    })

    return { ownDataset, createDataset, listDatasets, getDataset, deleteDataset, addRows, importRows, addSourced, listRows, createRun, getRun, cancelRun, listRuns, results, compare } as const
  }),
  dependencies: [EvalsRepo.Default, AgentsRepo.Default, ModelCatalog.Default, BackgroundRuns.Default, EvalDriverWake.Default]
}) {}
