import * as Tool from "@effect/ai/Tool"
import { Effect, Either, Option, ParseResult, Schema } from "effect"
import { RunsRepo } from "../Repo.js"
import { CalculatorError, evaluate } from "./Calculator.js"
import type { Partition } from "../../identity/Partition.js"
import type { MemoryOwner } from "../Ports.js"

/**
 * The built-in tools an agent may list (spec names: `get_time`, `calculator`, `write_file`, `read_file`,
 * `list_files`; `memory_save` and `memory_search` are memory tools, tools/Memory.ts). Files live in the run's workspace,
 * so nothing crosses from one end user to another.
 */

/** Where a tool call runs: the agent, whose data it is, and the workspace (a session's, or the end user's own). */
export interface ToolContext {
  readonly agentId: string
  readonly partition: Partition
  readonly workspace: string
  /** The knowledge `file_search` searches; none: the run has no `file_search`. */
  readonly knowledge?: KnowledgeScope | undefined
  /** Whose memory the memory tools reach; none: the run has no memory tools. */
  readonly memory?: MemoryOwner | undefined
}

/** Knowledge bases of `owner` a run searches, and its citations' numbering (one count per run). */
export interface KnowledgeScope {
  readonly owner: Partition
  readonly storeIds: ReadonlyArray<string>
  readonly maxResults: number
  readonly citations: { next: number }
}

/** A tool ran and failed: the model is told, and the run goes on (`tool_call.failed`). */
export class ToolFailure extends Schema.TaggedError<ToolFailure>()("ToolFailure", {
  message: Schema.String,
  /** A machine-readable reason, when there is one (`credential_required`, `time_limit`, ...): `tool_call.failed` carries it. */
  code: Schema.optional(Schema.String)
}) {}

interface BuiltinTool<P> {
  readonly description: string
  readonly parameters: Schema.Schema<P, any>
  readonly run: (params: P, context: ToolContext) => Effect.Effect<unknown, ToolFailure, RunsRepo>
}

const MAX_FILE_BYTES = 100_000

const Path = Schema.String.pipe(
  Schema.pattern(/^(?!\/)(?!.*(^|\/)\.\.?(\/|$))[A-Za-z0-9._\-/]{1,200}$/, {
    message: () => "path must be a relative path of 1-200 characters (A-Z a-z 0-9 . _ - /) without . or .. segments"
  })
)

const define = <P>(tool: BuiltinTool<P>) => tool

export const BUILTIN = {
  get_time: define({
    description: "The current date and time (UTC).",
    parameters: Schema.Struct({}),
    run: () =>
      Effect.sync(() => {
        const now = new Date()
        return { iso: now.toISOString(), unix: Math.floor(now.getTime() / 1000), timezone: "UTC" }
      })
  }),
  calculator: define({
    description: "Evaluates an arithmetic expression: numbers, + - * / % ^ and parentheses.",
    parameters: Schema.Struct({ expression: Schema.String.annotations({ description: "for example (2 + 3) * 4" }) }),
    run: ({ expression }) =>
      Effect.try({
        try: () => ({ expression, result: evaluate(expression) }),
        catch: (error) =>
          new ToolFailure({
            message: error instanceof CalculatorError ? `Invalid expression: ${error.message}` : "Invalid expression"
          })
      })
  }),
  write_file: define({
    description: "Writes a text file in the workspace (replacing it if it exists).",
    parameters: Schema.Struct({ path: Path, content: Schema.String }),
    run: ({ content, path }, context) =>
      Effect.gen(function*() {
        const bytes = Buffer.byteLength(content)
        if (bytes > MAX_FILE_BYTES) {
          return yield* new ToolFailure({ message: `content is ${bytes} bytes; the limit is ${MAX_FILE_BYTES}` })
        }
        yield* (yield* RunsRepo).writeFile(context.partition, context.workspace, path, content)
        return { path, bytes }
      })
  }),
  read_file: define({
    description: "Reads a text file from the workspace.",
    parameters: Schema.Struct({ path: Path }),
    run: ({ path }, context) =>
      Effect.gen(function*() {
        const content = yield* (yield* RunsRepo).readFile(context.partition, context.workspace, path)
        if (Option.isNone(content)) return yield* new ToolFailure({ message: `No file ${path} in the workspace.` })
        return { path, content: content.value }
      })
  }),
  list_files: define({
    description: "Lists the files in the workspace.",
    parameters: Schema.Struct({}),
    run: (_, context) =>
      Effect.map(
        Effect.flatMap(RunsRepo, (repo) => repo.listFiles(context.partition, context.workspace)),
        (files) => ({ files: files.map((file) => ({ path: file.path, bytes: Number(file.size) })) })
      )
  })
} as const

export type BuiltinToolName = keyof typeof BUILTIN

export const isBuiltinTool = (name: string): name is BuiltinToolName => Object.hasOwn(BUILTIN, name)

/**
 * Tool definitions as `@effect/ai` sees them. The schema a provider advertises is the tool's real JSON Schema, but
 * what the framework decodes is any object: the engine checks the arguments itself, so a model's bad arguments are
 * a failed tool call it can recover from, not a failed run.
 */
export const lenientTool = (name: string, description: string, parameters: Schema.Schema.Any) =>
  Tool.make(name, { description }).setParameters(
    Schema.Struct({}, Schema.Record({ key: Schema.String, value: Schema.Unknown })).annotations({
      jsonSchema: Tool.getJsonSchemaFromSchemaAst(parameters.ast)
    })
  )

export const definitionOf = (name: BuiltinToolName) => lenientTool(name, BUILTIN[name].description, BUILTIN[name].parameters)

/** Runs a built-in tool: its arguments checked first, any failure a `ToolFailure` with a message for the model. */
export const runBuiltin = (name: BuiltinToolName, args: unknown, context: ToolContext) => {
  const tool = BUILTIN[name] as BuiltinTool<unknown>
  const decoded = Schema.decodeUnknownEither(tool.parameters)(args, { onExcessProperty: "ignore" })
  if (Either.isLeft(decoded)) {
    const detail = ParseResult.ArrayFormatter.formatErrorSync(decoded.left)
      .map((issue) => `${issue.path.length > 0 ? issue.path.join(".") : "arguments"}: ${issue.message}`).join("; ")
    return Effect.fail(new ToolFailure({ message: `Invalid arguments for ${name}: ${detail}` }))
  }
  return tool.run(decoded.right, context)
}
