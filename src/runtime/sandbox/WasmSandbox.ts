import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import type * as Net from "node:net"
import * as Os from "node:os"
import { Effect, Exit, Layer, Option, Runtime, Scope } from "effect"
import { Capabilities } from "../../platform/Capabilities.js"
import { makeAdmission } from "./Admission.js"
import { CHANNEL_FD, encodeFrame, frameCap, makeFrameReader } from "./Channel.js"
import { clipResult, resultBytes } from "./Clip.js"
import { SandboxSettings } from "./Config.js"
import { checkContainment, type Containment, guestProcess, verifyGuest } from "./Containment.js"
import { sweepCgroups } from "./Cgroup.js"
import { madeByLiveServer, makeUidPool, residentBytes, serverTag, sweepWorkdirs, workdirPrefix } from "./Guests.js"
import { Sandbox, SandboxFailure, type SandboxFailureReason, type SandboxLimits, type SandboxSpec } from "./Sandbox.js"

/**
 * The embedded sandbox: one contained OS process per sandbox (`guest.mjs`, started as `Containment.ts` says) running
 * Pyodide and QuickJS, both shipped inside their npm packages (nothing is downloaded at run time). The wall time is
 * enforced from here: a run that does not answer in time has its process killed. Memory, output and files are
 * enforced in the guest, where a breach becomes a clean error; the guest's JavaScript heap is capped by
 * `--max-old-space-size`, and its whole process by the OS (`RLIMIT_DATA`, `Containment.ts`) and by a check of its
 * resident memory from here. Caps per end user, per account and per process come from `Admission.ts`.
 *
 * The guest is not trusted to keep its own limits: what it answers comes over a framed channel (`Channel.ts`) whose
 * cap the host enforces before reading a frame, one frame per request, and its output is counted again here.
 */

const MiB = 1024 * 1024

/** How long loading Pyodide may take (a cold start reads and compiles ~10 MB of WebAssembly). */
const LOAD_TIME_MS = 120_000
/** What a guest process holds beyond its guest's memory (Node, the runtimes' JavaScript), for the memory budget. */
const PROCESS_OVERHEAD_BYTES = 128 * MiB
/**
 * What the OS lets a guest process map beyond its code's memory limit (`RLIMIT_DATA`, and the resident memory past
 * which it is closed): Node with Pyodide loaded maps about 230 MiB of data (measured: `VmData` after `loadPyodide`),
 * QuickJS's memory and V8's heap come on top.
 */
export const GUEST_PROCESS_BYTES = 384 * MiB
/**
 * What a guest's memory cgroup allows beyond `RLIMIT_DATA`: the kernel charges the cgroup for more than private
 * mappings (page tables, socket buffers, the page cache it cannot reclaim at once), and the cgroup is the outer bound.
 */
const CGROUP_SLACK_BYTES = 64 * MiB
/** How often each live guest's resident memory is read (/proc/<pid>/status). */
const MEMORY_CHECK_MS = 2_000
/**
 * Guests' memory groups are numbered per process, not per sandbox: a process that holds two sandboxes in turn (the
 * tests build one per file in one worker) would name the second's first group as the first's, which can outlive its
 * sandbox while its killed guest is still exiting (the kernel refuses the removal), and the self-check failed EEXIST.
 */
const nextGuestGroup = (() => {
  let made = 0
  return () => ++made
})()
/** What of a guest that failed to start is logged (its own stderr: Node's error, never the guest's output). */
const STARTUP_LOG_BYTES = 2000

interface GuestError {
  readonly kind: "limit" | "setup" | "error"
  readonly limit?: SandboxFailureReason
  readonly message: string
}

/** What the guest answers: untrusted, so each field is checked before the host uses it. */
const text = (value: unknown) => typeof value === "string" ? value : ""
const guestError = (value: any): GuestError => ({
  kind: value?.kind === "limit" || value?.kind === "setup" ? value.kind : "error",
  limit: typeof value?.limit === "string" ? value.limit : undefined,
  message: text(value?.message).slice(0, 8000)
})

const failureOf = (error: GuestError, stdout = "", stderr = "") =>
  new SandboxFailure({
    reason: error.kind === "limit" ? error.limit ?? "error" : error.kind,
    message: error.message,
    stdout,
    stderr
  })

const unavailable = (message: string) => new SandboxFailure({ reason: "unavailable", message })

export const make = (
  limits: SandboxLimits,
  settings: SandboxSettings,
  containment: Containment
) =>
  Effect.gen(function*() {
    const admission = yield* makeAdmission({
      livePerEndUser: settings.livePerEndUser,
      livePerAccount: settings.livePerAccount,
      liveTotal: Math.max(1, Math.floor(settings.totalMemoryBytes / (limits.memoryBytes + PROCESS_OVERHEAD_BYTES))),
      runningPerEndUser: settings.runningPerEndUser,
      runningPerAccount: settings.runningPerAccount,
      runningTotal: settings.runningTotal,
      queueMs: settings.queueMs
    })
    const heapMb = Math.max(64, Math.ceil(limits.memoryBytes / MiB))
    const processBytes = limits.memoryBytes + GUEST_PROCESS_BYTES
    const uids = makeUidPool(settings.uidBase, settings.uidCount)
    const workdirs = workdirPrefix()
    const cgroupPrefix = `${serverTag()}-`
    const runFork = Runtime.runFork(yield* Effect.runtime<never>())

    /** Starts a guest process; it is killed and its working directory removed when `scope` closes. */
    const launch = (spec: SandboxSpec, scope: Scope.Scope) =>
      Effect.gen(function*() {
        const uid = containment.ownUids ? uids.take() : undefined
        if (containment.ownUids && uid === undefined) {
          return yield* new SandboxFailure({ reason: "busy", message: "every guest uid (SANDBOX_UID_COUNT) is in use; try again shortly" })
        }
        // Named after this server, so a later one's sweep knows it an orphan if this one dies without cleaning up.
        const cwd = Fs.mkdtempSync(workdirs)
        yield* Scope.addFinalizer(scope, Effect.sync(() => Fs.rmSync(cwd, { recursive: true, force: true })))
        if (uid !== undefined) Fs.chownSync(cwd, uid, uid)
        const cgroups = containment.cgroups
        const cgroup = cgroups === undefined
          ? undefined
          : yield* Effect.try({
            try: () => cgroups.make(`${cgroupPrefix}${nextGuestGroup()}`, processBytes + CGROUP_SLACK_BYTES),
            catch: (error) => unavailable(`the sandbox's memory cgroup could not be made: ${String(error)}`)
          })
        const { file, args } = containment.command(heapMb, processBytes, uid, cgroup)
        const child = ChildProcess.spawn(file, args, {
          // Nothing of the server's environment, not even Node's IPC variables: the channel is a plain socket.
          env: {},
          cwd,
          // The channel is the guest's fd 3 (`CHANNEL_FD`): a socket pair, of which the guest inherits one end.
          stdio: ["ignore", "ignore", "pipe", "pipe"]
        })
        yield* Scope.addFinalizer(scope, Effect.sync(() => child.kill("SIGKILL")))
        const channel = child.stdio[CHANNEL_FD] as Net.Socket | null
        // A write to a guest that died fails here; its exit tells the waiting request.
        channel?.on("error", () => {})
        yield* Scope.addFinalizer(scope, Effect.sync(() => channel?.destroy()))
        const send = (message: unknown) => {
          if (channel !== null && !channel.destroyed) channel.write(encodeFrame(message))
        }
        // The uid goes back once the process has ended, not when it was told to: no two live guests share one.
        if (uid !== undefined) {
          let given = false
          const give = () => {
            if (!given) uids.give(uid)
            given = true
          }
          child.once("exit", give)
          child.once("error", give)
        }
        // The group goes once its last process has ended; the kernel may still be reaping the namespace's processes
        // when the launcher's exit arrives, so it is tried again for a while (and a later server sweeps the rest).
        if (cgroup !== undefined) {
          const removeGroup = (attempt: number) => {
            if (!cgroups!.remove(cgroup) && attempt < 20) setTimeout(() => removeGroup(attempt + 1), 50).unref()
          }
          child.once("exit", () => removeGroup(0))
          child.once("error", () => removeGroup(0))
        }
        let startupLog = ""
        child.stderr!.on("data", (chunk: Buffer) => {
          if (startupLog.length < STARTUP_LOG_BYTES) startupLog += chunk.toString("utf8").slice(0, STARTUP_LOG_BYTES)
        })
        // Below the server: a guest busy in a loop must not slow the server's own requests.
        child.once("spawn", () => {
          try {
            Os.setPriority(child.pid!, 10)
          } catch {
            // Not permitted here: the caps still bound what guests take.
          }
        })
        const files: Record<string, string> = {}
        for (const [path, bytes] of spec.files) files[path] = Buffer.from(bytes).toString("base64")
        send({
          files,
          env: spec.env,
          packages: spec.packages,
          packageIndex: Option.getOrNull(settings.packageIndex),
          pyodideIndex: containment.runtimes.pyodideIndex,
          runtimes: containment.runtimes,
          limits
        })
        return { child, channel, send, startupLog: () => startupLog, uid, cgroup }
      })

    const create = (spec: SandboxSpec) =>
      Effect.gen(function*() {
        const scope = yield* Scope.make()
        const close = Scope.close(scope, Exit.void)
        const tenant = yield* admission.live(spec.owner, close).pipe(Scope.extend(scope), Effect.tapError(() => close))
        const { cgroup, channel, child, send, startupLog, uid } = yield* launch(spec, scope).pipe(Effect.tapError(() => close))

        let alive = true
        let ready = false
        let sequence = 0
        const pending = new Map<number, (message: any) => void>()
        const dead = (reason: SandboxFailureReason, message: string) => {
          alive = false
          for (const resolve of pending.values()) resolve({ ok: false, error: { kind: "limit", limit: reason, message } })
          pending.clear()
        }
        /** A guest that breaks the protocol is stopped: it can no longer be trusted to keep to its limits. */
        const stop = (reason: SandboxFailureReason, message: string) => {
          reader.stop()
          channel?.destroy()
          child.kill("SIGKILL")
          dead(reason, message)
        }
        // One frame a request (and "ready" once, first): a guest cannot make the host read more than it asked for.
        const reader = makeFrameReader(frameCap(limits), {
          frame: (message: any) => {
            if (!ready && message?.type === "ready") {
              ready = true
              return
            }
            const resolve = typeof message?.id === "number" ? pending.get(message.id) : undefined
            if (resolve === undefined) return stop("unavailable", "the sandbox answered out of turn and was stopped")
            pending.delete(message.id)
            resolve(message)
          },
          refuse: (problem) =>
            problem._tag === "Oversized"
              ? stop(
                "output",
                `the sandbox's answer of ${problem.bytes} bytes passed the channel's cap of ${frameCap(limits)} bytes; ` +
                  "the sandbox was stopped"
              )
              : stop("unavailable", "the sandbox's answer was not readable; the sandbox was stopped")
        })
        if (channel === null) dead("unavailable", "the sandbox could not start: no channel")
        else channel.on("data", reader.push)
        child.on("error", (error) => dead("unavailable", `the sandbox could not start: ${error.message}`))
        child.on("exit", (code, signal) => {
          if (!ready && alive) {
            // Why a guest never came up is the operator's to know (a missing file, a refused permission).
            runFork(
              Effect.logError("sandbox: a guest process ended before it was ready", {
                code,
                signal,
                stderr: startupLog()
              })
            )
          }
          // V8 aborts when the OS bound refuses its own heap, and the kernel kills a guest past its cgroup's bound:
          // both are the memory limit, not a broken sandbox.
          if (
            /out of memory|allocation failed/i.test(startupLog()) ||
            (cgroup !== undefined && containment.cgroups!.oomKilled(cgroup))
          ) {
            dead("memory", `memory limit of ${Math.round(processBytes / MiB)} MiB for the sandbox's process exceeded`)
          } else dead("unavailable", ready ? "the sandbox stopped" : "the sandbox could not start")
        })
        // The guest's resident memory, read from the host: a guest over its bound (busy or idle) is closed, so an
        // idle sandbox cannot keep what it once took.
        let guestPid: number | undefined
        const guest = () => (guestPid ??= child.pid === undefined ? undefined : guestProcess(child.pid))
        const watch = setInterval(() => {
          const pid = ready ? guest() : undefined
          const resident = pid === undefined ? undefined : residentBytes(pid)
          if (resident === undefined || resident <= processBytes || !alive) return
          dead("memory", `memory limit of ${Math.round(processBytes / MiB)} MiB for the sandbox's process exceeded`)
          child.kill("SIGKILL")
          runFork(Scope.close(scope, Exit.void))
        }, MEMORY_CHECK_MS)
        watch.unref()
        yield* Scope.addFinalizer(scope, Effect.sync(() => clearInterval(watch)))
        yield* Scope.addFinalizer(scope, Effect.sync(() => {
          alive = false
        }))

        /** One request to the guest, answered or ended by the wall time (which kills the process). */
        const request = (message: Record<string, unknown>, timeMs = limits.timeMs) =>
          Effect.async<any>((resume) => {
            if (!alive) {
              resume(Effect.succeed({ ok: false, error: { kind: "limit", limit: "unavailable", message: "the sandbox was released" } }))
              return
            }
            const id = ++sequence
            const timer = setTimeout(() => {
              pending.delete(id)
              alive = false
              child.kill("SIGKILL")
              resume(Effect.succeed({
                ok: false,
                error: { kind: "limit", limit: "time", message: `time limit of ${timeMs / 1000} s exceeded` }
              }))
            }, timeMs)
            pending.set(id, (reply) => {
              clearTimeout(timer)
              resume(Effect.succeed(reply))
            })
            send({ ...message, id })
            // Interrupted (the turn stopped): the guest may be in an endless loop, so the sandbox cannot be kept.
            return Effect.sync(() => {
              clearTimeout(timer)
              if (pending.delete(id)) {
                alive = false
                child.kill("SIGKILL")
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
              const error = guestError(reply.error)
              return yield* new SandboxFailure({
                reason: error.kind === "limit" && error.limit !== undefined ? error.limit : "setup",
                message: error.message
              })
            }
            loaded.add(language)
          })

        const setUp = Effect.gen(function*() {
          if (spec.packages.length > 0 || spec.setupScript.trim().length > 0) yield* load("python")
          const setup = yield* request({ type: "setup", script: spec.setupScript })
          if (!setup.ok) {
            const error = guestError(setup.error)
            return yield* new SandboxFailure({
              reason: error.kind === "limit" && error.limit !== undefined ? error.limit : "setup",
              message: error.kind === "limit" ? `setup: ${error.message}` : error.message
            })
          }
        })
        yield* admission.running(tenant, setUp).pipe(Effect.tapError(() => close))

        const run = (language: "python" | "javascript", code: string, update?: ReadonlyMap<string, Uint8Array>) =>
          admission.running(
            tenant,
            Effect.gen(function*() {
              const sync: Record<string, string> = {}
              if (update !== undefined) for (const [path, bytes] of update) sync[path] = Buffer.from(bytes).toString("base64")
              yield* load(language)
              const reply = yield* request({ type: "run", language, code, files: sync })
              if (!reply.ok) return yield* failureOf(guestError(reply.error), text(reply.stdout), text(reply.stderr))
              const files = Array.isArray(reply.files) ? reply.files : []
              // Counted again here, as the guest should have: stdout and stderr within the limit, the result within
              // what they left (cut, and saying so, when it is not).
              const stdout = text(reply.stdout)
              const stderr = text(reply.stderr)
              const streams = Buffer.byteLength(stdout) + Buffer.byteLength(stderr)
              if (streams > limits.outputBytes) {
                return yield* new SandboxFailure({ reason: "output", message: `output limit of ${limits.outputBytes} bytes exceeded` })
              }
              const claimed = typeof reply.resultBytes === "number" && Number.isFinite(reply.resultBytes) ? reply.resultBytes : 0
              const size = Math.max(resultBytes(reply.result), claimed)
              return {
                stdout,
                stderr,
                result: clipResult(reply.result, limits.outputBytes - streams, size),
                resultBytes: size,
                files: files.filter((file: any) => typeof file?.path === "string" && typeof file?.base64 === "string")
                  .map((file: { path: string; base64: string }) => ({
                    path: file.path,
                    content: new Uint8Array(Buffer.from(file.base64, "base64"))
                  }))
              }
            })
          ).pipe(Effect.withSpan("Sandbox.run", { attributes: { language } }))

        return { run, close, alive: () => alive, guest: () => ({ pid: guest(), uid, cgroup }) }
      }).pipe(Effect.withSpan("Sandbox.create"))

    return { limits, create }
  })

/** A sandbox that refuses every call, with the reason `run_code` is unavailable here. */
const refusing = (limits: SandboxLimits, reason: string) =>
  Sandbox.of({
    limits,
    create: () => Effect.fail(unavailable(`run_code is not available on this server: ${reason}`))
  })

/**
 * The sandbox as this host allows it. The containment is checked once at start; then one guest is started and runs
 * `1 + 1` in the background, so a guest that cannot start (a missing file, a refused permission) is reported in
 * the log and `/api/health` before any user meets it.
 */
export const WasmSandboxLive = Layer.scoped(
  Sandbox,
  Effect.gen(function*() {
    const settings = yield* Effect.orDie(SandboxSettings)
    const capabilities = yield* Capabilities
    const limits: SandboxLimits = {
      timeMs: settings.timeMs,
      memoryBytes: settings.memoryBytes,
      outputBytes: settings.outputBytes,
      fileBytes: settings.fileBytes,
      maxFiles: settings.maxFiles
    }
    const check = checkContainment(settings)
    if (check._tag === "Unavailable") {
      yield* Effect.logWarning(`run_code is unavailable: ${check.reason}`)
      yield* capabilities.report("run_code", { status: "unavailable", detail: check.reason })
      return refusing(limits, check.reason)
    }
    const swept = sweepWorkdirs()
    if (swept.length > 0) yield* Effect.logInfo(`sandbox: removed ${swept.length} working folders of guests whose server is gone`)
    const groups = check.containment.cgroups === undefined ? 0 : sweepCgroups(check.containment.cgroups, madeByLiveServer)
    if (groups > 0) yield* Effect.logInfo(`sandbox: removed ${groups} memory cgroups of guests whose server is gone`)
    const sandbox = yield* make(limits, settings, check.containment)
    const configured = check.containment.layers.join(", ")
    yield* capabilities.report("run_code", { status: "checking", detail: configured })
    // The layers reported are those seen in a live guest's process from the outside, never the configured list.
    yield* Effect.scoped(Effect.gen(function*() {
      const instance = yield* sandbox.create({
        owner: { accountId: "", endUserId: "" },
        env: {},
        files: new Map(),
        packages: [],
        setupScript: ""
      })
      yield* Effect.addFinalizer(() => instance.close)
      const output = yield* instance.run("javascript", "1 + 1")
      if (output.result !== 2) return yield* unavailable(`the self-check computed ${JSON.stringify(output.result)}, not 2`)
      const { cgroup, pid, uid } = instance.guest()
      if (pid === undefined) return yield* unavailable("the self-check's guest process cannot be found")
      const processBytes = limits.memoryBytes + GUEST_PROCESS_BYTES
      const verified = verifyGuest(check.containment, pid, {
        uid,
        memoryBytes: processBytes,
        cgroup: cgroup === undefined ? undefined : { folder: cgroup, bytes: processBytes + CGROUP_SLACK_BYTES }
      })
      if (verified._tag === "Failed") return yield* unavailable(`a layer is missing in a live guest: ${verified.reason}`)
      return verified.layers
    })).pipe(
      Effect.matchEffect({
        onSuccess: (checked) =>
          Effect.zipRight(
            Effect.logInfo(`run_code is available (checked in a live guest: ${checked.join(", ")})`),
            capabilities.report("run_code", {
              status: "available",
              detail: `checked in a live guest: ${checked.join(", ")}`,
              layers: checked
            })
          ),
        onFailure: (failure) =>
          Effect.zipRight(
            Effect.logError(`run_code is unavailable: the self-check failed: ${failure.message}`),
            capabilities.report("run_code", { status: "unavailable", detail: `the self-check failed: ${failure.message}` })
          )
      }),
      Effect.forkScoped
    )
    return Sandbox.of(sandbox)
  })
).pipe(Layer.provide(Capabilities.Default))
