import { csvRecords } from "../platform/Csv.js"
import { Either, ParseResult, Schema } from "effect"
import yaml from "js-yaml"
import { RowInput } from "./Domain.js"
import { type Expectations, microsOf, riskyPattern } from "./Graders.js"

/**
 * Rows in and out (docs/evals.md, "Rows"): a row as the API takes it, as stored (its input as a message and the
 * conversation before it, its expectations with credits as micro-credits), and rows read from CSV, JSONL, promptfoo
 * YAML and OpenAI Evals exports. Pure: each parser answers rows, or the first problem with its line.
 */

/** A message's text: a string as it is, or the text parts of a content array (a turn's or a trace's message). */
export const textOf = (content: unknown): string =>
  typeof content === "string"
    ? content
    : Array.isArray(content)
    ? content.map((part) => (typeof part === "object" && part !== null && (part as { type?: string }).type === "text" ? String((part as { text?: unknown }).text ?? "") : "")).join("")
    : ""

export interface StoredInput {
  readonly message: string
  readonly history: ReadonlyArray<{ readonly role: "user" | "assistant"; readonly content: string }>
}

export interface StoredRow {
  readonly input: StoredInput
  readonly expected: Expectations & { readonly metadata?: Record<string, unknown> | undefined }
}

const defined = <A extends Record<string, unknown>>(record: A): A =>
  Object.fromEntries(Object.entries(record).filter(([, value]) => value !== undefined)) as A

/** A row as stored, or why it cannot be (`at` names it: `rows[3]`, `line 4`). */
export const toStored = (row: RowInput, at: string): Either.Either<StoredRow, string> => {
  let input: StoredInput
  if (typeof row.input === "string") input = { message: row.input, history: [] }
  else {
    const last = row.input[row.input.length - 1]!
    if (last.role !== "user") return Either.left(`${at}.input: a conversation ends with the user's message`)
    input = { message: last.content, history: row.input.slice(0, -1) }
  }
  let maxCredits: string | undefined
  if (row.max_credits !== undefined) {
    const micros = microsOf(row.max_credits)
    if (micros === undefined) return Either.left(`${at}.max_credits: must be an amount of credits with at most 6 decimal places`)
    maxCredits = micros.toString()
  }
  if (row.regex !== undefined) {
    try {
      new RegExp(row.regex)
    } catch {
      return Either.left(`${at}.regex: not a valid regular expression`)
    }
    if (riskyPattern(row.regex)) return Either.left(`${at}.regex: a quantified group holding a quantifier may take exponential time`)
  }
  return Either.right({
    input,
    expected: defined({
      expected: row.expected,
      contains: row.contains === undefined ? undefined : typeof row.contains === "string" ? [row.contains] : row.contains,
      regex: row.regex,
      json_schema: row.json_schema,
      expected_tools: row.expected_tools,
      max_credits: maxCredits,
      max_latency_ms: row.max_latency_ms,
      rubric: row.rubric,
      metadata: row.metadata
    })
  })
}

/** A stored row as the API shows it. */
export const rowFields = (row: StoredRow) => {
  const { max_credits, ...rest } = row.expected
  return {
    input: row.input.history.length === 0 ? row.input.message : [...row.input.history, { role: "user" as const, content: row.input.message }],
    ...rest,
    ...(max_credits === undefined ? {} : { max_credits: formatMicros(BigInt(max_credits)) })
  }
}

const formatMicros = (micros: bigint) => {
  const fraction = (micros % 1_000_000n).toString().padStart(6, "0").replace(/0+$/, "")
  return fraction.length === 0 ? (micros / 1_000_000n).toString() : `${micros / 1_000_000n}.${fraction}`
}

const decodeRow = Schema.decodeUnknownEither(RowInput, { onExcessProperty: "ignore" })

/** An object (a JSONL line, a CSV record) as a stored row. */
export const fromObject = (value: unknown, at: string): Either.Either<StoredRow, string> => {
  const decoded = decodeRow(value)
  if (Either.isLeft(decoded)) {
    return Either.left(`${at}: ${ParseResult.TreeFormatter.formatErrorSync(decoded.left).split("\n").slice(-1)[0]!.trim()}`)
  }
  return toStored(decoded.right, at)
}

const all = (items: ReadonlyArray<Either.Either<StoredRow, string>>): Either.Either<Array<StoredRow>, string> => {
  const rows: Array<StoredRow> = []
  for (const item of items) {
    if (Either.isLeft(item)) return Either.left(item.left)
    rows.push(item.right)
  }
  return Either.right(rows)
}

export const parseJsonl = (text: string): Either.Either<Array<StoredRow>, string> =>
  all(text.split(/\r?\n/).flatMap((line, i) => {
    if (line.trim() === "") return []
    try {
      return [fromObject(JSON.parse(line), `line ${i + 1}`)]
    } catch {
      return [Either.left(`line ${i + 1}: not JSON`)]
    }
  }))

/** CSV records (src/platform/Csv.ts) without its blank lines. */
export const parseCsvRecords = (text: string): Either.Either<Array<Array<string>>, string> =>
  Either.match(csvRecords(text), {
    onLeft: () => Either.left("the CSV ends inside a quoted field"),
    onRight: (records) => Either.right(records.filter((r) => !(r.length === 1 && r[0] === "")))
  })

/** Columns holding JSON (an object or array) rather than text. */
const JSON_COLUMNS = new Set(["json_schema", "expected_tools", "metadata"])

/**
 * CSV with a header: `input` (or `message`/`question`), `expected`, `contains` (texts split by `|`), `regex`,
 * `json_schema` and `expected_tools` (JSON), `max_credits`, `max_latency_ms`, `rubric`. Empty cells are absent.
 */
export const parseCsv = (text: string): Either.Either<Array<StoredRow>, string> =>
  Either.flatMap(parseCsvRecords(text), (records) => {
    const [header, ...lines] = records
    if (header === undefined) return Either.left("the CSV is empty")
    const names = header.map((name) => name.trim().toLowerCase())
    const inputColumn = names.findIndex((name) => name === "input" || name === "message" || name === "question" || name === "prompt")
    if (inputColumn < 0) return Either.left("the CSV's header names no input column (input, message, question or prompt)")
    return all(lines.map((cells, i) => {
      const at = `line ${i + 2}`
      const value: Record<string, unknown> = {}
      for (const [index, name] of names.entries()) {
        const cell = cells[index]
        if (cell === undefined || cell === "") continue
        if (index === inputColumn) value.input = cell
        else if (JSON_COLUMNS.has(name)) {
          try {
            value[name] = JSON.parse(cell)
          } catch {
            return Either.left(`${at}.${name}: not JSON`)
          }
        } else if (name === "contains") value.contains = cell.split("|").map((part) => part.trim()).filter((part) => part !== "")
        else if (name === "max_latency_ms") value.max_latency_ms = Number(cell)
        else if (["expected", "regex", "max_credits", "rubric"].includes(name)) value[name] = cell
      }
      return fromObject(value, at)
    }))
  })

export interface Imported {
  readonly rows: Array<StoredRow>
  /** Assertions or criteria that have no grader here, each once with how many rows had it. */
  readonly skipped: Array<string>
}

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

const render = (template: string, vars: Record<string, unknown>) =>
  template.replace(/\{\{\s*([\w.]+)\s*\}\}/g, (whole, name: string) => {
    const value = name.split(".").reduce<unknown>((at, key) => (isRecord(at) ? at[key] : undefined), vars)
    return value === undefined ? whole : typeof value === "string" ? value : JSON.stringify(value)
  })

const INPUT_VARS = ["input", "message", "question", "query", "prompt"]

const count = (skipped: Map<string, number>, what: string) => skipped.set(what, (skipped.get(what) ?? 0) + 1)
const skippedList = (skipped: Map<string, number>) => [...skipped].map(([what, n]) => `${what} (${n} row${n === 1 ? "" : "s"})`)

/**
 * promptfoo YAML (its `tests`, with `defaultTest` merged): the input is the first prompt rendered with the test's
 * `vars` when the file has a text prompt, else the var named input, message, question, query or prompt (or the only
 * var). Assertions: `equals` → expected, `contains`/`icontains`/`contains-all`/`contains-any` → contains, `regex`,
 * `is-json` (with a schema) → json_schema, `llm-rubric` → rubric, `latency` → max_latency_ms. Others are reported.
 */
export const parsePromptfoo = (text: string): Either.Either<Imported, string> => {
  let doc: unknown
  try {
    doc = yaml.load(text, { schema: yaml.JSON_SCHEMA })
  } catch (error) {
    return Either.left(`not YAML: ${(error as Error).message.split("\n")[0]}`)
  }
  if (!isRecord(doc) || !Array.isArray(doc.tests)) return Either.left("a promptfoo file has a `tests` list")
  const prompts = Array.isArray(doc.prompts) ? doc.prompts : typeof doc.prompts === "string" ? [doc.prompts] : []
  const prompt = prompts.find((p): p is string => typeof p === "string" && !p.startsWith("file://"))
  const defaults = isRecord(doc.defaultTest) ? doc.defaultTest : {}
  const skipped = new Map<string, number>()
  const rows: Array<StoredRow> = []
  for (const [i, test] of doc.tests.entries()) {
    const at = `tests[${i}]`
    if (!isRecord(test)) return Either.left(`${at}: a test is a mapping`)
    const vars = { ...(isRecord(defaults.vars) ? defaults.vars : {}), ...(isRecord(test.vars) ? test.vars : {}) }
    let input: string | undefined
    if (prompt !== undefined) input = render(prompt, vars)
    else {
      const name = INPUT_VARS.find((n) => typeof vars[n] === "string") ?? (Object.keys(vars).length === 1 ? Object.keys(vars)[0] : undefined)
      const value = name === undefined ? undefined : vars[name]
      input = value === undefined ? undefined : typeof value === "string" ? value : JSON.stringify(value)
    }
    if (input === undefined || input === "") return Either.left(`${at}: no input (a text prompt, or a var named ${INPUT_VARS.join(", ")})`)
    const row: Record<string, unknown> = { input }
    const contains: Array<string> = []
    const asserts = [...(Array.isArray(defaults.assert) ? defaults.assert : []), ...(Array.isArray(test.assert) ? test.assert : [])]
    for (const assertion of asserts) {
      if (!isRecord(assertion) || typeof assertion.type !== "string") continue
      const value = typeof assertion.value === "string" ? render(assertion.value, vars) : assertion.value
      switch (assertion.type) {
        case "equals":
          row.expected = typeof value === "string" ? value : JSON.stringify(value)
          break
        case "contains":
        case "icontains":
          if (typeof value === "string") contains.push(value)
          break
        case "contains-all":
          if (Array.isArray(value)) contains.push(...value.filter((v): v is string => typeof v === "string"))
          break
        case "regex":
          if (typeof value === "string") row.regex = value
          break
        case "is-json":
          row.json_schema = isRecord(value) ? value : {}
          break
        case "llm-rubric":
          if (typeof value === "string") row.rubric = value
          break
        case "latency":
          if (typeof assertion.threshold === "number") row.max_latency_ms = Math.max(1, Math.round(assertion.threshold))
          break
        default:
          count(skipped, `assert type ${assertion.type}`)
      }
    }
    if (contains.length > 0) row.contains = contains
    const stored = fromObject(row, at)
    if (Either.isLeft(stored)) return Either.left(stored.left)
    rows.push(stored.right)
  }
  return Either.right({ rows, skipped: skippedList(skipped) })
}

/** `{{item.x}}` and `{{sample.output_text}}` templates of OpenAI Evals, read against one item. */
const itemValue = (template: unknown, item: Record<string, unknown>): string | undefined => {
  if (typeof template !== "string") return undefined
  const rendered = render(template, { item })
  return /\{\{/.test(rendered) ? undefined : rendered
}

/**
 * OpenAI Evals JSONL: one item a line (`{"item": {...}}` or the item itself); the input is the item's `input`,
 * `question`, `prompt` or `messages`. Criteria (each line's `testing_criteria`, else the eval's): `string_check`
 * `eq` → expected, `like`/`ilike` → contains (the reference's text); `score_model` → rubric (its messages' text,
 * with `{{item.*}}` filled in). Other criteria are reported.
 */
export const parseOpenAiEvals = (
  text: string,
  criteria: ReadonlyArray<Record<string, unknown>> = []
): Either.Either<Imported, string> => {
  const skipped = new Map<string, number>()
  const rows: Array<StoredRow> = []
  for (const [i, line] of text.split(/\r?\n/).entries()) {
    if (line.trim() === "") continue
    const at = `line ${i + 1}`
    let parsed: unknown
    try {
      parsed = JSON.parse(line)
    } catch {
      return Either.left(`${at}: not JSON`)
    }
    if (!isRecord(parsed)) return Either.left(`${at}: an item is an object`)
    const item = isRecord(parsed.item) ? parsed.item : parsed
    const own = Array.isArray(parsed.testing_criteria) ? parsed.testing_criteria.filter(isRecord) : criteria
    let input: unknown = item.input ?? item.question ?? item.prompt
    if (input === undefined && Array.isArray(item.messages)) input = item.messages
    if (Array.isArray(input)) {
      input = input.filter(isRecord).filter((m) => m.role === "user" || m.role === "assistant").map((m) => ({
        role: m.role,
        content: typeof m.content === "string" ? m.content : JSON.stringify(m.content)
      }))
    }
    const row: Record<string, unknown> = { input, metadata: { openai_item: item } }
    const contains: Array<string> = []
    for (const criterion of own) {
      if (criterion.type === "string_check") {
        const reference = itemValue(criterion.reference, item)
        if (reference === undefined) {
          count(skipped, "string_check without an item reference")
          continue
        }
        if (criterion.operation === "eq") row.expected = reference
        else if (criterion.operation === "like" || criterion.operation === "ilike") contains.push(reference)
        else count(skipped, `string_check ${String(criterion.operation)}`)
      } else if (criterion.type === "score_model") {
        const messages = Array.isArray(criterion.input) ? criterion.input.filter(isRecord) : []
        const rubric = messages.map((m) => {
          const content = typeof m.content === "string" ? m.content : isRecord(m.content) && typeof m.content.text === "string" ? m.content.text : ""
          return render(content, { item, sample: { output_text: "(the answer below)" } })
        }).filter((t) => t !== "").join("\n")
        if (rubric !== "") row.rubric = rubric
      } else count(skipped, `criterion ${String(criterion.type)}`)
    }
    if (contains.length > 0) row.contains = contains
    const stored = fromObject(row, at)
    if (Either.isLeft(stored)) return Either.left(stored.left)
    rows.push(stored.right)
  }
  if (rows.length === 0) return Either.left("no items")
  return Either.right({ rows, skipped: skippedList(skipped) })
}
