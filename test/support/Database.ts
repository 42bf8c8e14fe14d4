import * as SqlClient from "@effect/sql/SqlClient"
import { ConfigProvider, Effect, Layer } from "effect"
import { DatabaseLive, type DatabaseSessions } from "../../src/platform/Database.js"
import { makeMigratedStorage } from "./TestServer.js"

/**
 * A database of the test's own, without a server: a copy of the run's migrated template (PGlite in a temporary
 * `DATA_DIR`, or a PostgreSQL database of its own with `DATABASE_URL`), opened through the platform's own
 * `DatabaseLive`. For tests of one module's layers (an entity through `Entity.makeTestClient`, a repository) that
 * need the real SQL but not HTTP. `settings` are the configuration every layer built on top of it reads.
 */
export const TestDatabase = (settings: Record<string, string> = {}): Layer.Layer<SqlClient.SqlClient | DatabaseSessions> =>
  Layer.unwrapScoped(Effect.map(makeMigratedStorage, (storage) => {
    const provider = Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries({ ...storage.env, ...settings }))))
    return Layer.provideMerge(DatabaseLive, provider)
  })).pipe(Layer.orDie)

/** Adds a user row (wallets, sessions and agents belong to one), with a phone number of its own. */
export const insertUser = (id: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql`INSERT INTO users (id, phone) VALUES (${id}, ${`+1555${Math.floor(Math.random() * 1e9)}`})`).pipe(Effect.orDie)
