import { Effect, type Scope } from "effect"
import * as ChildProcess from "node:child_process"
import * as Net from "node:net"
import * as Path from "node:path"

/**
 * The platform as its own process, the entry point `npm start` runs, from the sources (`node --import tsx
 * src/main.ts`) rather than `dist/`, so a test never runs a stale build: for tests of start-up, shutdown, crashes and
 * what the process prints, which an in-process server cannot show.
 */
export interface PlatformProcess {
  readonly url: string
  /** Everything the process printed so far. */
  readonly output: () => string
  /** SIGKILL, as a crash: resolves once the process is gone. */
  readonly kill: () => Promise<void>
  /** SIGTERM; resolves with the exit code, or fails with the output if the process is still there 30 s later. */
  readonly terminate: Effect.Effect<number | null>
}

export const freePort = Effect.promise(() =>
  new Promise<number>((resolve) => {
    const server = Net.createServer()
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as Net.AddressInfo
      server.close(() => resolve(port))
    })
  })
)

/** Settings a test's own environment may carry that must not leak into the platform under test. */
const NOT_INHERITED = ["DATABASE_URL", "REDIS_URL", "KEY_PREFIX", "JWT_SECRET", "SMS_TEST_OTP"]

/** Starts the platform with `env` (plus a free PORT) and waits until it is healthy; it is killed with the scope. */
export const launchPlatform = (env: Record<string, string>): Effect.Effect<PlatformProcess, never, Scope.Scope> =>
  Effect.gen(function*() {
    const port = yield* freePort
    const childEnv: Record<string, string> = {}
    for (const [key, value] of Object.entries(process.env)) {
      if (value !== undefined && !NOT_INHERITED.includes(key)) childEnv[key] = value
    }
    Object.assign(childEnv, { PORT: String(port), HOST: "127.0.0.1", ...env })
    const child = yield* Effect.acquireRelease(
      Effect.sync(() =>
        ChildProcess.spawn(process.execPath, ["--import", "tsx", "src/main.ts"], {
          cwd: Path.resolve(import.meta.dirname, "../.."),
          env: childEnv,
          stdio: ["ignore", "pipe", "pipe"]
        })
      ),
      (child) => Effect.sync(() => child.exitCode === null && child.signalCode === null && child.kill("SIGKILL"))
    )
    let output = ""
    child.stdout.on("data", (chunk) => (output += chunk))
    child.stderr.on("data", (chunk) => (output += chunk))
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)))
    const url = `http://127.0.0.1:${port}`
    // Ready when health answers; a cold start (tsx compiling the sources, PGlite initialising) on a busy machine
    // takes a while, so the wait is a generous deadline rather than a count of tries.
    yield* Effect.promise(async () => {
      const deadline = Date.now() + 180_000
      while (Date.now() < deadline) {
        if (child.exitCode !== null) throw new Error(`platform exited early:\n${output}`)
        const ok = await fetch(`${url}/api/health`, { signal: AbortSignal.timeout(2_000) }).then((r) => r.ok, () => false)
        if (ok) return
        await new Promise((r) => setTimeout(r, 50))
      }
      throw new Error(`platform did not become healthy:\n${output}`)
    })
    return {
      url,
      output: () => output,
      kill: async () => {
        child.kill("SIGKILL")
        await exited
      },
      terminate: Effect.promise(() => {
        child.kill("SIGTERM")
        return exited
      }).pipe(
        // A hung shutdown fails with what the process said, rather than running into the test's timeout.
        Effect.timeoutFail({
          duration: "30 seconds",
          onTimeout: () => new Error(`no exit 30 s after SIGTERM (pid ${child.pid}):\n${output}`)
        }),
        Effect.orDie
      )
    } satisfies PlatformProcess
  })
