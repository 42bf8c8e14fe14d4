import { HttpServer } from "@effect/platform"
import { SqlClient } from "@effect/sql"
import { Clock, ConfigProvider, Context, Effect, Layer, Logger, LogLevel, Option, Scope } from "effect"
import * as Http from "node:http"
import { makeServer, Routes } from "../../src/Server.js"
import { makeMigratedStorage, type Storage } from "./Templates.js"

/**
 * Boots the real platform on a random port, the way `npm start` does, with settings of its own.
 *
 * Both modes run the same tests: without `DATABASE_URL` the server uses embedded PGlite in a fresh directory and
 * the in-memory store; with `DATABASE_URL` and `REDIS_URL` in the environment it gets a fresh PostgreSQL database
 * and a Redis key prefix of its own, so test files never see each other's data. Either database starts as a copy of
 * the run's migrated template (`Templates.ts`).
 */

export const JWT_SECRET = "test-secret-test-secret-test-secret-0123456789"
export const TEST_PHONE = "+8613800000000"
export const TEST_CODE = "123456"
/** The operator's bearer for `/internal/*` every test server gets (spec 5.2 rule 6; issue 15 item 1). */
export const INTERNAL_TOKEN = "test-internal-token-0123456789abcdef"
/** Headers that open `/internal/*` to a test on the private network. */
export const internalAuth: Record<string, string> = { authorization: `Bearer ${INTERNAL_TOKEN}` }

// Storage helpers live with the templates they copy (`Templates.ts`, a light module the browser suite imports too).
export { makeMigratedStorage, makeStorage, type Storage } from "./Templates.js"

/** A stand-in SMS gateway over real HTTP: the platform's `http` SMS provider posts here, tests read the codes. */
export interface SmsInbox {
  readonly url: string
  readonly messages: Array<{ readonly to: string; readonly text: string; readonly authorization?: string }>
  /** The latest code sent to `phone`. */
  readonly codeFor: (phone: string) => Effect.Effect<string>
  /** Answer the next deliveries with this status (200 by default). */
  setStatus(status: number): void
}

export const makeSmsInbox: Effect.Effect<SmsInbox, never, Scope.Scope> = Effect.gen(function*() {
  let status = 200
  const messages: SmsInbox["messages"] = []
  const server = Http.createServer((req, res) => {
    let body = ""
    req.on("data", (chunk) => (body += chunk))
    req.on("end", () => {
      if (status < 300) {
        const parsed = JSON.parse(body) as { to: string; text: string }
        messages.push({ ...parsed, ...(req.headers.authorization ? { authorization: req.headers.authorization } : {}) })
      }
      res.writeHead(status, { "content-type": "application/json" }).end("{}")
    })
  })
  yield* Effect.acquireRelease(
    Effect.async<void>((resume) => {
      server.listen(0, "127.0.0.1", () => resume(Effect.void))
    }),
    () =>
      Effect.async<void>((resume) => {
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
  )
  const { port } = server.address() as { port: number }
  return {
    url: `http://127.0.0.1:${port}/sms`,
    messages,
    setStatus: (next) => {
      status = next
    },
    codeFor: (phone) =>
      Effect.sync(() => {
        const last = [...messages].reverse().find((m) => m.to === phone)
        const code = last?.text.match(/\b(\d{6})\b/)?.[1]
        if (code === undefined) throw new Error(`no SMS code was sent to ${phone}`)
        return code
      })
  }
})

export interface RunningServer {
  readonly url: string
  readonly inbox: SmsInbox
  /** Raw SQL on the server's own database (PGlite answers only its server), for what HTTP cannot show. */
  readonly query: (text: string) => Effect.Effect<ReadonlyArray<Record<string, unknown>>>
}

/** Starts a server on `storage` with `env` on top of the test defaults; it stops when the scope closes. */
export const startServer = <R = never>(
  storage: Storage,
  inbox: SmsInbox,
  env: Record<string, string> = {},
  /** Routes served next to the platform's (test probes). */
  extraRoutes: Layer.Layer<never, unknown, R> = Layer.empty as Layer.Layer<never, unknown, R>
): Effect.Effect<RunningServer, never, Scope.Scope> =>
  Effect.gen(function*() {
    const settings = {
      PORT: "0",
      HOST: "127.0.0.1",
      JWT_SECRET,
      SMS_PROVIDER: "http",
      SMS_HTTP_URL: inbox.url,
      SMS_HTTP_TOKEN: "sms-gateway-token",
      SMS_TEST_OTP: `${TEST_PHONE}=${TEST_CODE}`,
      INTERNAL_TOKEN,
      // Past SMS_CHALLENGE_AFTER logins from 127.0.0.1, `loginWithSms` solves the login challenge as a browser would;
      // a small search keeps that quick in tests (the proof of work is the same, only cheaper).
      SMS_CHALLENGE_MAX_NUMBER: "1000",
      ...storage.env,
      ...env
    }
    // `NAME: ""` in a test's env unsets a default above: a key set to the empty string would stop start-up
    // (test/platform/secrets-config.test.ts), as an unfilled line in an operator's env file does.
    const given = Object.entries(settings).filter(([, value]) => value !== "")
    const layer = makeServer(Layer.mergeAll(Routes, extraRoutes)).pipe(
      Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map(given)))),
      Layer.provide(Logger.minimumLogLevel(process.env.TEST_LOG ? LogLevel.Debug : LogLevel.Warning))
    )
    // A server runs on the real clock even inside `it.effect`/`it.layer`, whose TestClock stands still at 0:
    // tokens, code lifetimes and TTLs are about wall-clock time.
    // What extra routes need beyond the server's own layers cannot be shown empty for a generic `R`; a probe that
    // needs more fails at start-up, loudly.
    const context = yield* Layer.build(layer as Layer.Layer<HttpServer.HttpServer | SqlClient.SqlClient>).pipe(
      Effect.orDie,
      Effect.withClock(Clock.make())
    )
    const address = Context.get(context, HttpServer.HttpServer).address
    if (address._tag !== "TcpAddress") return yield* Effect.dieMessage("expected a TCP address")
    const sql = Context.get(context, SqlClient.SqlClient).withoutTransforms()
    return {
      url: `http://127.0.0.1:${address.port}`,
      inbox,
      query: (text) => sql.unsafe<Record<string, unknown>>(text).pipe(Effect.orDie)
    }
  })

export class TestServer extends Context.Tag("test/TestServer")<TestServer, RunningServer>() {
  /**
   * One server per test file (or `it.layer` block), with its own storage and SMS inbox, and `extraRoutes` (test
   * probes) served next to the platform's.
   */
  static layer = <R = never>(
    env: Record<string, string> = {},
    extraRoutes: Layer.Layer<never, unknown, R> = Layer.empty as Layer.Layer<never, unknown, R>
  ) =>
    Layer.scoped(
      TestServer,
      Effect.gen(function*() {
        const storage = yield* makeMigratedStorage
        const inbox = yield* makeSmsInbox
        return yield* startServer(storage, inbox, env, extraRoutes)
      })
    )
}

export const servicesMode = Option.isSome(Option.fromNullable(process.env.DATABASE_URL))
