import { PGlite } from "@electric-sql/pglite"
import { assert, describe, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import * as Path from "node:path"
import pg from "pg"
import { createApiKey, loginTestUser, loginWithSms, requestAt } from "../support/Client.js"
import {
  makeSmsInbox,
  makeStorage,
  type RunningServer,
  type SmsInbox,
  startServer,
  servicesMode,
  type Storage,
  TestServer
} from "../support/TestServer.js"

/**
 * The database layer in the mode of the run (embedded PGlite in a data directory, or PostgreSQL at DATABASE_URL):
 * migrations applied at start, data and the generated JWT key surviving a restart. Each test stops and starts
 * real servers, one after another, on the file's one storage.
 */

class Shared extends Context.Tag("test/database/Shared")<Shared, { storage: Storage; inbox: SmsInbox }>() {}

const SharedLive = Layer.scoped(Shared, Effect.all({ storage: makeStorage, inbox: makeSmsInbox }))

const randomName = () => Math.random().toString(36).slice(2, 10)

/**
 * A server on the shared storage, for the rest of the enclosing scope. Each one gets a key-value prefix of its own:
 * a restart loses the in-memory store, and with Redis this makes it lose it too, so what works after the restart
 * works because of the database (login sessions, cooldowns and codes are gone, as after a Redis flush).
 */
const start = (env: Record<string, string> = {}) =>
  Effect.flatMap(Shared, ({ inbox, storage }) =>
    startServer(storage, inbox, { KEY_PREFIX: `atrium-test:${randomName()}:`, ...env }))

/** With the database's own secret: `JWT_SECRET` set to nothing counts as unset. */
const GENERATED_SECRET = { JWT_SECRET: "" }

/**
 * Reads the storage directly: PostgreSQL at its URL, or the PGlite directory when no server holds it (PGlite has
 * one user at a time, so call this only between servers).
 */
const query = (text: string) =>
  Effect.flatMap(Shared, ({ storage }) =>
    Effect.promise(async (): Promise<Array<Record<string, unknown>>> => {
      if (storage.env.DATABASE_URL) {
        const client = new pg.Client({ connectionString: storage.env.DATABASE_URL })
        await client.connect()
        try {
          return (await client.query(text)).rows
        } finally {
          await client.end()
        }
      }
      const db = await PGlite.create(Path.join(storage.env.DATA_DIR!, "pgdata"))
      try {
        return (await db.query<Record<string, unknown>>(text)).rows
      } finally {
        await db.close()
      }
    }))

const withServer = <A, E, R>(server: RunningServer, effect: Effect.Effect<A, E, R>) =>
  Effect.provideService(effect, TestServer, server)

describe("database", () => {
  // Live services: the servers run on the real clock (JWT times are checked against it).
  layer(SharedLive, { excludeTestServices: true })((it) => {
    it.effect("migrations are applied at start and recorded once", () =>
      Effect.gen(function*() {
        yield* Effect.scoped(Effect.gen(function*() {
          const server = yield* start(GENERATED_SECRET)
          const health = yield* requestAt(server.url, "GET", "/api/health")
          assert.strictEqual(health.status, 200, health.text)
        }))
        yield* Effect.scoped(start(GENERATED_SECRET))

        const tables = yield* query(
          `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name`
        )
        const names = tables.map((row) => row.table_name)
        for (const table of ["api_keys", "atrium_migrations", "platform_secrets", "users"]) {
          assert.include(names, table)
        }
        // Two starts, one application of each migration.
        const applied = yield* query(`SELECT migration_id, name FROM atrium_migrations ORDER BY migration_id`)
        assert.deepStrictEqual(applied.map((row) => [row.migration_id, row.name]), [[1, "identity"], [2, "billing"], [3, "agents"], [4, "files"], [5, "market"], [6, "runs"], [7, "sessions"], [8, "evolution"], [9, "run_evidence"], [10, "account_trials"], [11, "tools"], [12, "api_responses"], [13, "cluster"], [14, "session_queue"], [15, "faults"], [16, "knowledge"], [17, "fences"], [18, "durable_runs"], [19, "webhooks"], [20, "wallet_holds"], [21, "session_trees"], [23, "schedules"], [24, "traces"], [25, "memory"], [27, "turn_feedback"], [28, "evals"], [30, "durable_approvals"], [31, "market_store"], [33, "memory_extractions"], [34, "memory_call_keys"], [35, "ledger_origins"]])
      }), 120_000)

    it.effect("users and API keys survive a restart", () =>
      Effect.gen(function*() {
        const before = yield* Effect.scoped(Effect.gen(function*() {
          const server = yield* start()
          const user = yield* withServer(server, loginWithSms())
          assert.isTrue(user.newUser)
          const key = yield* withServer(server, createApiKey(user.token, "survivor"))
          const models = yield* requestAt(server.url, "GET", "/v1/models", { token: key.key })
          assert.strictEqual(models.status, 200, models.text)
          return { user, key }
        }))

        yield* Effect.scoped(Effect.gen(function*() {
          const server = yield* start()
          // The API key is looked up in the database: it still works.
          const models = yield* requestAt(server.url, "GET", "/v1/models", { token: before.key.key })
          assert.strictEqual(models.status, 200, models.text)
          // The login token is not in the (new) session store: it is verified as a JWT and is still current.
          const list = yield* requestAt(server.url, "POST", "/api/user/apiKey/list", { token: before.user.token })
          assert.strictEqual(list.status, 200, list.text)
          assert.deepStrictEqual(list.body.data.map((k: { id: string; name: string }) => [k.id, k.name]), [[
            before.key.id,
            "survivor"
          ]])
          // The same phone is the same user: not new again, and it owns the same key.
          const again = yield* withServer(server, loginWithSms(before.user.phone))
          assert.isFalse(again.newUser)
          const listed = yield* requestAt(server.url, "POST", "/api/user/apiKey/list", { token: again.token })
          assert.strictEqual(listed.status, 200, listed.text)
          assert.deepStrictEqual(listed.body.data.map((k: { id: string }) => k.id), [before.key.id])
        }))

        const users = yield* query(`SELECT count(*)::int AS n FROM users`)
        assert.isAtLeast(users[0]!.n as number, 1)
      }), 120_000)

    it.effect("the JWT key generated when JWT_SECRET is unset survives a restart", () =>
      Effect.gen(function*() {
        const token = yield* Effect.scoped(Effect.gen(function*() {
          const server = yield* start(GENERATED_SECRET)
          return yield* withServer(server, loginTestUser())
        }))

        yield* Effect.scoped(Effect.gen(function*() {
          const server = yield* start(GENERATED_SECRET)
          const reply = yield* requestAt(server.url, "POST", "/api/user/apiKey/list", { token })
          assert.strictEqual(reply.status, 200, reply.text)
        }))

        // The control: under another key the same token is refused, so the token above was verified by the key
        // kept in the database, not accepted for some other reason.
        yield* Effect.scoped(Effect.gen(function*() {
          const server = yield* start({ JWT_SECRET: `another-secret-${randomName()}-${randomName()}-${randomName()}` })
          const reply = yield* requestAt(server.url, "POST", "/api/user/apiKey/list", { token })
          assert.strictEqual(reply.status, 401, reply.text)
        }))

        const secrets = yield* query(`SELECT name, value FROM platform_secrets`)
        assert.deepStrictEqual(secrets.map((row) => row.name), ["jwt_secret"])
        assert.isAtLeast(String(secrets[0]!.value).length, 32)
      }), 120_000)

    // PostgreSQL can refuse new connections to one database while the server runs; embedded PGlite cannot be taken
    // away from under a running server from outside it.
    it.effect.runIf(servicesMode)("health is 503 naming the database while the database refuses connections", () =>
      Effect.gen(function*() {
        const { storage } = yield* Shared
        const name = new URL(storage.env.DATABASE_URL!).pathname.slice(1)
        const admin = (text: string) =>
          Effect.promise(async () => {
            const client = new pg.Client({ connectionString: process.env.DATABASE_URL })
            await client.connect()
            try {
              await client.query(text)
            } finally {
              await client.end()
            }
          })
        yield* Effect.scoped(Effect.gen(function*() {
          const server = yield* start()
          assert.strictEqual((yield* requestAt(server.url, "GET", "/api/health")).status, 200)
          yield* Effect.acquireRelease(
            admin(`ALTER DATABASE ${name} ALLOW_CONNECTIONS false`).pipe(
              Effect.zipRight(admin(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '${name}'`))
            ),
            () => admin(`ALTER DATABASE ${name} ALLOW_CONNECTIONS true`)
          )
          const reply = yield* requestAt(server.url, "GET", "/api/health")
          assert.strictEqual(reply.status, 503, reply.text)
          assert.strictEqual(reply.body.error.type, "service_unavailable")
          assert.include(reply.body.error.message, "database")
          assert.notInclude(reply.body.error.message, "store")
          assert.notMatch(reply.text, /ALLOW_CONNECTIONS|not currently accepting|atrium_test_|postgres/i)
          // And back to ok once the database answers again, without a restart.
          yield* admin(`ALTER DATABASE ${name} ALLOW_CONNECTIONS true`)
          const after = yield* requestAt(server.url, "GET", "/api/health")
          assert.strictEqual(after.status, 200, after.text)
        }))
      }), 60_000)
  })
})
