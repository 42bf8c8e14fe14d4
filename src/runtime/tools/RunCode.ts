import { Effect, Either, Option, ParseResult, Schema } from "effect"
import { EnvironmentId } from "../../platform/Ids.js"
import { EnvironmentsRepo } from "../../environments/Repo.js"
import type { FileId } from "../../files/Domain.js"
import { FilesRepo } from "../../files/Repo.js"
import { ObjectStorage, ObjectStorageLive } from "../../files/Storage.js"
import { RunsRepo } from "../Repo.js"
import { clipResult, clipText } from "../sandbox/Clip.js"
import type { SandboxHolder } from "../sandbox/Holder.js"
import { Sandbox, type SandboxFailure, type SandboxSpec } from "../sandbox/Sandbox.js"
import { WasmSandboxLive } from "../sandbox/WasmSandbox.js"
import { ToolFailure, type ToolContext } from "./Tools.js"

/**
 * The built-in `run_code` tool: Python or JavaScript in the conversation's sandbox (docs/tools.md). The sandbox is
 * built from the session's environment (variables, packages, setup script) and the workspace's files; files the
 * code writes go back to the workspace, where `read_file` and `list_files` see them.
 */

export const RUN_CODE = "run_code"
export const RUN_CODE_DESCRIPTION =
  "Runs Python or JavaScript in a sandbox whose working directory holds the workspace's files. Variables persist " +
  "between calls in a conversation. Returns stdout, stderr, the value of the last expression and the files written. " +
  "No network. JavaScript reads and writes files with fs.readFile(path), fs.writeFile(path, text), fs.listFiles()."

export const RunCodeParameters = Schema.Struct({
  language: Schema.Literal("python", "javascript").annotations({ description: "python or javascript" }),
  code: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100_000)).annotations({ description: "the code to run" })
})

/** Where a run's code runs: its holder, and the environment its sandbox is built from (none: an empty one). */
export interface CodeContext extends ToolContext {
  readonly holder: SandboxHolder
  readonly environmentId: string | null
}

/**
 * What of each of stdout, stderr and the result goes on to the event, the model's context and the database, in
 * UTF-8 bytes: the sandbox allows `SANDBOX_OUTPUT_BYTES` (1 MB by default), more than a model should read or a turn's
 * record should keep. Past it a text keeps its start and says how large it was.
 */
export const MODEL_OUTPUT_BYTES = 20_000

const decoder = new TextDecoder("utf-8", { fatal: true })
const textOf = (bytes: Uint8Array): string | undefined => {
  try {
    return decoder.decode(bytes)
  } catch {
    return undefined
  }
}

const clip = (text: string) => clipText(text, MODEL_OUTPUT_BYTES)

export class CodeRunner extends Effect.Service<CodeRunner>()("atrium/runtime/tools/CodeRunner", {
  effect: Effect.gen(function*() {
    const sandbox = yield* Sandbox
    const runs = yield* RunsRepo
    const environments = yield* EnvironmentsRepo
    const filesRepo = yield* FilesRepo
    const storage = yield* ObjectStorage

    /** An environment's uploaded files, by file name (a name unfit for a path gets its odd characters replaced). */
    const environmentFiles = (context: ToolContext, ids: ReadonlyArray<FileId>) =>
      Effect.gen(function*() {
        const files = new Map<string, Uint8Array>()
        for (const id of ids) {
          const file = yield* filesRepo.byId(context.partition, id)
          if (Option.isNone(file)) continue
          const bytes = yield* storage.read(file.value.storageKey, sandbox.limits.fileBytes)
          if (Option.isNone(bytes)) continue
          const name = file.value.filename.replace(/[^A-Za-z0-9._-]/g, "_").replace(/^\.+/, "_").slice(0, 200) || id
          files.set(name, bytes.value)
        }
        return files
      })

    /** The workspace's files changed after `since`, as the sandbox takes them. */
    const workspaceFiles = (context: ToolContext, since: Date) =>
      Effect.gen(function*() {
        const listed = yield* runs.listFiles(context.partition, context.workspace)
        const files = new Map<string, Uint8Array>()
        for (const file of listed) {
          if (new Date(file.updatedAt).getTime() < since.getTime()) continue
          const content = yield* runs.readFile(context.partition, context.workspace, file.path)
          if (Option.isSome(content)) files.set(file.path, new TextEncoder().encode(content.value))
        }
        return files
      })

    const specOf = (context: CodeContext) =>
      Effect.gen(function*() {
        const environment = context.environmentId === null
          ? Option.none()
          : yield* environments.byId(context.partition, EnvironmentId.make(context.environmentId))
        // The key names the environment's version: a changed environment gets a new sandbox.
        const key = Option.match(environment, {
          onNone: () => "none",
          onSome: (env) => `${env.id}@${env.updatedAt.getTime()}`
        })
        const spec: Effect.Effect<SandboxSpec> = Effect.map(Effect.all([
          environmentFiles(context, Option.match(environment, { onNone: () => [], onSome: (env) => env.files })),
          workspaceFiles(context, new Date(0))
        ]), ([fromEnvironment, fromWorkspace]) => ({
          owner: context.partition,
          env: Option.match(environment, { onNone: () => ({}), onSome: (env) => env.env }),
          // The workspace's own files win over the environment's of the same name.
          files: new Map([...fromEnvironment, ...fromWorkspace]),
          packages: Option.match(environment, { onNone: () => [], onSome: (env) => env.packages }),
          setupScript: Option.match(environment, { onNone: () => "", onSome: (env) => env.setupScript })
        }))
        return { key, spec }
      })

    const describeFailure = (failure: SandboxFailure) => {
      const label = failure.reason === "error" ? "The code failed" : failure.reason === "setup"
        ? "The sandbox could not be set up"
        : failure.reason === "unavailable"
        ? "The sandbox is not available"
        : failure.reason === "busy"
        ? "Too much code is running right now"
        : `The ${failure.reason} limit was reached`
      const output = [failure.stdout.length > 0 ? `stdout:\n${clip(failure.stdout)}` : "", failure.stderr.length > 0 ? `stderr:\n${clip(failure.stderr)}` : ""]
        .filter((part) => part.length > 0).join("\n")
      return new ToolFailure({
        code: failure.reason === "error"
          ? "code_error"
          : failure.reason === "setup" || failure.reason === "unavailable" || failure.reason === "busy"
          ? `sandbox_${failure.reason}`
          : `${failure.reason}_limit`,
        message: `${label} (${failure.reason}): ${failure.message}${output.length > 0 ? `\n${output}` : ""}`
      })
    }

    const run = Effect.fn("CodeRunner.run")(function*(args: unknown, context: CodeContext) {
      const decoded = Schema.decodeUnknownEither(RunCodeParameters)(args, { onExcessProperty: "ignore" })
      if (Either.isLeft(decoded)) {
        const detail = ParseResult.ArrayFormatter.formatErrorSync(decoded.left)
          .map((issue) => `${issue.path.length > 0 ? issue.path.join(".") : "arguments"}: ${issue.message}`).join("; ")
        return yield* new ToolFailure({ message: `Invalid arguments for ${RUN_CODE}: ${detail}` })
      }
      const { code, language } = decoded.right
      const { key, spec } = yield* specOf(context)
      const started = new Date()
      const output = yield* context.holder.use(
        key,
        Effect.flatMap(spec, sandbox.create),
        (instance, fresh) =>
          Effect.gen(function*() {
            // A sandbox made now has the workspace as it is; one made earlier gets what changed outside it since.
            const since = lastSync.get(context.holder)
            // A minute's margin: the database's clock and ours may differ; a file sent twice is harmless.
            const update = fresh || since === undefined
              ? undefined
              : yield* workspaceFiles(context, new Date(since.getTime() - 60_000))
            lastSync.set(context.holder, started)
            return yield* instance.run(language, code, update)
          })
      ).pipe(Effect.mapError(describeFailure))

      const written: Array<{ path: string; bytes: number }> = []
      const skipped: Array<{ path: string; reason: string }> = []
      for (const file of output.files) {
        const text = textOf(file.content)
        if (text === undefined) {
          skipped.push({ path: file.path, reason: "not UTF-8 text: the workspace keeps text files" })
          continue
        }
        if (!/^(?!\/)(?!.*(^|\/)\.\.?(\/|$))[A-Za-z0-9._\-/]{1,200}$/.test(file.path)) {
          skipped.push({ path: file.path, reason: "the workspace's paths are 1-200 characters of A-Z a-z 0-9 . _ - /" })
          continue
        }
        yield* runs.writeFile(context.partition, context.workspace, file.path, text)
        written.push({ path: file.path, bytes: file.content.length })
      }
      return {
        stdout: clip(output.stdout),
        stderr: clip(output.stderr),
        result: clipResult(output.result, MODEL_OUTPUT_BYTES, output.resultBytes),
        files: written,
        ...(skipped.length > 0 ? { files_not_kept: skipped } : {})
      }
    })

    /** When each holder last took the workspace's files (a holder lives as long as its conversation's state). */
    const lastSync = new WeakMap<SandboxHolder, Date>()

    return { run } as const
  }),
  dependencies: [WasmSandboxLive, RunsRepo.Default, EnvironmentsRepo.Default, FilesRepo.Default, ObjectStorageLive]
}) {}
