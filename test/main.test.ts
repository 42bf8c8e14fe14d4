import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs/promises"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import { requestAt } from "./support/Client.js"

/**
 * The newcomer's path: the real entry point (`src/main.ts`, what `npm start` runs) as its own process, with no
 * settings but a port and a data directory: embedded PGlite, in-memory store, console SMS.
 */

const freePort = Effect.promise(() =>
  new Promise<number>((resolve) => {
    const server = Net.createServer()
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as Net.AddressInfo
      server.close(() => resolve(port))
    })
  })
)

interface Platform {
  readonly url: string
  readonly output: () => string
  /** Sends SIGTERM and resolves with the exit code. */
  readonly terminate: Effect.Effect<number | null>
  /** Resolves with the exit code once the process has ended on its own. */
  readonly exited: Promise<number | null>
}

const launch = (dataDir: string, extraEnv: Record<string, string> = {}) =>
  Effect.gen(function*() {
    const port = yield* freePort
    const env: Record<string, string> = {}
    for (const [key, value] of Object.entries(process.env)) {
      if (value !== undefined && !["DATABASE_URL", "REDIS_URL", "JWT_SECRET", "SMS_TEST_OTP"].includes(key)) {
        env[key] = value
      }
    }
    Object.assign(env, { PORT: String(port), DATA_DIR: dataDir, ...extraEnv })
    const child = yield* Effect.acquireRelease(
      Effect.sync(() =>
        ChildProcess.spawn(process.execPath, ["--import", "tsx", "src/main.ts"], {
          cwd: Path.resolve(import.meta.dirname, ".."),
          env,
          stdio: ["ignore", "pipe", "pipe"]
        })
      ),
      (child) => Effect.sync(() => child.exitCode === null && child.kill("SIGKILL"))
    )
    let output = ""
    child.stdout.on("data", (chunk) => (output += chunk))
    child.stderr.on("data", (chunk) => (output += chunk))
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)))
    const url = `http://127.0.0.1:${port}`
    // Ready when health answers; give a cold PGlite start plenty of room.
    yield* Effect.promise(async () => {
      for (let i = 0; i < 300; i++) {
        if (child.exitCode !== null) throw new Error(`platform exited early:\n${output}`)
        const ok = await fetch(`${url}/api/health`, { signal: AbortSignal.timeout(2_000) }).then((r) => r.ok, () => false)
        if (ok) return
        await new Promise((r) => setTimeout(r, 100))
      }
      throw new Error(`platform did not become healthy:\n${output}`)
    })
    const platform: Platform = {
      url,
      output: () => output,
      exited,
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
    }
    return platform
  })

const tempDir = Effect.acquireRelease(
  Effect.promise(() => Fs.mkdtemp(Path.join(Os.tmpdir(), "atrium-main-"))),
  (dir) => Effect.promise(() => Fs.rm(dir, { recursive: true, force: true }))
)

const codeFromLog = (output: string, phone: string) => {
  const line = output.split("\n").reverse().find((l) => l.includes(`SMS to ${phone}`))
  const code = line?.match(/\b(\d{6})\b/)?.[1]
  if (code === undefined) throw new Error(`no SMS line for ${phone} in:\n${output}`)
  return code
}

describe("the platform process (npm start)", () => {
  it.scopedLive("starts with nothing configured, logs SMS codes to the console, and stops cleanly on SIGTERM", () =>
    Effect.gen(function*() {
      const dataDir = yield* tempDir
      const phone = "+8613912345678"
      const first = yield* Effect.scoped(Effect.gen(function*() {
        const platform = yield* launch(dataDir)
        const sent = yield* requestAt(platform.url, "POST", "/api/auth/sms/sendCode", { body: { phone } })
        assert.strictEqual(sent.status, 200)
        const code = codeFromLog(platform.output(), phone)
        const login = yield* requestAt(platform.url, "POST", "/api/auth/login", { body: { phone, code } })
        assert.strictEqual(login.status, 200)
        assert.strictEqual(login.body.newUser, true)
        const key = yield* requestAt(platform.url, "POST", "/api/user/apiKey/create", { token: login.body.token })
        assert.strictEqual(key.status, 200)
        const exitCode = yield* platform.terminate
        assert.strictEqual(exitCode, 0, platform.output())
        return { token: login.body.token as string, key: key.body.key as string }
      }))

      // The same DATA_DIR after a restart: the user, the API key and the generated JWT secret are all still there.
      const platform = yield* launch(dataDir)
      const models = yield* requestAt(platform.url, "GET", "/v1/models", { token: first.key })
      assert.strictEqual(models.status, 200)
      const refresh = yield* requestAt(platform.url, "GET", "/api/token/refresh", { token: first.token })
      assert.strictEqual(refresh.status, 200, "the login token outlives a restart (JWT secret kept in DATA_DIR)")
      assert.strictEqual(yield* platform.terminate, 0)
    }), { timeout: 120_000 })

  it.scopedLive("SIGTERM during an open request still exits", () =>
    Effect.gen(function*() {
      const dataDir = yield* tempDir
      const platform = yield* launch(dataDir, { SHUTDOWN_GRACE: "1 second" })
      // A request whose body never finishes keeps a connection open; shutdown must not wait for it forever.
      const socket = yield* Effect.acquireRelease(
        Effect.sync(() => Net.connect(Number(new URL(platform.url).port), "127.0.0.1")),
        (socket) => Effect.sync(() => socket.destroy())
      )
      socket.write("POST /api/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
      yield* Effect.sleep("200 millis")
      const exitCode = yield* platform.terminate
      assert.strictEqual(exitCode, 0, platform.output())
    }), { timeout: 120_000 })
})


