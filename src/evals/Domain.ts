import { Schema } from "effect"
import { EvalDatasetId, prefixedId } from "../platform/Ids.js"
import { RunId } from "../runtime/Domain.js"

/**
 * The wire shapes of evaluations (issue 46 items 3-4, docs/evals.md): datasets of an expert, their rows, graders,
 * eval runs and their results. Credits are decimal strings, as the wallet's.
 */

/** An eval run's id (`evr_…`). */
export const EvalRunId = prefixedId("evr", "EvalRunId")
export type EvalRunId = typeof EvalRunId.Type

/** A dataset row's id (`erow_…`). */
export const EvalRowId = prefixedId("erow", "EvalRowId")
export type EvalRowId = typeof EvalRowId.Type

const Text = (max: number) => Schema.String.pipe(Schema.maxLength(max))
const Id = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100))

export const DatasetView = Schema.Struct({
  id: EvalDatasetId,
  object: Schema.Literal("eval.dataset"),
  agent: Schema.String,
  name: Schema.String,
  rows: Schema.Number,
  created_at: Schema.String
}).annotations({ identifier: "EvalDataset" })

export const CreateDataset = Schema.Struct({
  agent: Id,
  name: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200))
})

const Message = Schema.Struct({
  role: Schema.Literal("user", "assistant"),
  content: Text(100_000)
})

export const ExpectedTool = Schema.Struct({
  name: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)),
  /** The arguments the call must carry (each key given must match; others may be there too, unless `exact`). */
  arguments: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
})

const CreditsIn = Schema.Union(Schema.Number, Schema.String).annotations({ description: "Credits (up to 6 decimal places)." })

/**
 * A row: its input (a message, or a conversation whose last message is the user's) and what the answer should be.
 * Every expectation is optional; a grader whose expectation a row lacks (and that has no value of its own) skips it.
 */
export const RowInput = Schema.Struct({
  input: Schema.Union(Text(100_000).pipe(Schema.minLength(1)), Schema.Array(Message).pipe(Schema.minItems(1), Schema.maxItems(200))),
  /** The answer expected (`exact`; `contains` and the judge read it too). */
  expected: Schema.optional(Text(100_000)),
  /** Text(s) the answer must contain. */
  contains: Schema.optional(Schema.Union(Text(10_000), Schema.Array(Text(10_000)).pipe(Schema.maxItems(50)))),
  /** A regular expression (JavaScript syntax) the answer must match. */
  regex: Schema.optional(Text(2_000)),
  /** A JSON Schema the answer, read as JSON, must satisfy. */
  json_schema: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown })),
  /** The tool calls expected, in order. */
  expected_tools: Schema.optional(Schema.Array(ExpectedTool).pipe(Schema.maxItems(50))),
  max_credits: Schema.optional(CreditsIn),
  max_latency_ms: Schema.optional(Schema.Int.pipe(Schema.positive())),
  /** What the LLM judge grades this row by (else the grader's rubric). */
  rubric: Schema.optional(Text(10_000)),
  metadata: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
})
export type RowInput = typeof RowInput.Type

export const RowView = Schema.Struct({
  id: EvalRowId,
  object: Schema.Literal("eval.row"),
  input: Schema.Union(Schema.String, Schema.Array(Message)),
  expected: Schema.optional(Schema.String),
  contains: Schema.optional(Schema.Array(Schema.String)),
  regex: Schema.optional(Schema.String),
  json_schema: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown })),
  expected_tools: Schema.optional(Schema.Array(ExpectedTool)),
  max_credits: Schema.optional(Schema.String),
  max_latency_ms: Schema.optional(Schema.Number),
  rubric: Schema.optional(Schema.String),
  metadata: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown })),
  /** `api`, `csv`, `jsonl`, `promptfoo`, `openai_evals`, `feedback`. */
  source: Schema.String,
  created_at: Schema.String
}).annotations({ identifier: "EvalRow" })

/** The graders an eval run applies to every row (docs/evals.md, "Graders"). */
export const Grader = Schema.Union(
  Schema.Struct({
    type: Schema.Literal("exact"),
    /** Compared when a row has no `expected`. */
    value: Schema.optional(Text(100_000)),
    case_sensitive: Schema.optional(Schema.Boolean),
    /** Leading and trailing white space ignored (true by default). */
    trim: Schema.optional(Schema.Boolean)
  }),
  Schema.Struct({
    type: Schema.Literal("contains"),
    value: Schema.optional(Schema.Union(Text(10_000), Schema.Array(Text(10_000)).pipe(Schema.maxItems(50)))),
    case_sensitive: Schema.optional(Schema.Boolean),
    /** `all` (default) or `any` of the texts. */
    mode: Schema.optional(Schema.Literal("all", "any"))
  }),
  Schema.Struct({
    type: Schema.Literal("regex"),
    pattern: Schema.optional(Text(2_000)),
    flags: Schema.optional(Schema.String.pipe(Schema.pattern(/^[imsu]{0,4}$/)))
  }),
  Schema.Struct({
    type: Schema.Literal("json_schema"),
    schema: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
  }),
  Schema.Struct({
    type: Schema.Literal("tool_trajectory"),
    /** `strict`: exactly these calls in this order; `in_order` (default): these in order, others between allowed; `any`: each made, any order. */
    order: Schema.optional(Schema.Literal("strict", "in_order", "any")),
    /** `subset` (default): the given arguments match; `exact`: the arguments are these and no more; `ignore`. */
    arguments: Schema.optional(Schema.Literal("subset", "exact", "ignore"))
  }),
  Schema.Struct({
    type: Schema.Literal("budget"),
    max_credits: Schema.optional(CreditsIn),
    max_latency_ms: Schema.optional(Schema.Int.pipe(Schema.positive()))
  }),
  Schema.Struct({
    type: Schema.Literal("llm_judge"),
    /** The judge's model: `provider/model` or `builtin` (GET /v1/models). */
    model: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)),
    rubric: Schema.optional(Text(10_000)),
    /** The score (0 to 1) from which the row passes; 0.5 by default. */
    threshold: Schema.optional(Schema.Number.pipe(Schema.between(0, 1)))
  })
).annotations({ identifier: "EvalGrader" })
export type Grader = typeof Grader.Type

export const CreateEvalRun = Schema.Struct({
  // Unchecked: a dataset id of another kind is a dataset that is not there (404), as it was.
  dataset: EvalDatasetId.unchecked.pipe(Schema.minLength(1), Schema.maxLength(100)),
  agent: Id,
  /** A published version of the expert; absent: its draft. */
  version: Schema.optional(Schema.Int.pipe(Schema.positive())),
  graders: Schema.Array(Grader).pipe(Schema.minItems(1), Schema.maxItems(10)),
  /** How many rows run at once (1-20, 4 by default). */
  concurrency: Schema.optional(Schema.Int.pipe(Schema.between(1, 20)))
})

export const EvalRunView = Schema.Struct({
  id: EvalRunId,
  object: Schema.Literal("eval.run"),
  dataset: EvalDatasetId,
  agent: Schema.String,
  /** The version evaluated; null: the draft. */
  version: Schema.NullOr(Schema.Number),
  status: Schema.Literal("running", "completed", "failed", "cancelled"),
  graders: Schema.Array(Schema.Unknown),
  concurrency: Schema.Number,
  /** What the run was expected to cost before it started (docs/evals.md, "Estimate"). */
  estimate_credits: Schema.String,
  /** What its rows were charged so far (the answers and the judges' runs). */
  credits: Schema.String,
  /** Passed rows over graded rows (0 to 1); null before any row is graded. */
  pass_rate: Schema.NullOr(Schema.Number),
  rows_total: Schema.Number,
  rows_done: Schema.Number,
  rows_passed: Schema.Number,
  /** Mean latency of the graded rows' runs. */
  mean_latency_ms: Schema.NullOr(Schema.Number),
  created_at: Schema.String,
  finished_at: Schema.NullOr(Schema.String)
}).annotations({ identifier: "EvalRun" })

export const GradeView = Schema.Struct({
  grader: Schema.String,
  passed: Schema.Boolean,
  score: Schema.Number,
  explanation: Schema.String
})

export const ResultView = Schema.Struct({
  row_id: EvalRowId,
  position: Schema.Number,
  /** `cancelled`: the eval run was cancelled before this row was graded. */
  status: Schema.Literal("pending", "running", "judging", "graded", "cancelled"),
  passed: Schema.NullOr(Schema.Boolean),
  score: Schema.NullOr(Schema.Number),
  explanation: Schema.NullOr(Schema.String),
  grades: Schema.Array(GradeView),
  /** The row's background run (GET /v1/runs/:id) and its trace (GET /v1/runs/:id/trace); null until written. */
  run_id: RunId,
  trace_id: Schema.NullOr(Schema.String),
  credits: Schema.String,
  latency_ms: Schema.NullOr(Schema.Number),
  output: Schema.NullOr(Schema.String)
}).annotations({ identifier: "EvalResult" })

export const CompareView = Schema.Struct({
  a: EvalRunView,
  b: EvalRunView,
  pass_rate_delta: Schema.NullOr(Schema.Number),
  credits_delta: Schema.String,
  mean_latency_ms_delta: Schema.NullOr(Schema.Number),
  /** Rows of the same dataset whose outcome differs between the two runs. */
  changed: Schema.Array(Schema.Struct({
    row_id: EvalRowId,
    a: Schema.Struct({ passed: Schema.NullOr(Schema.Boolean), score: Schema.NullOr(Schema.Number), output: Schema.NullOr(Schema.String) }),
    b: Schema.Struct({ passed: Schema.NullOr(Schema.Boolean), score: Schema.NullOr(Schema.Number), output: Schema.NullOr(Schema.String) })
  }))
}).annotations({ identifier: "EvalComparison" })

const Limit = Schema.optional(Schema.NumberFromString.pipe(Schema.int(), Schema.between(1, 100)))

/**
 * A page's `limit` and `after`, the last id of the previous page: a dataset's, an eval run's or a row's. Unchecked: an
 * `after` of another kind is one that is not there (404), as it was.
 */
export const DatasetPageParams = Schema.Struct({
  limit: Limit,
  after: Schema.optional(EvalDatasetId.unchecked.pipe(Schema.minLength(1), Schema.maxLength(200)))
})
export const RunPageParams = Schema.Struct({
  limit: Limit,
  after: Schema.optional(EvalRunId.unchecked.pipe(Schema.minLength(1), Schema.maxLength(200)))
})
export const RowPageParams = Schema.Struct({
  limit: Limit,
  after: Schema.optional(EvalRowId.unchecked.pipe(Schema.minLength(1), Schema.maxLength(200)))
})

/** Rows as a file's text: CSV (a header row naming the fields) or JSONL (one row object a line). */
export const RowsUpload = Schema.Struct({
  format: Schema.Literal("csv", "jsonl"),
  content: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(5_000_000))
})

export const AddRows = Schema.Union(Schema.Array(RowInput).pipe(Schema.minItems(1), Schema.maxItems(1000)), RowsUpload)

/** An export of another tool: promptfoo's YAML (`tests`), or OpenAI Evals' JSONL items with their graders. */
export const ImportPayload = Schema.Struct({
  format: Schema.Literal("promptfoo", "openai_evals"),
  content: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(5_000_000)),
  /** OpenAI Evals: the eval's `testing_criteria` (`string_check`, `score_model`), when not in each line. */
  testing_criteria: Schema.optional(Schema.Array(Schema.Record({ key: Schema.String, value: Schema.Unknown })))
})
