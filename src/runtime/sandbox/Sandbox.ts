import { Context, type Effect, Schema } from "effect"

/**
 * The sandbox port (DESIGN.md §4, docs/tools.md): where `run_code` runs. The embedded implementation is
 * WebAssembly in a contained process per sandbox (`WasmSandbox.ts`, `Containment.ts`); a deployment can provide another layer for this tag (a container
 * engine, a remote code runner) without touching the run engine.
 *
 * A sandbox is created from a `SandboxSpec` (its environment and the workspace's files), keeps its state (variables,
 * files) between `run` calls, and is released by `close`. Every limit is the implementation's to enforce: no input
 * may break one, and a breach is a `SandboxFailure`, never a defect or a crash of the host.
 */

export interface SandboxLimits {
  /** Wall time of one `run` (and of the setup), in milliseconds. */
  readonly timeMs: number
  /** Memory the guest may use, in bytes. */
  readonly memoryBytes: number
  /** stdout, stderr and the result's text together, per run, in bytes (a result past what is left is clipped). */
  readonly outputBytes: number
  /** Bytes of one file, and of the working directory as a whole. */
  readonly fileBytes: number
  /** Files in the working directory. */
  readonly maxFiles: number
}

/**
 * Whom a sandbox works for: the account and, inside it, the end user (the partition, `identity/Partition.ts`; '' when
 * none is named). The caps are per end user and per account (docs/tools.md, "Caps").
 */
export interface SandboxOwner {
  readonly accountId: string
  readonly endUserId: string
}

export interface SandboxSpec {
  readonly owner: SandboxOwner
  /** Variables the guest sees (Python's `os.environ`, JavaScript's `env`). */
  readonly env: Readonly<Record<string, string>>
  /** The working directory's initial content, by relative path: the environment's files, then the workspace's. */
  readonly files: ReadonlyMap<string, Uint8Array>
  /** Python packages, installed from the configured package index when the sandbox is created. */
  readonly packages: ReadonlyArray<string>
  /** Python code run once when the sandbox is created; a failure fails the creation (`setup`). */
  readonly setupScript: string
}

export type Language = "python" | "javascript"

export interface RunOutput {
  readonly stdout: string
  readonly stderr: string
  /**
   * The value of the code's last expression, as JSON (null when there is none). One whose text passes what stdout
   * and stderr left of `outputBytes` is a string instead: the start of its text and `…[clipped: N bytes, limit L]`.
   */
  readonly result: unknown
  /** The size of the result's text (a string's own, another value's JSON) before any clipping, in bytes. */
  readonly resultBytes?: number
  /** Files the run created or changed, by relative path. */
  readonly files: ReadonlyArray<{ readonly path: string; readonly content: Uint8Array }>
}

/**
 * Why a sandbox operation failed: a limit (`time`, `memory`, `output`, `files`), the `setup` (packages, setup
 * script), the guest's own `error` (an exception in the code), the engine being `unavailable`, or the caps leaving no
 * room in time (`busy`).
 */
export const SandboxFailureReason = Schema.Literal("time", "memory", "output", "files", "setup", "error", "unavailable", "busy")
export type SandboxFailureReason = typeof SandboxFailureReason.Type

export class SandboxFailure extends Schema.TaggedError<SandboxFailure>()("SandboxFailure", {
  reason: SandboxFailureReason,
  message: Schema.String,
  stdout: Schema.optionalWith(Schema.String, { default: () => "" }),
  stderr: Schema.optionalWith(Schema.String, { default: () => "" })
}) {}

export interface SandboxInstance {
  /** Runs code; the sandbox stays usable after a guest error, and is gone after a `time` breach. */
  readonly run: (language: Language, code: string, files?: ReadonlyMap<string, Uint8Array>) => Effect.Effect<RunOutput, SandboxFailure>
  /** Releases it (idempotent). */
  readonly close: Effect.Effect<void>
  /** False once it was closed or killed: the holder then creates another. */
  readonly alive: () => boolean
}

export class Sandbox extends Context.Tag("atrium/runtime/Sandbox")<Sandbox, {
  readonly limits: SandboxLimits
  /** A new sandbox, set up (packages installed, setup script run). */
  readonly create: (spec: SandboxSpec) => Effect.Effect<SandboxInstance, SandboxFailure>
}>() {}
