import { Effect } from "effect"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs/promises"
import * as Os from "node:os"
import * as Path from "node:path"
import { pollPromise } from "../support/Poll.js"
import { adminQuery, testDatabase } from "../support/Templates.js"
import { INTERNAL_TOKEN } from "../support/TestServer.js"

/**
 * What the cluster files (several `dist/main.js` runners over one PostgreSQL database) share: the database and
 * settings every runner of a file gets, and the wait until the runners hold their shards. Services mode only.
 */

export const databaseUrl = process.env.DATABASE_URL
export const CODE = "123456"

/**
 * A fresh database, data directory, Redis prefix and secret that every runner of a file shares, with `phones` able to
 * log in with `CODE`. `fromTemplate: false` starts the database empty, so the runners migrate it (together).
 */
export const makeShared = (
  kind: string,
  options: { readonly fromTemplate: boolean; readonly phones: ReadonlyArray<string>; readonly env?: Record<string, string> }
) =>
  Effect.gen(function*() {
    const name = yield* testDatabase(databaseUrl!, kind, { fromTemplate: options.fromTemplate })
    const url = new URL(databaseUrl!)
    url.pathname = `/${name}`
    const dataDir = yield* Effect.acquireRelease(
      Effect.promise(() => Fs.mkdtemp(Path.join(Os.tmpdir(), `atrium-${kind}-`))),
      (dir) => Effect.promise(() => Fs.rm(dir, { recursive: true, force: true })).pipe(Effect.ignore)
    )
    const env: Record<string, string> = {
      DATABASE_URL: url.toString(),
      DATA_DIR: dataDir,
      JWT_SECRET: Crypto.randomBytes(32).toString("hex"),
      SMS_TEST_OTP: options.phones.map((p) => `${p}=${CODE}`).join(","),
      INTERNAL_TOKEN,
      // Every login of these tests comes from one address: no proof-of-work challenge in the way.
      SMS_CHALLENGE_AFTER: "1000",
      ...options.env
    }
    if (process.env.REDIS_URL) {
      env.REDIS_URL = process.env.REDIS_URL
      env.KEY_PREFIX = `atrium-${kind}:${Crypto.randomBytes(5).toString("hex")}:`
    }
    return { env, databaseUrl: url.toString(), name }
  })

export type Shared = Effect.Effect.Success<ReturnType<typeof makeShared>>

/** @effect/cluster's default number of shards per group (one group: "default"). */
export const SHARDS = 300

/**
 * Waits until `runners` runners hold every shard of the shared database (each a PostgreSQL advisory lock): a runner
 * answers health before it has taken its shards, and until then the others still own them.
 */
export const settled = (shared: Shared, runners: number) =>
  // Polled: the runners' shard locks are seen only in pg_locks.
  Effect.promise(() =>
    pollPromise(
      async () =>
        (await adminQuery(
          databaseUrl!,
          `SELECT count(DISTINCT l.pid)::int AS runners, count(*)::int AS shards FROM pg_locks l
           JOIN pg_database d ON d.oid = l.database
           WHERE l.locktype = 'advisory' AND l.granted AND d.datname = $1`,
          [shared.name]
        ))[0],
      (row) => row!.runners === runners && row!.shards === SHARDS,
      `the cluster settled on ${runners} runners`,
      { every: 250, within: 120_000 }
    )
  )

/** The samples of one metric in a Prometheus text scrape, each with its labels. */
export const samplesOf = (text: string, metric: string) =>
  text.split("\n").flatMap((line) => {
    const match = /^([a-zA-Z_:][\w:]*)(?:\{([^}]*)\})? (\S+)/.exec(line)
    if (match === null || match[1] !== metric) return []
    const labels: Record<string, string> = {}
    for (const [, key, value] of (match[2] ?? "").matchAll(/(\w+)="([^"]*)"/g)) labels[key!] = value!
    return [{ labels, value: Number(match[3]) }]
  })

/** The sum of a metric's samples whose labels include `labels`. */
export const total = (text: string, metric: string, labels: Record<string, string>) =>
  samplesOf(text, metric)
    .filter((s) => Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0)
