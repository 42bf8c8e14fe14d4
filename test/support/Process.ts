import { Duration, Effect, type Scope } from "effect"
import * as ChildProcess from "node:child_process"
import * as Path from "node:path"
import { freePort as freePortOnce } from "./Local.js"
import { pollPromise } from "./Poll.js"

/**
 * The platform as its own process, the entry point `npm start` runs: for tests of start-up, shutdown, crashes,
 * security and what the process prints, which an in-process server cannot show. It always runs the compiled
 * `dist/main.js`, what users run; vitest's `globalSetup` rebuilds it first when a source is newer than the build.
 */
export interface PlatformProcess {
  readonly url: string
  /** Everything the process printed so far. */
  readonly output: () => string
  /** The process id (for `pg_stat_activity` and signals such as SIGSTOP/SIGCONT). */
  readonly pid: number
  /** Sends a signal (SIGSTOP, SIGCONT, ...) without waiting for anything. */
  readonly signal: (signal: NodeJS.Signals) => void
  /** SIGKILL, as a crash: resolves once the process is gone. */
  readonly kill: () => Promise<void>
  /** SIGTERM; resolves with the exit code, or fails with the output if the process is still there 30 s later. */
  readonly terminate: Effect.Effect<number | null>
  /** `terminate` for a process that may take up to `limit` to stop (a shutdown grace it is given). */
  readonly terminateWithin: (limit: Duration.DurationInput) => Effect.Effect<number | null>
}

/** Every line the process wrote, parsed: its stdout is a pipe, so every line must be JSON (one that is not throws). */
export const jsonLines = (platform: PlatformProcess) =>
  platform.output().split("\n").filter((line) => line.trim().length > 0).map((line) => {
    try {
      return JSON.parse(line) as Record<string, unknown>
    } catch {
      throw new Error(`not a JSON line: ${line}`)
    }
  })

export const freePort = Effect.promise(freePortOnce)

const ROOT = Path.resolve(import.meta.dirname, "../..")

/** `node` arguments that start the platform: the compiled build, as `npm start` runs it (built by `globalSetup`). */
const entryPoint = (root = ROOT): ReadonlyArray<string> => ["--enable-source-maps", Path.join(root, "dist", "main.js")]

/** Settings a test's own environment may carry that must not leak into the platform under test. */
const NOT_INHERITED = ["DATABASE_URL", "REDIS_URL", "KEY_PREFIX", "JWT_SECRET", "SMS_TEST_OTP", "LOG_LEVEL"]

/** What `HttpServer.withLogAddress` prints once the socket listens, in the pretty and the JSON log alike. */
const LISTENING = /Listening on http:\/\/[^\s":]+:(\d+)/

/**
 * `dist/main.js` as its own process with `env` on top of this process's environment (less what must not leak in),
 * on port 0 of 127.0.0.1, its output piped: for a test of a start that must fail, without waiting for health.
 */
export const spawnPlatform = (
  env: Record<string, string>,
  where: { readonly root?: string; readonly cwd?: string } = {}
) => {
  const childEnv: Record<string, string> = {}
  for (const [key, value] of Object.entries(process.env)) {
    if (value !== undefined && !NOT_INHERITED.includes(key)) childEnv[key] = value
  }
  Object.assign(childEnv, { PORT: "0", HOST: "127.0.0.1", ...env })
  return ChildProcess.spawn(process.execPath, entryPoint(where.root), {
    cwd: where.cwd ?? ROOT,
    env: childEnv,
    stdio: ["ignore", "pipe", "pipe"]
  })
}

/**
 * Starts the platform with `env` and waits until it is healthy; it is killed with the scope. The platform binds
 * port 0 and the test reads the port it got from its log, so no other process can take the port between a test
 * choosing it and the platform binding it (and answer the health check in its place).
 */
export const launchPlatform = (
  env: Record<string, string>,
  /** Another build to start (a folder laid out as the image's runtime stage), and another working directory. */
  where: { readonly root?: string; readonly cwd?: string } = {}
): Effect.Effect<PlatformProcess, never, Scope.Scope> =>
  Effect.gen(function*() {
    const child = yield* Effect.acquireRelease(
      Effect.sync(() => spawnPlatform(env, where)),
      (child) => Effect.sync(() => child.exitCode === null && child.signalCode === null && child.kill("SIGKILL"))
    )
    let output = ""
    child.stdout.on("data", (chunk) => (output += chunk))
    child.stderr.on("data", (chunk) => (output += chunk))
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)))
    // Ready when health answers; a cold start (tsx compiling the sources, PGlite initialising) on a busy machine
    // takes a while, so the wait is a generous deadline rather than a count of tries.
    // Polled: a real process's output, read as it arrives.
    const url = yield* Effect.promise(() =>
      pollPromise(
        async () => {
          if (child.exitCode !== null) throw new Error(`platform exited early:\n${output}`)
          const port = env.PORT ?? LISTENING.exec(output)?.[1]
          if (port === undefined) return undefined
          const url = `http://127.0.0.1:${port}`
          const ok = await fetch(`${url}/api/health`, { signal: AbortSignal.timeout(2_000) }).then((r) => r.ok, () => false)
          return ok ? url : undefined
        },
        (url) => url !== undefined,
        "the platform healthy",
        { every: 50, within: 180_000 }
      ).then((url) => url!, (error: Error) => Promise.reject(error.message.startsWith("platform exited") ? error : new Error(`platform did not become healthy:\n${output}`)))
    )
    const terminateWithin = (limit: Duration.DurationInput) =>
      Effect.promise(() => {
        child.kill("SIGTERM")
        return exited
      }).pipe(
        // A hung shutdown fails with what the process said, rather than running into the test's timeout.
        Effect.timeoutFail({
          duration: limit,
          onTimeout: () => new Error(`no exit ${Duration.format(limit)} after SIGTERM (pid ${child.pid}):\n${output}`)
        }),
        Effect.orDie
      )
    return {
      url,
      pid: child.pid!,
      signal: (signal) => void child.kill(signal),
      output: () => output,
      kill: async () => {
        child.kill("SIGKILL")
        await exited
      },
      terminate: terminateWithin("30 seconds"),
      terminateWithin
    } satisfies PlatformProcess
  })
