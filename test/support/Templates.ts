import { ConfigProvider, Effect, Layer, type Scope } from "effect"
import * as ChildProcess from "node:child_process"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs/promises"
import * as Os from "node:os"
import * as Path from "node:path"
import pg from "pg"

/**
 * Migrated databases to copy. Initialising an empty PGlite directory and running every migration takes seconds per
 * server (tens of seconds on a loaded machine), and it was most of the suites' time; copying a directory that
 * already went through the very same migrations takes a fraction of it. So `globalSetup.ts` builds one migrated
 * template per run of vitest, through the platform's own `DatabaseLive` (the production migrator), and every test
 * storage starts as a copy of it:
 *  - a PGlite data directory under the system temp directory, copied into each embedded storage's `DATA_DIR/pgdata`;
 *  - in services mode also a PostgreSQL database marked as a template, cloned with `CREATE DATABASE x TEMPLATE t`.
 * Each test still gets a database of its own. A template is named after a hash of the migrations (and of the code
 * that applies them, and of the PGlite version), so any change to a migration builds a new one; the same migrations
 * reuse the one already built, also across runs and worktrees. Without a template (a file run outside this vitest
 * config) storages start empty and the server migrates them, as before.
 */

declare module "vitest" {
  export interface ProvidedContext {
    /** This vitest run's mark in the names of the databases its tests create (`testDatabase`). */
    atriumRunTag: string
    /** A migrated PGlite data directory (embedded mode). */
    atriumTemplatePgdata: string | undefined
    /** A migrated PostgreSQL template database (services mode). */
    atriumTemplateDatabase: string | undefined
  }
}

const root = Path.resolve(import.meta.dirname, "../..")

/** Changes whenever a migration, the migrator's settings or PGlite's on-disk format may have changed. */
export const templateKey = async (): Promise<string> => {
  const hash = Crypto.createHash("sha256")
  const dir = Path.join(root, "src/platform/migrations")
  const files = [
    ...(await Fs.readdir(dir)).sort().map((name) => Path.join(dir, name)),
    Path.join(root, "src/platform/Database.ts"),
    Path.join(root, "node_modules/@electric-sql/pglite/package.json")
  ]
  for (const file of files) {
    hash.update(Path.relative(root, file)).update("\0").update(await Fs.readFile(file)).update("\0")
  }
  return hash.digest("hex").slice(0, 12)
}

const randomName = () => Crypto.randomBytes(5).toString("hex")

/** Starts the platform's database layer on `settings` (which migrates it) and closes it again. */
const migrate = async (settings: Record<string, string>) => {
  const { DatabaseLive } = await import("../../src/platform/Database.js")
  await Effect.runPromise(
    Layer.build(DatabaseLive).pipe(
      Effect.scoped,
      Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(settings))))
    )
  )
}

/**
 * The PGlite data directory `dir/pgdata`, made by `make` (into the folder it is given) if missing. It is built aside
 * and renamed into place, so a run (of this worktree or another) that gets there at the same time never sees half a
 * directory.
 */
const pgdataBuiltAside = async (dir: string, make: (build: string) => Promise<void>): Promise<string> => {
  const pgdata = Path.join(dir, "pgdata")
  if (await exists(Path.join(pgdata, "PG_VERSION"))) return pgdata
  const build = `${dir}.build-${randomName()}`
  try {
    await make(build)
    await Fs.rename(build, dir).catch(async (error) => {
      if (!(await exists(Path.join(pgdata, "PG_VERSION")))) throw error
    })
  } finally {
    await Fs.rm(build, { recursive: true, force: true })
  }
  return pgdata
}

/** The migrated PGlite data directory for `key`, built (aside, then renamed) if missing. */
export const ensurePgliteTemplate = (key: string): Promise<string> =>
  pgdataBuiltAside(Path.join(Os.tmpdir(), `atrium-template-${key}`), (build) => migrate({ DATA_DIR: build }))

/** The migrated template database for `key` on the server at `adminUrl`, built (aside, then renamed) if missing. */
export const ensurePostgresTemplate = async (adminUrl: string, key: string): Promise<string> => {
  const name = `atrium_template_${key}`
  if (await databaseExists(adminUrl, name)) return name
  const build = `${name}_build_${randomName()}`
  await adminQuery(adminUrl, `CREATE DATABASE ${build}`)
  try {
    const url = new URL(adminUrl)
    url.pathname = `/${build}`
    await migrate({ DATABASE_URL: url.toString() })
    // No connections once it is a template: a session on it would make `CREATE DATABASE ... TEMPLATE` fail.
    await adminQuery(adminUrl, `ALTER DATABASE ${build} WITH IS_TEMPLATE true ALLOW_CONNECTIONS false`)
    await adminQuery(adminUrl, `ALTER DATABASE ${build} RENAME TO ${name}`).catch(async (error) => {
      if (!(await databaseExists(adminUrl, name))) throw error
    })
  } finally {
    if (await databaseExists(adminUrl, build)) {
      await adminQuery(adminUrl, `ALTER DATABASE ${build} WITH IS_TEMPLATE false`)
      await adminQuery(adminUrl, `DROP DATABASE ${build} WITH (FORCE)`)
    }
  }
  return name
}

/**
 * Gives an empty data directory the migrated template's `pgdata`, for a server or process that runs embedded (without
 * a template it stays empty, and the server migrates it itself).
 */
export const seedDataDir = async (dataDir: string): Promise<void> => {
  const template = (await provided()).atriumTemplatePgdata
  if (template === undefined) return
  await copyDir(template, Path.join(dataDir, "pgdata"))
}

/**
 * An initialised PGlite directory holding nothing of the platform (PostgreSQL's initdb, no migration), for empty
 * embedded storages (`makeStorage`): initdb took about 9 CPU-seconds of each, and what a test of migrations proves
 * begins after it (a first start's initdb is test/main.test.ts's). Built once per PGlite version beside the migrated
 * template (the system's temporary folder), aside and renamed into place as the template is. Without a template (a
 * file run outside this vitest config) there is none, and storages start empty.
 */
let blank: Promise<string | undefined> | undefined
const blankPgdata = (): Promise<string | undefined> =>
  blank ??= (async () => {
    const template = (await provided()).atriumTemplatePgdata
    if (template === undefined) return undefined
    const version = Crypto.createHash("sha256")
      .update(await Fs.readFile(Path.join(root, "node_modules/@electric-sql/pglite/package.json")))
      .digest("hex")
      .slice(0, 12)
    return pgdataBuiltAside(Path.join(Path.dirname(Path.dirname(template)), `atrium-blank-${version}`), async (build) => {
      const { PGlite } = await import("@electric-sql/pglite")
      await Fs.mkdir(Path.join(build, "pgdata"), { recursive: true })
      const db = await PGlite.create(Path.join(build, "pgdata"))
      await db.close()
    })
  })().catch((error) => {
    // Not kept: the next storage tries again, as every storage did before the directory was shared.
    blank = undefined
    throw error
  })

/** Gives an empty data directory an initialised PGlite directory without migrations (`blankPgdata`), where there is one. */
const seedBlankDataDir = async (dataDir: string): Promise<void> => {
  const blank = await blankPgdata()
  if (blank !== undefined) await copyDir(blank, Path.join(dataDir, "pgdata"))
}

/** Creates the database `name` at `adminUrl` as a copy of the migrated template (empty without one). */
export const createDatabase = async (adminUrl: string, name: string): Promise<void> => {
  const template = (await provided()).atriumTemplateDatabase
  await adminQuery(adminUrl, template === undefined ? `CREATE DATABASE ${name}` : `CREATE DATABASE ${name} TEMPLATE ${template}`)
}

/**
 * A database of this run's own on the server at `adminUrl` for as long as the scope lasts: a copy of the migrated
 * template, or empty (`fromTemplate: false`, for tests of migrations). Its name is `atrium_<kind>_r<run tag>_<random>`.
 *
 * It is dropped when the scope closes, but nobody waits for that: PostgreSQL 15's `DROP DATABASE` asks for an
 * immediate checkpoint and waits for it, which took 1-5 s with `fsync` on, and the suite's 130-odd databases made
 * that a minute of workers doing nothing. A drop cut short (the worker ended first) leaves a database of this run,
 * which `dropRunDatabases` removes when the run ends; another run's databases (a second worktree's suite on the same
 * server) carry another tag and are never touched.
 */
export const testDatabase = (adminUrl: string, kind: string, options: { readonly fromTemplate: boolean }) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const { atriumRunTag } = await provided()
      const name = `atrium_${kind}_r${atriumRunTag ?? "none"}_${randomName()}`
      await (options.fromTemplate ? createDatabase(adminUrl, name) : adminQuery(adminUrl, `CREATE DATABASE ${name}`))
      // A commit waits for its WAL flush only where durability across a crash of PostgreSQL itself is what is tested,
      // and no test on the shared server crashes it (the fault checker's server is its own, `Services.ts`): the tests
      // kill the platform, never the database. Consistency is unchanged; the services suite waits on fsync less.
      await adminQuery(adminUrl, `ALTER DATABASE ${name} SET synchronous_commit = off`)
      return name
    }),
    (name) =>
      Effect.sync(() => {
        adminQuery(adminUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => undefined)
      })
  )

/** Drops every database the run tagged `tag` left behind (`testDatabase`); at the end of the run. */
export const dropRunDatabases = async (adminUrl: string, tag: string): Promise<void> => {
  const client = new pg.Client({ connectionString: adminUrl })
  await client.connect()
  try {
    const left = await client.query<{ datname: string }>(
      "SELECT datname FROM pg_database WHERE datname LIKE 'atrium\\_%\\_r' || $1 || '\\_%'",
      [tag]
    )
    for (const { datname } of left.rows) await client.query(`DROP DATABASE IF EXISTS ${datname} WITH (FORCE)`)
  } finally {
    await client.end()
  }
}

/**
 * What `globalSetup.ts` provided. `vitest` is imported here, lazily, because this module is also loaded by
 * `globalSetup.ts`, where importing it fails.
 */
const provided = async () => {
  const { inject } = await import("vitest")
  return {
    atriumTemplatePgdata: inject("atriumTemplatePgdata"),
    atriumTemplateDatabase: inject("atriumTemplateDatabase"),
    atriumRunTag: inject("atriumRunTag")
  }
}

/** PGlite's directory (about 40 MB in 1,100 files) copied by `cp -R`, or by `fs.cp` where there is no `cp`. */
const copyDir = (from: string, to: string) =>
  new Promise<void>((resolve, reject) => {
    ChildProcess.execFile("cp", ["-R", from, to], (error) => (error ? reject(error) : resolve()))
  }).catch(() => Fs.cp(from, to, { recursive: true }))

const exists = (path: string) => Fs.access(path).then(() => true, () => false)

const databaseExists = async (adminUrl: string, name: string) =>
  (await adminQuery(adminUrl, "SELECT 1 FROM pg_database WHERE datname = $1", [name])).length === 1

/** One statement on its own connection to `url` (database administration, or what HTTP cannot show); its rows. */
export const adminQuery = async (url: string, query: string, params: ReadonlyArray<unknown> = []) => {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return (await client.query(query, params as Array<unknown>)).rows
  } finally {
    await client.end()
  }
}

/** Where a test server keeps its data; a restart reuses it to show that data survives. */
export interface Storage {
  readonly env: Record<string, string>
}

/**
 * A fresh, empty place for one server's data, removed when the scope closes: the server applies every migration to
 * it at start. Tests of migrations need this; others start faster on `makeMigratedStorage`. Embedded, its PGlite
 * directory is already initialised (`blankPgdata`): empty of the platform's tables, past PostgreSQL's initdb.
 */
export const makeStorage: Effect.Effect<Storage, never, Scope.Scope> = Effect.suspend(() => storageOf(false))

/**
 * Like `makeStorage`, but its database starts as a copy of the run's migrated template (above): the server
 * finds every migration applied, which saves initialising and migrating a database of its own.
 */
export const makeMigratedStorage: Effect.Effect<Storage, never, Scope.Scope> = Effect.suspend(() => storageOf(true))

const storageOf = (fromTemplate: boolean): Effect.Effect<Storage, never, Scope.Scope> =>
  Effect.gen(function*() {
    const databaseUrl = process.env.DATABASE_URL
    const redisUrl = process.env.REDIS_URL
    const env: Record<string, string> = {}
    if (databaseUrl) {
      const name = yield* testDatabase(databaseUrl, "test", { fromTemplate })
      const url = new URL(databaseUrl)
      url.pathname = `/${name}`
      env.DATABASE_URL = url.toString()
    } else {
      const dir = yield* Effect.acquireRelease(
        Effect.promise(() => Fs.mkdtemp(Path.join(Os.tmpdir(), "atrium-test-"))),
        (dir) => Effect.promise(() => Fs.rm(dir, { recursive: true, force: true })).pipe(Effect.ignore)
      )
      yield* Effect.promise(() => (fromTemplate ? seedDataDir(dir) : seedBlankDataDir(dir)))
      env.DATA_DIR = dir
    }
    if (redisUrl) {
      env.REDIS_URL = redisUrl
      env.KEY_PREFIX = `atrium-test:${randomName()}:`
    }
    return { env }
  })
