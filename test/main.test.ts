import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs/promises"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import { requestAt } from "./support/Client.js"
import { jsonLines, launchPlatform } from "./support/Process.js"
import { pollPromise, realWait } from "./support/Poll.js"

/**
 * The newcomer's path: the real entry point (`src/main.ts`, what `npm start` runs) as its own process, with no
 * settings but a port and a data directory: embedded PGlite, in-memory store, console SMS.
 */

const launch = (dataDir: string, extraEnv: Record<string, string> = {}) =>
  launchPlatform({ DATA_DIR: dataDir, ...extraEnv })

const tempDir = Effect.acquireRelease(
  Effect.promise(() => Fs.mkdtemp(Path.join(Os.tmpdir(), "atrium-main-"))),
  (dir) => Effect.promise(() => Fs.rm(dir, { recursive: true, force: true }))
)

/**
 * The code from the console SMS line. The line reaches us through the child's stdout pipe, which may trail the HTTP
 * answer, so it is waited for (a few seconds at most).
 */
const codeFromLog = (platform: { readonly output: () => string }, phone: string) =>
  Effect.promise(async () => {
    // Polled: the code is in a real process's output, read as it arrives.
    const code = await pollPromise(
      () => platform.output().split("\n").reverse().find((l) => l.includes(`SMS to ${phone}`))?.match(/\b(\d{6})\b/)?.[1],
      (found) => found !== undefined,
      `the SMS line for ${phone}`,
      { every: 50, within: 5_000 }
    ).catch(() => undefined)
    if (code === undefined) throw new Error(`no SMS line for ${phone} in:\n${platform.output()}`)
    return code
  })

describe("the platform process (npm start)", () => {
  // One restart serves both shutdowns: the first process stops on SIGTERM with nothing open, the second with a request
  // still open (each start of dist/ costs seconds of CPU, the file's whole time).
  it.scopedLive("starts with nothing configured, logs SMS codes to the console, and stops cleanly on SIGTERM, even during an open request", () =>
    Effect.gen(function*() {
      const dataDir = yield* tempDir
      const phone = "+8613912345678"
      const first = yield* Effect.scoped(Effect.gen(function*() {
        const platform = yield* launch(dataDir)
        const sent = yield* requestAt(platform.url, "POST", "/api/auth/sms/sendCode", { body: { phone } })
        assert.strictEqual(sent.status, 200)
        const code = yield* codeFromLog(platform, phone)
        const login = yield* requestAt(platform.url, "POST", "/api/auth/login", { body: { phone, code } })
        assert.strictEqual(login.status, 200)
        assert.strictEqual(login.body.newUser, true)
        const key = yield* requestAt(platform.url, "POST", "/api/user/apiKey/create", { token: login.body.token })
        assert.strictEqual(key.status, 200)
        const exitCode = yield* platform.terminate
        assert.strictEqual(exitCode, 0, platform.output())
        // Its stdout is a pipe, so every line it wrote is JSON, from PGlite's first initialisation and the
        // migrations to the shutdown (the telemetry test reads an already migrated start's); one that is not throws,
        // naming it.
        assert.isAbove(jsonLines(platform).length, 0, "the lines of a piped stdout, each JSON")
        return { token: login.body.token as string, key: key.body.key as string }
      }))

      // The same DATA_DIR after a restart: the user, the API key and the generated JWT secret are all still there.
      const platform = yield* launch(dataDir, { SHUTDOWN_GRACE: "1 second" })
      const models = yield* requestAt(platform.url, "GET", "/v1/models", { token: first.key })
      assert.strictEqual(models.status, 200)
      const refresh = yield* requestAt(platform.url, "GET", "/api/token/refresh", { token: first.token })
      assert.strictEqual(refresh.status, 200, "the login token outlives a restart (JWT secret kept in DATA_DIR)")

      // SIGTERM during an open request still exits: a request whose body never finishes keeps a connection open;
      // shutdown must not wait for it forever.
      const socket = yield* Effect.acquireRelease(
        Effect.sync(() => Net.connect(Number(new URL(platform.url).port), "127.0.0.1")),
        (socket) => Effect.sync(() => socket.destroy())
      )
      socket.write("POST /api/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
      // Real wait for a real process: its server must have taken the half-sent request before it is told to stop, and
      // a request still arriving is seen nowhere.
      yield* realWait(200)
      assert.strictEqual(yield* platform.terminate, 0, platform.output())
    }), { timeout: 120_000 })
})
