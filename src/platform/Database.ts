import { PGlite } from "@electric-sql/pglite"
import { vector } from "@electric-sql/pglite-pgvector"
import { PGLiteSocketServer } from "@electric-sql/pglite-socket"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as SqlClient from "@effect/sql/SqlClient"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as PgMigrator from "@effect/sql-pg/PgMigrator"
import { Effect, Layer, Option, Redacted, String as Str } from "effect"
import * as Fs from "node:fs/promises"
import * as Path from "node:path"
import { AppConfig } from "./Config.js"
import { randomBase62 } from "./Ids.js"
import { migrations } from "./migrations/index.js"

/**
 * PostgreSQL is the source of truth. With `DATABASE_URL` the platform talks to a real server; without it, PGlite
 * keeps the database in `DATA_DIR/pgdata` and serves it on a loopback socket, so the very same `@effect/sql-pg`
 * client (and the same SQL) runs in both modes.
 */

/** Columns are snake_case, fields camelCase; JSON columns hold callers' own keys and are left exactly as stored. */
const names = {
  transformQueryNames: Str.camelToSnake,
  transformResultNames: Str.snakeToCamel,
  transformJson: false
} as const

/** PGlite is one backend: a pool of one keeps one connection's Parse/Bind/Execute from interleaving with another's. */
const embeddedPool = { maxConnections: 1, minConnections: 1 } as const

/**
 * PostgreSQL's shared buffers live inside PGlite's WebAssembly memory, and initdb's 128 MB was half of the process's
 * resident memory (313 MB for PGlite alone, 162 MB with 16 MB) and half of the time to open the data directory
 * (1.6 s, 0.8 s). Reads that miss the buffers still hit the operating system's page cache, and an embedded database
 * is one machine's worth of data.
 */
const embeddedStartParams = [...PGlite.defaultStartParams, "-c", "shared_buffers=16MB"]

const embedded = (dataDir: string) =>
  Effect.gen(function*() {
    const dir = Path.resolve(dataDir, "pgdata")
    yield* Effect.promise(() => Fs.mkdir(dir, { recursive: true }))
    const db = yield* Effect.acquireRelease(
      // pgvector ships with PGlite (50 kB, loaded only by `CREATE EXTENSION vector`): knowledge's embeddings.
      Effect.promise(() => PGlite.create(dir, { startParams: embeddedStartParams, extensions: { vector } })),
      (db) => Effect.promise(() => db.close()).pipe(Effect.ignore)
    )
    const server = yield* Effect.acquireRelease(
      Effect.promise(async () => {
        const server = new PGLiteSocketServer({ db, host: "127.0.0.1", port: 0, maxConnections: 8 })
        await server.start()
        return server
      }),
      (server) => Effect.promise(() => server.stop()).pipe(Effect.ignore)
    )
    const [host, port] = server.getServerConn().split(":")
    yield* Effect.logDebug(`embedded PostgreSQL (PGlite) in ${dir} on ${host}:${port}`)
    return PgClient.layer({
      host: host!,
      port: Number(port),
      username: "postgres",
      database: "postgres",
      ...embeddedPool,
      ...names
    })
  }).pipe(Layer.unwrapScoped)

/**
 * The `application_name` of every connection this runner opens to the deployment's database (pool and listeners): it
 * names the runner's database sessions, so another runner can end them all when this one stops answering (`cluster/Watch.ts`). One per runner, made when its database layer is built: a process that runs several platforms (the
 * test suites) or restarts one in place has a name for each, and cutting one never ends another's sessions.
 */
export class DatabaseSessions extends Effect.Service<DatabaseSessions>()("atrium/platform/DatabaseSessions", {
  sync: () => ({ applicationName: `atrium:${randomBase62(12)}` })
}) {}

const external = (url: Redacted.Redacted) =>
  Layer.unwrapEffect(Effect.map(DatabaseSessions, ({ applicationName }) =>
    PgClient.layer({
      url,
      maxConnections: 20,
      applicationName,
      ...names
    })))

const ClientLive = Layer.unwrapEffect(
  Effect.map(AppConfig, (config) =>
    Option.match(config.databaseUrl, {
      onNone: () => embedded(config.dataDir),
      onSome: external
    }))
).pipe(Layer.provide(AppConfig.Default))

/**
 * Builds `layer` holding a PostgreSQL advisory lock: processes that start together against one database (cluster
 * mode) run their DDL (migrations, the cluster's own tables) one after the other instead of racing on the catalog.
 */
export const withStartupLock = <A, E, R>(layer: Layer.Layer<A, E, R>) =>
  Layer.scopedContext(Effect.gen(function*() {
    const outer = yield* Effect.scope
    const sql = yield* SqlClient.SqlClient
    return yield* Effect.scoped(Effect.gen(function*() {
      const connection = yield* Effect.orDie(sql.reserve)
      yield* Effect.acquireRelease(
        Effect.orDie(connection.executeRaw("SELECT pg_advisory_lock(7411002)", [])),
        () => Effect.ignore(connection.executeRaw("SELECT pg_advisory_unlock(7411002)", []))
      )
      return yield* Layer.buildWithScope(layer, outer)
    }))
  }))

const MigratorLive = Layer.unwrapEffect(Effect.map(AppConfig, (config) => {
  const migrator = PgMigrator.layer({ loader: migrations, table: "atrium_migrations" }).pipe(
    Layer.provide(NodeContext.layer)
  )
  return Option.isSome(config.databaseUrl) ? withStartupLock(migrator) : migrator
})).pipe(Layer.provide(AppConfig.Default))

/** The SQL client, with every migration applied before anything else may use it. */
export const DatabaseLive: Layer.Layer<SqlClient.SqlClient | PgClient.PgClient | DatabaseSessions, unknown> = MigratorLive.pipe(
  Layer.provideMerge(ClientLive),
  Layer.provideMerge(DatabaseSessions.Default),
  Layer.orDie
)
