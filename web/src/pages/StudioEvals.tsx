import { useEffect, useState } from "react"
import { call, itemsOf } from "../api.js"
import { Link } from "../router.js"
import { ListTable } from "./ListTable.js"
import { credits, duration, StudioHeader, when } from "./StudioTabs.js"
import { EvalRunId } from "../../../src/evals/Domain.js"
import type { EvalDatasetId } from "../../../src/platform/Ids.js"

/** Shapes of `/v1/evals` (src/evals/Domain.ts), as this page reads them. */
interface Dataset { id: EvalDatasetId; name: string; rows: number; created_at: string }
interface EvalRun {
  id: EvalRunId
  dataset: EvalDatasetId
  version: number | null
  status: "running" | "completed" | "failed" | "cancelled"
  estimate_credits: string
  credits: string
  pass_rate: number | null
  rows_total: number
  rows_done: number
  rows_passed: number
  mean_latency_ms: number | null
  created_at: string
}
interface Result {
  row_id: string
  position: number
  status: string
  passed: boolean | null
  score: number | null
  explanation: string | null
  run_id: string
  trace_id: string | null
  credits: string
  latency_ms: number | null
  output: string | null
}
interface Comparison {
  pass_rate_delta: number | null
  credits_delta: string
  mean_latency_ms_delta: number | null
  changed: ReadonlyArray<{ row_id: string; a: { passed: boolean | null }; b: { passed: boolean | null } }>
}

const percent = (n: number | null) => n === null ? "—" : `${new Intl.NumberFormat(undefined, { maximumFractionDigits: 1 }).format(n * 100)}%`

const RUN_STATUS: Record<EvalRun["status"], string> = { running: "Running", completed: "Finished", failed: "Failed", cancelled: "Cancelled" }

/** The graders the form offers, in words; the judge needs a model. */
const GRADERS = [
  ["contains", "The answer contains the row's expected text"],
  ["exact", "The answer is exactly the row's expected text"],
  ["regex", "The answer matches the row's pattern"],
  ["json_schema", "The answer is JSON that fits the row's schema"],
  ["tool_trajectory", "The expected tools were called, in order"],
  ["budget", "Within the row's credit and time budgets"],
  ["llm_judge", "A model grades the answer by a rubric"]
] as const
type GraderType = typeof GRADERS[number][0]

/**
 * An expert's evaluations in the studio (issue 46 item 3, docs/evals.md): its datasets (made here, rows pasted or
 * uploaded as CSV or JSONL, imported from promptfoo or OpenAI Evals, or taken from shared thumbs-down answers), eval
 * runs with their estimate, each row's result linked to its trace, two runs compared, and the publish gate.
 */
export const StudioEvalsPage = ({ identifier }: { identifier: string }) => {
  const [datasets, setDatasets] = useState<ReadonlyArray<Dataset> | null>(null)
  const [open, setOpen] = useState<EvalDatasetId | null>(null)
  const [name, setName] = useState("")
  const [gate, setGate] = useState<{ dataset: string; threshold: number } | null>(null)
  const [status, setStatus] = useState<string | null>(null)
  const [error, setError] = useState<string | null>(null)
  const [changes, setChanges] = useState(0)

  useEffect(() => {
    call((c) => c.evals.listDatasets({ urlParams: { agent: identifier, limit: 100 } })).then(
      (page) => setDatasets(itemsOf<Dataset>(page)),
      (e: Error) => setError(e.message)
    )
    call((c) => c.agents.get({ path: { identifier } })).then(
      (a) => setGate(((a as unknown as { eval_gate?: { dataset: string; threshold: number } | null }).eval_gate) ?? null),
      () => undefined
    )
  }, [identifier, changes])

  const create = async () => {
    setError(null)
    if (!name.trim()) return setError("Give the dataset a name.")
    try {
      const made = await call((c) => c.evals.createDataset({ payload: { agent: identifier, name: name.trim() } }))
      setName("")
      setOpen(made.id)
      setStatus(`Dataset “${made.name}” created: add rows to it.`)
      setChanges((n) => n + 1)
    } catch (failure) {
      setError((failure as Error).message)
    }
  }

  return (
    <section className="stack">
      <StudioHeader identifier={identifier} title="Evals" />
      <p className="muted">
        Check that a change still answers well before it goes live: a dataset holds questions and what their answers
        should be; an eval run asks the expert each of them in the background, on your wallet, and grades the answers.
      </p>
      {gate && (
        <p className="card" data-testid="gate">
          Publish gate: a new version whose pass rate on “{datasets?.find((d) => d.id === gate.dataset)?.name ?? "its dataset"}” falls
          more than {percent(gate.threshold)} below the live version's cannot be submitted.
        </p>
      )}
      <form className="row" aria-label="Create a dataset" onSubmit={(e) => { e.preventDefault(); void create() }}>
        <label>New dataset <input value={name} maxLength={200} placeholder="Everyday questions" onChange={(e) => setName(e.target.value)} /></label>
        <button type="submit">Create dataset</button>
      </form>
      <p role="status" aria-live="polite">{status}</p>
      {error && <p role="alert" className="error">{error}</p>}
      {datasets !== null && datasets.length === 0 && <p className="empty-state">No datasets yet: create one above.</p>}
      {datasets !== null && datasets.length > 0 && (
        <ul className="list" data-testid="datasets">
          {datasets.map((d) => (
            <li key={d.id} className="stack">
              <p>
                <strong>{d.name}</strong> <span className="muted small">{d.rows} row{d.rows === 1 ? "" : "s"}, made {when(d.created_at)}</span>{" "}
                <button type="button" className="secondary" aria-expanded={open === d.id} onClick={() => setOpen(open === d.id ? null : d.id)}>
                  {open === d.id ? "Close" : "Open"} {d.name}
                </button>
              </p>
              {open === d.id && (
                <DatasetPanel
                  identifier={identifier}
                  dataset={d}
                  gated={gate?.dataset === d.id}
                  onChanged={() => setChanges((n) => n + 1)}
                />
              )}
            </li>
          ))}
        </ul>
      )}
    </section>
  )
}

const DatasetPanel = ({ identifier, dataset, gated, onChanged }: { identifier: string; dataset: Dataset; gated: boolean; onChanged: () => void }) => {
  const [format, setFormat] = useState<"jsonl" | "csv" | "promptfoo" | "openai_evals">("jsonl")
  const [content, setContent] = useState("")
  const [graders, setGraders] = useState<Record<GraderType, boolean>>({ contains: true, exact: false, regex: false, json_schema: false, tool_trajectory: false, budget: false, llm_judge: false })
  const [judgeModel, setJudgeModel] = useState("builtin")
  const [rubric, setRubric] = useState("")
  const [runs, setRuns] = useState<ReadonlyArray<EvalRun>>([])
  const [openRun, setOpenRun] = useState<EvalRunId | null>(null)
  const [compare, setCompare] = useState<{ a: string; b: string }>({ a: "", b: "" })
  const [comparison, setComparison] = useState<Comparison | null>(null)
  const [threshold, setThreshold] = useState("5")
  const [status, setStatus] = useState<string | null>(null)
  const [error, setError] = useState<string | null>(null)
  const [tick, setTick] = useState(0)

  useEffect(() => {
    call((c) => c.evals.listRuns({ urlParams: { dataset: dataset.id, limit: 20 } })).then((page) => setRuns(itemsOf<EvalRun>(page)), (e: Error) => setError(e.message))
  }, [dataset.id, tick])

  // A running eval is read again every 2 s, and not while the tab is out of sight.
  const running = runs.some((r) => r.status === "running")
  useEffect(() => {
    if (!running) return
    const timer = setInterval(() => { if (document.visibilityState !== "hidden") setTick((n) => n + 1) }, 2000)
    return () => clearInterval(timer)
  }, [running])

  const act = async (what: () => Promise<string>) => {
    setError(null)
    setStatus(null)
    try {
      setStatus(await what())
    } catch (failure) {
      setError((failure as Error).message)
    }
  }

  const addRows = () => act(async () => {
    if (!content.trim()) throw new Error("Paste the rows, or choose a file, first.")
    if (format === "promptfoo" || format === "openai_evals") {
      const imported = await call((c) => c.evals.importRows({ path: { id: dataset.id }, payload: { format, content } }))
      setContent("")
      onChanged()
      const skipped = imported.skipped.length > 0 ? ` Not imported (no grader here): ${imported.skipped.join(", ")}.` : ""
      return `Imported ${imported.added} row${imported.added === 1 ? "" : "s"}.${skipped}`
    }
    const added = await call((c) => c.evals.addRows({ path: { id: dataset.id }, payload: { format, content } as never }))
    const count = added.added
    setContent("")
    onChanged()
    return `Added ${count} row${count === 1 ? "" : "s"}.`
  })

  const fromFeedback = () => act(async () => {
    const added = await call((c) => c.evals.fromFeedback({ path: { id: dataset.id }, payload: {} }))
    const count = added.added
    onChanged()
    return count === 0 ? "No new thumbs-down answers that their people shared." : `Added ${count} thumbs-down answer${count === 1 ? "" : "s"}.`
  })

  const start = () => act(async () => {
    const chosen = GRADERS.map(([type]) => type).filter((type) => graders[type])
    if (chosen.length === 0) throw new Error("Choose at least one way to grade the answers.")
    const payload = {
      dataset: dataset.id,
      agent: identifier,
      graders: chosen.map((type) => type === "llm_judge" ? { type, model: judgeModel.trim() || "builtin", ...(rubric.trim() ? { rubric: rubric.trim() } : {}) } : { type })
    }
    const run = await call((c) => c.evals.createRun({ payload: payload as never }))
    setTick((n) => n + 1)
    setOpenRun(run.id)
    return `Eval started on the draft: about ${credits(run.estimate_credits)} for ${run.rows_total} rows.`
  })

  // Rows not started never start; rows under way stop and are charged only for what they did.
  const cancel = (run: EvalRun) => act(async () => {
    const stopped = await call((c) => c.evals.cancelRun({ path: { id: run.id } }))
    setTick((n) => n + 1)
    return stopped.status === "cancelled"
      ? `Eval cancelled after ${stopped.rows_done} of ${stopped.rows_total} rows; the rows that ran are charged, the others are not.`
      : `This eval had already ended (${RUN_STATUS[stopped.status].toLowerCase()}).`
  })

  const runCompare = () => act(async () => {
    if (!compare.a || !compare.b || compare.a === compare.b) throw new Error("Choose two different runs to compare.")
    setComparison(await call((c) => c.evals.compare({ urlParams: { a: EvalRunId.unchecked.make(compare.a), b: EvalRunId.unchecked.make(compare.b) } })) as unknown as Comparison)
    return "Compared."
  })

  const setGate = (on: boolean) => act(async () => {
    const value = Number(threshold)
    if (on && (!Number.isFinite(value) || value < 0 || value > 100)) throw new Error("The allowed drop is a percentage from 0 to 100.")
    await call((c) => c.agents.update({ path: { identifier }, payload: { eval_gate: on ? { dataset: dataset.id, threshold: value / 100 } : null } as never }))
    onChanged()
    return on ? `“${dataset.name}” is now the publish gate.` : "The publish gate is off."
  })

  return (
    <div className="stack card">
      <fieldset className="stack">
        <legend>Add rows</legend>
        <label>
          Format{" "}
          <select value={format} onChange={(e) => setFormat(e.target.value as typeof format)}>
            <option value="jsonl">JSON lines ({"{\"input\": …, \"contains\": …}"} a line)</option>
            <option value="csv">CSV (a header row: input, expected, contains…)</option>
            <option value="promptfoo">promptfoo YAML (tests with vars and assert)</option>
            <option value="openai_evals">OpenAI Evals JSONL</option>
          </select>
        </label>
        <label>Rows <textarea rows={4} value={content} onChange={(e) => setContent(e.target.value)} /></label>
        <label>
          Or a file{" "}
          <input type="file" accept=".jsonl,.json,.csv,.yaml,.yml,.txt" onChange={(e) => {
            const file = e.target.files?.[0]
            if (file) void file.text().then(setContent)
          }} />
        </label>
        <div className="row">
          <button type="button" onClick={() => void addRows()}>Add rows to {dataset.name}</button>
          <button type="button" className="secondary" onClick={() => void fromFeedback()}>Add shared thumbs-down answers</button>
        </div>
      </fieldset>
      <fieldset className="stack">
        <legend>Run an eval of the draft</legend>
        {GRADERS.map(([type, label]) => (
          <label key={type} className="check">
            <input type="checkbox" checked={graders[type]} onChange={(e) => setGraders((g) => ({ ...g, [type]: e.target.checked }))} /> {label}
          </label>
        ))}
        {graders.llm_judge && (
          <div className="row">
            <label>Judge model <input value={judgeModel} onChange={(e) => setJudgeModel(e.target.value)} /></label>
            <label>Rubric <input value={rubric} maxLength={10_000} placeholder="Correct, polite and brief" onChange={(e) => setRubric(e.target.value)} /></label>
          </div>
        )}
        <div className="row"><button type="button" onClick={() => void start()}>Run the eval</button></div>
      </fieldset>
      <p role="status" aria-live="polite">{status}</p>
      {error && <p role="alert" className="error">{error}</p>}
      {runs.length > 0 && (
        <ListTable
          caption={`Eval runs of ${dataset.name}, newest first`}
          testId="eval-runs"
          rows={runs}
          rowKey={(run) => run.id}
          first={{
            label: "Started",
            cell: (run) => (
              <button type="button" className="link" aria-expanded={openRun === run.id} onClick={() => setOpenRun(openRun === run.id ? null : run.id)}>
                {when(run.created_at)}<span className="visually-hidden">: its results</span>
              </button>
            )
          }}
          columns={[
            { label: "Of", cell: (run) => run.version === null ? "the draft" : `version ${run.version}` },
            {
              label: "Status",
              cell: (run) => (
                <>
                  {RUN_STATUS[run.status]}
                  {run.status === "running" && (
                    <>
                      {" "}
                      <button type="button" className="secondary" onClick={() => void cancel(run)}>
                        Cancel<span className="visually-hidden"> the eval run started {when(run.created_at)}</span>
                      </button>
                    </>
                  )}
                </>
              )
            },
            { label: "Pass rate", numeric: true, testId: "pass-rate", cell: (run) => percent(run.pass_rate) },
            { label: "Rows", numeric: true, cell: (run) => `${run.rows_done} of ${run.rows_total}` },
            { label: "Credits (estimate)", cardLabel: "Credits", numeric: true, cell: (run) => `${credits(run.credits)} (${credits(run.estimate_credits)})` },
            { label: "Mean time", numeric: true, cell: (run) => run.mean_latency_ms === null ? "—" : duration(run.mean_latency_ms) }
          ]}
        />
      )}
      {openRun && <Results identifier={identifier} runId={openRun} tick={tick} />}
      {runs.length > 1 && (
        <fieldset className="stack">
          <legend>Compare two runs</legend>
          <div className="row">
            {(["a", "b"] as const).map((side) => (
              <label key={side}>
                {side === "a" ? "Before" : "After"}{" "}
                <select value={compare[side]} onChange={(e) => setCompare((c) => ({ ...c, [side]: e.target.value }))}>
                  <option value="">Choose a run</option>
                  {runs.map((r) => <option key={r.id} value={r.id}>{when(r.created_at)} ({percent(r.pass_rate)})</option>)}
                </select>
              </label>
            ))}
            <button type="button" className="secondary" onClick={() => void runCompare()}>Compare</button>
          </div>
          {comparison && (
            <p data-testid="comparison">
              Pass rate {comparison.pass_rate_delta === null ? "not comparable" : `${comparison.pass_rate_delta >= 0 ? "up" : "down"} ${percent(Math.abs(comparison.pass_rate_delta))}`},
              credits {Number(comparison.credits_delta) >= 0 ? "up" : "down"} {credits(Math.abs(Number(comparison.credits_delta)))},
              {" "}{comparison.changed.length} row{comparison.changed.length === 1 ? "" : "s"} changed
              ({comparison.changed.filter((c) => c.b.passed === true).length} now pass, {comparison.changed.filter((c) => c.b.passed === false).length} now fail).
            </p>
          )}
        </fieldset>
      )}
      <fieldset className="stack">
        <legend>Publish gate</legend>
        <p className="muted small">
          With this dataset as the gate, a new version can be submitted only after an eval run of the draft on it, and only if
          its pass rate is not more than the allowed drop below the live version's.
        </p>
        <div className="row">
          <label>Allowed drop (%) <input type="number" min={0} max={100} value={threshold} onChange={(e) => setThreshold(e.target.value)} /></label>
          <button type="button" className="secondary" onClick={() => void setGate(true)}>Make {dataset.name} the publish gate</button>
          {gated && <button type="button" className="secondary" onClick={() => void setGate(false)}>Turn the gate off</button>}
        </div>
      </fieldset>
    </div>
  )
}

const Results = ({ identifier, runId, tick }: { identifier: string; runId: EvalRunId; tick: number }) => {
  const [results, setResults] = useState<ReadonlyArray<Result> | null>(null)
  useEffect(() => {
    call((c) => c.evals.runResults({ path: { id: runId }, urlParams: { limit: 100 } })).then((page) => setResults(itemsOf<Result>(page)), () => setResults([]))
  }, [runId, tick])
  return (
    <ListTable
      caption="Results, in the dataset's order (the first 100)"
      testId="eval-results"
      rows={results}
      rowKey={(r) => r.row_id}
      first={{ label: "Row", cell: (r) => r.position }}
      columns={[
        { label: "Outcome", cell: (r) => r.passed === null ? (r.status === "graded" ? "Not graded" : r.status === "cancelled" ? "Cancelled" : "Waiting") : r.passed ? "Passed" : "Failed" },
        { label: "Why", cell: (r) => r.explanation ?? "—" },
        { label: "Credits", numeric: true, cell: (r) => credits(r.credits) },
        {
          label: "Trace",
          cell: (r) => r.trace_id
            ? <Link to={`/studio/${identifier}/traces?trace=${encodeURIComponent(r.run_id)}`}>Open the trace<span className="visually-hidden"> of row {r.position}</span></Link>
            : "—"
        }
      ]}
    />
  )
}
