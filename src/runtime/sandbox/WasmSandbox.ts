import { createRequire } from "node:module"
import { dirname } from "node:path"
import { Worker } from "node:worker_threads"
import { Config, Effect, Layer, Option } from "effect"
import { Sandbox, SandboxFailure, type SandboxFailureReason, type SandboxLimits, type SandboxSpec } from "./Sandbox.js"

/**
 * The embedded sandbox: one worker thread per sandbox (`worker.mjs`) running Pyodide and QuickJS, both shipped
 * inside their npm packages (nothing is downloaded at run time). The wall time is enforced from here: a run that
 * does not answer in time has its thread terminated. Memory, output and files are enforced in the worker, where a
 * breach becomes a clean error; the thread's JavaScript heap is capped by `resourceLimits` as a last line.
 */

const MiB = 1024 * 1024

export const SandboxSettings = Config.all({
  timeMs: Config.integer("SANDBOX_TIME_MS").pipe(Config.withDefault(30_000)),
  memoryBytes: Config.map(Config.integer("SANDBOX_MEMORY_MB").pipe(Config.withDefault(256)), (mb) => mb * MiB),
  outputBytes: Config.integer("SANDBOX_OUTPUT_BYTES").pipe(Config.withDefault(1_000_000)),
  fileBytes: Config.integer("SANDBOX_FILE_BYTES").pipe(Config.withDefault(10 * MiB)),
  maxFiles: Config.integer("SANDBOX_MAX_FILES").pipe(Config.withDefault(1000)),
  /** A Pyodide package index (a directory or URL holding a `pyodide-lock.json` and its wheels). */
  packageIndex: Config.option(Config.string("SANDBOX_PACKAGE_INDEX"))
}).pipe(
  Config.validate({
    message: "SANDBOX_* limits must be positive",
    validation: (s) => s.timeMs > 0 && s.memoryBytes > 0 && s.outputBytes > 0 && s.fileBytes > 0 && s.maxFiles > 0
  })
)

/** How long loading Pyodide may take (a cold start reads and compiles ~10 MB of WebAssembly). */
const LOAD_TIME_MS = 120_000

const require = createRequire(import.meta.url)
const WORKER = new URL("./worker.mjs", import.meta.url)

interface WorkerError {
  readonly kind: "limit" | "setup" | "error"
  readonly limit?: SandboxFailureReason
  readonly message: string
}

const failureOf = (error: WorkerError, stdout = "", stderr = "") =>
  new SandboxFailure({
    reason: error.kind === "limit" ? error.limit ?? "error" : error.kind,
    message: error.message,
    stdout,
    stderr
  })

export const make = (limits: SandboxLimits, packageIndex: Option.Option<string>) =>
  Effect.gen(function*() {
    const pyodideIndex = dirname(require.resolve("pyodide/package.json")) + "/"

    const create = (spec: SandboxSpec) =>
      Effect.gen(function*() {
        const files: Record<string, string> = {}
        for (const [path, bytes] of spec.files) files[path] = Buffer.from(bytes).toString("base64")
        const worker = yield* Effect.try({
          try: () =>
            new Worker(WORKER, {
              workerData: {
                files,
                env: spec.env,
                packages: spec.packages,
                packageIndex: Option.getOrNull(packageIndex),
                pyodideIndex,
                limits
              },
              // The guest's data lives outside this heap (WebAssembly memory, capped in the worker): this bounds what
              // the worker's own JavaScript may hold.
              resourceLimits: { maxOldGenerationSizeMb: Math.max(64, Math.ceil(limits.memoryBytes / MiB)), stackSizeMb: 8 },
              stdout: true,
              stderr: true,
              env: {}
            }),
          catch: (error) => new SandboxFailure({ reason: "unavailable", message: `The sandbox could not start: ${String(error)}` })
        })
        // The guest writes nothing to the host's console; what the thread itself prints is dropped.
        worker.stdout.resume()
        worker.stderr.resume()
        let alive = true
        let sequence = 0
        const pending = new Map<number, (message: any) => void>()
        const dead = (reason: SandboxFailureReason, message: string) => {
          alive = false
          for (const resolve of pending.values()) resolve({ ok: false, error: { kind: reason === "time" ? "limit" : "error", limit: reason, message } })
          pending.clear()
        }
        worker.on("message", (message: any) => {
          if (typeof message?.id !== "number") return
          const resolve = pending.get(message.id)
          pending.delete(message.id)
          resolve?.(message)
        })
        worker.on("error", (error: any) => {
          const memory = error?.code === "ERR_WORKER_OUT_OF_MEMORY"
          dead(memory ? "memory" : "unavailable", memory ? `memory limit of ${Math.round(limits.memoryBytes / MiB)} MiB exceeded` : "the sandbox stopped")
        })
        worker.on("exit", () => dead("unavailable", "the sandbox stopped"))

        const close = Effect.suspend(() => {
          alive = false
          return Effect.promise(() => worker.terminate())
        }).pipe(Effect.asVoid)

        /** One request to the worker, answered or ended by the wall time (which kills the worker). */
        const request = (message: Record<string, unknown>, timeMs = limits.timeMs) =>
          Effect.async<any>((resume) => {
            if (!alive) {
              resume(Effect.succeed({ ok: false, error: { kind: "error", limit: "unavailable", message: "the sandbox was released" } }))
              return
            }
            const id = ++sequence
            const timer = setTimeout(() => {
              pending.delete(id)
              alive = false
              void worker.terminate()
              resume(Effect.succeed({
                ok: false,
                error: { kind: "limit", limit: "time", message: `time limit of ${timeMs / 1000} s exceeded` }
              }))
            }, timeMs)
            pending.set(id, (reply) => {
              clearTimeout(timer)
              resume(Effect.succeed(reply))
            })
            worker.postMessage({ ...message, id })
            // Interrupted (the turn stopped): the guest may be in an endless loop, so the sandbox cannot be kept.
            return Effect.sync(() => {
              clearTimeout(timer)
              if (pending.delete(id)) {
                alive = false
                void worker.terminate()
              }
            })
          })

        // Loading a runtime is the platform's time, not the guest's: it has its own, longer limit.
        const loaded = new Set<string>()
        const load = (language: "python" | "javascript") =>
          Effect.gen(function*() {
            if (loaded.has(language)) return
            const reply = yield* request({ type: "load", language }, Math.max(limits.timeMs, LOAD_TIME_MS))
            if (!reply.ok) {
              const error = reply.error as WorkerError
              return yield* new SandboxFailure({
                reason: error.kind === "limit" && error.limit !== undefined ? error.limit : "setup",
                message: error.message
              })
            }
            loaded.add(language)
          })

        if (spec.packages.length > 0 || spec.setupScript.trim().length > 0) {
          yield* Effect.tapError(load("python"), () => close)
        }
        const setup = yield* request({ type: "setup", script: spec.setupScript })
        if (!setup.ok) {
          yield* close
          const error = setup.error as WorkerError
          return yield* new SandboxFailure({
            reason: error.kind === "limit" && error.limit === "time" ? "time" : error.kind === "limit" ? error.limit ?? "setup" : "setup",
            message: error.kind === "setup" || error.kind === "error" ? error.message : `setup: ${error.message}`
          })
        }

        const run = (language: "python" | "javascript", code: string, update?: ReadonlyMap<string, Uint8Array>) =>
          Effect.gen(function*() {
            const sync: Record<string, string> = {}
            if (update !== undefined) for (const [path, bytes] of update) sync[path] = Buffer.from(bytes).toString("base64")
            yield* load(language)
            const reply = yield* request({ type: "run", language, code, files: sync })
            if (!reply.ok) return yield* failureOf(reply.error as WorkerError, reply.stdout ?? "", reply.stderr ?? "")
            return {
              stdout: reply.stdout as string,
              stderr: reply.stderr as string,
              result: reply.result as unknown,
              files: (reply.files as Array<{ path: string; base64: string }>).map((file) => ({
                path: file.path,
                content: new Uint8Array(Buffer.from(file.base64, "base64"))
              }))
            }
          }).pipe(Effect.withSpan("Sandbox.run", { attributes: { language } }))

        return { run, close, alive: () => alive }
      }).pipe(Effect.withSpan("Sandbox.create"))

    return Sandbox.of({ limits, create })
  })

export const WasmSandboxLive = Layer.effect(
  Sandbox,
  Effect.gen(function*() {
    const settings = yield* Effect.orDie(SandboxSettings)
    const { packageIndex, ...limits } = settings
    return yield* make(limits, packageIndex)
  })
)
