import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { InsufficientCredits } from "../billing/Domain.js"
import { PlatformAuthentication } from "../identity/Domain.js"
import { RunId } from "../runtime/Domain.js"
import { InvalidRequest, NotFound } from "../platform/Errors.js"
import {
  AddRows,
  CompareView,
  CreateDataset,
  CreateEvalRun,
  DatasetView,
  EvalRunView,
  ImportPayload,
  DatasetPageParams,
  EvalRowId,
  EvalRunId,
  ResultView,
  RowPageParams,
  RowView,
  RunPageParams
} from "./Domain.js"
import { EvalDatasetId } from "../platform/Ids.js"

// Unchecked: an id of another kind in the path is a dataset or an eval run that is not there (404), as it was.
const DatasetPath = Schema.Struct({ id: EvalDatasetId.unchecked.pipe(Schema.minLength(1), Schema.maxLength(100)) })
const RunPath = Schema.Struct({ id: EvalRunId.unchecked.pipe(Schema.minLength(1), Schema.maxLength(100)) })
const RunRef = EvalRunId.unchecked.pipe(Schema.maxLength(100))

const RowsAdded = Schema.Struct({
  object: Schema.Literal("eval.rows.added"),
  dataset: EvalDatasetId,
  /** Rows written (a thumbs-down already in the dataset is not added again). */
  added: Schema.Number,
  row_ids: Schema.Array(EvalRowId)
})

const page = <S extends Schema.Schema.Any>(item: S) => Schema.Struct({ data: Schema.Array(item), has_more: Schema.Boolean })

/** Evaluations (issue 46 item 3, docs/evals.md): datasets, rows, eval runs, results, comparisons. */
export class EvalsApi extends HttpApiGroup.make("evals")
  .add(
    HttpApiEndpoint.post("createDataset", "/v1/evals/datasets")
      .setPayload(CreateDataset)
      .addSuccess(DatasetView, { status: 201 })
      .addError(NotFound)
      .annotate(OpenApi.Description, "A dataset of one of your experts (`agent`: its identifier). Only the expert's creator sees its datasets.")
  )
  .add(
    HttpApiEndpoint.get("listDatasets", "/v1/evals/datasets")
      .setUrlParams(Schema.Struct({ agent: Schema.optional(Schema.String.pipe(Schema.maxLength(100))), ...DatasetPageParams.fields }))
      .addSuccess(page(DatasetView))
      .addError(NotFound)
      .annotate(OpenApi.Description, "Your datasets, newest first (`agent` filters); `limit` (1-100, 20) and `after` (the last id of the previous page).")
  )
  .add(HttpApiEndpoint.get("getDataset", "/v1/evals/datasets/:id").setPath(DatasetPath).addSuccess(DatasetView).addError(NotFound))
  .add(
    HttpApiEndpoint.del("deleteDataset", "/v1/evals/datasets/:id")
      .setPath(DatasetPath)
      .addSuccess(Schema.Struct({ id: Schema.String, object: Schema.Literal("eval.dataset"), deleted: Schema.Literal(true) }))
      .addError(NotFound)
      .annotate(OpenApi.Description, "Deletes the dataset, its rows, and its eval runs with their results (the rows' runs and traces stay).")
  )
  .add(
    HttpApiEndpoint.post("addRows", "/v1/evals/datasets/:id/rows")
      .setPath(DatasetPath)
      .setPayload(AddRows)
      .addSuccess(RowsAdded, { status: 201 })
      .addError(NotFound)
      .annotate(
        OpenApi.Description,
        "Appends rows: a JSON array of rows (`input`: a message or a conversation; `expected`, `contains`, `regex`, " +
          "`json_schema`, `expected_tools`, `max_credits`, `max_latency_ms`, `rubric`), or a file's text as " +
          "`{\"format\": \"csv\" | \"jsonl\", \"content\": \"...\"}` (CSV with a header naming those fields). All or none: " +
          "a bad row is a 400 naming it."
      )
  )
  .add(
    HttpApiEndpoint.get("listRows", "/v1/evals/datasets/:id/rows")
      .setPath(DatasetPath)
      .setUrlParams(RowPageParams)
      .addSuccess(page(RowView))
      .addError(NotFound)
      .annotate(OpenApi.Description, "The dataset's rows in order; `limit` (1-100, 20) and `after` (the last row id of the previous page).")
  )
  .add(
    HttpApiEndpoint.post("importRows", "/v1/evals/datasets/:id/import")
      .setPath(DatasetPath)
      .setPayload(ImportPayload)
      .addSuccess(Schema.Struct({ ...RowsAdded.fields, skipped: Schema.Array(Schema.String) }), { status: 201 })
      .addError(NotFound)
      .annotate(
        OpenApi.Description,
        "Imports another tool's tests as rows: promptfoo YAML (`tests` with `vars` and `assert`: equals, contains, " +
          "icontains, contains-all, regex, is-json, llm-rubric, latency) or OpenAI Evals JSONL (items, with " +
          "`string_check` and `score_model` criteria per line or in `testing_criteria`). What has no grader here is " +
          "listed in `skipped`."
      )
  )
  .add(
    HttpApiEndpoint.post("fromFeedback", "/v1/evals/datasets/:id/rows/from_feedback")
      .setPath(DatasetPath)
      .setPayload(Schema.Struct({ limit: Schema.optional(Schema.Int.pipe(Schema.between(1, 1000))) }))
      .addSuccess(RowsAdded, { status: 201 })
      .addError(NotFound)
      .annotate(
        OpenApi.Description,
        "Adds the thumbs-down answers of the dataset's expert whose end users shared them (`share: true` on their " +
          "feedback) as rows: the user's message as input, the answer and the reason in `metadata`. Feedback not " +
          "shared is never read; a turn already added is not added again."
      )
  )
  .add(
    HttpApiEndpoint.post("fromRun", "/v1/evals/datasets/:id/rows/from_run")
      .setPath(DatasetPath)
      .setPayload(Schema.Struct({
        run: RunId.unchecked.pipe(Schema.minLength(1), Schema.maxLength(100)),
        expected: Schema.optional(Schema.NullOr(Schema.String.pipe(Schema.maxLength(100_000))))
      }))
      .addSuccess(RowsAdded, { status: 201 })
      .addError(NotFound)
      .annotate(
        OpenApi.Description,
        "Adds a traced run of the dataset's expert as a row (\"add to dataset\" from a trace): its input (a message or a " +
          "conversation) and, as `expected`, its answer, or `expected` as given (`null`: none). Your own background " +
          "runs are read from their record; any other run (a buyer's) only from the content its trace kept, so a run " +
          "whose expert had `trace_content` off is refused (400) and nothing of it is answered. A run is added once."
      )
  )
  .add(
    HttpApiEndpoint.post("createRun", "/v1/evals/runs")
      .setPayload(CreateEvalRun)
      .addSuccess(EvalRunView, { status: 201 })
      .addError(NotFound)
      .addError(InsufficientCredits)
      .annotate(
        OpenApi.Description,
        "Runs the dataset against the expert (its draft, or `version`) as background runs, `concurrency` at a time, on " +
          "your wallet, and grades each row with `graders`. Answers at once with `estimate_credits` (docs/evals.md, " +
          "\"Estimate\"); 402 when the balance is below it."
      )
  )
  .add(
    HttpApiEndpoint.get("listRuns", "/v1/evals/runs")
      .setUrlParams(Schema.Struct({
        dataset: Schema.optional(EvalDatasetId.unchecked.pipe(Schema.maxLength(100))),
        agent: Schema.optional(Schema.String.pipe(Schema.maxLength(100))),
        ...RunPageParams.fields
      }))
      .addSuccess(page(EvalRunView))
      .addError(NotFound)
      .annotate(OpenApi.Description, "Your eval runs, newest first (`dataset`, `agent` filter); `limit` and `after`.")
  )
  .add(
    HttpApiEndpoint.get("getRun", "/v1/evals/runs/:id")
      .setPath(RunPath)
      .addSuccess(EvalRunView)
      .addError(NotFound)
      .annotate(OpenApi.Description, "An eval run: `status`, `pass_rate`, `credits`, `rows_total`, `rows_done`.")
  )
  .add(
    HttpApiEndpoint.post("cancelRun", "/v1/evals/runs/:id/cancel")
      .setPath(RunPath)
      .addSuccess(EvalRunView)
      .addError(NotFound)
      .annotate(
        OpenApi.Description,
        "Cancels a running eval run: its rows not started never start, and its rows' runs under way (answers and " +
          "judges) are cancelled as `POST /v1/runs/:id/cancel` does, billed only for the steps they finished. Answers " +
          "the eval run, `cancelled`, its `credits` what its rows' runs were charged (they end within a second). " +
          "Idempotent: an eval run that has ended is answered as it is."
      )
  )
  .add(
    HttpApiEndpoint.get("runResults", "/v1/evals/runs/:id/results")
      .setPath(RunPath)
      .setUrlParams(RowPageParams)
      .addSuccess(page(ResultView))
      .addError(NotFound)
      .annotate(
        OpenApi.Description,
        "The rows' results in dataset order: passed, score, each grader's explanation, the row's run and trace, its " +
          "credits. `limit` (1-100, 20) and `after` (the last `row_id` of the previous page)."
      )
  )
  .add(
    HttpApiEndpoint.get("compare", "/v1/evals/compare")
      .setUrlParams(Schema.Struct({ a: RunRef, b: RunRef }))
      .addSuccess(CompareView)
      .addError(NotFound)
      .annotate(OpenApi.Description, "Two eval runs side by side: pass rate, credits and latency (b minus a), and the rows whose outcome changed.")
  )
  .middleware(PlatformAuthentication)
  .addError(InvalidRequest)
  .annotate(OpenApi.Title, "Evaluations")
  .annotate(OpenApi.Description, "Datasets of an expert, eval runs with graders, results linked to traces, comparisons.")
{}
