/**
 * The Wallet entity on its own, without HTTP: `Wallets.charge` from 64 concurrent fibers on one hot wallet and on
 * many, in this process, against a fresh PostgreSQL database (services mode). It tells how much of a charge's cost
 * is the wallet (cluster messaging, the entity, its SQL) and how much is the HTTP route around it.
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test npx tsx bench/billing-wallet.ts [--seconds 5] [--concurrency 64] [--users 64]
 *
 * A script, not a test.
 */
import { UserId } from "../src/platform/Ids.js"
import { Effect, Layer, Logger, LogLevel } from "effect"
import * as Os from "node:os"
import pg from "pg"
import { ClusterLive } from "../src/platform/Cluster.js"
import { AppConfig } from "../src/platform/Config.js"
import { DatabaseLive } from "../src/platform/Database.js"
import { createBenchDatabase, percentile } from "./support.js"
import { Wallets } from "../src/billing/Wallets.js"
import { WalletLive } from "../src/billing/WalletEntity.js"

const args = new Map<string, string>()
for (let i = 2; i < process.argv.length; i += 2) args.set(process.argv[i]!.replace(/^--/, ""), process.argv[i + 1]!)
const SECONDS = Number(args.get("seconds") ?? 5)
const CONCURRENCY = Number(args.get("concurrency") ?? 64)
const USERS = Number(args.get("users") ?? 64)
const ADMIN_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test"

const main = async () => {
  const db = await createBenchDatabase(ADMIN_URL, "atrium_benchw")
  process.env.DATABASE_URL = db.url
  process.env.SIGNUP_CREDITS = "1000000"
  try {
    const Live = Wallets.Default.pipe(
      Layer.provideMerge(WalletLive),
      Layer.provideMerge(ClusterLive),
      Layer.provideMerge(Layer.mergeAll(AppConfig.Default, DatabaseLive))
    )
    const program = Effect.gen(function*() {
      const wallets = yield* Wallets
      const users = Array.from({ length: USERS }, (_, i) => UserId.unchecked.make(`benchw_user_${i}`))
      const client = new pg.Client({ connectionString: db.url })
      yield* Effect.promise(() => client.connect())
      yield* Effect.promise(() =>
        client.query(`INSERT INTO users (id, phone) SELECT u, '+1555' || lpad(i::text, 7, '0') FROM unnest($1::text[]) WITH ORDINALITY AS t(u, i)`, [users])
      )
      yield* Effect.promise(() => client.end())
      const run = (name: string, userOf: (worker: number) => UserId) =>
        Effect.gen(function*() {
          const latencies: Array<number> = []
          const deadline = performance.now() + SECONDS * 1000
          const cpu0 = process.cpuUsage()
          const t0 = performance.now()
          yield* Effect.forEach(Array.from({ length: CONCURRENCY }, (_, w) => w), (w) =>
            Effect.gen(function*() {
              for (let i = 0; performance.now() < deadline; i++) {
                const s = performance.now()
                yield* wallets.charge(userOf(w), 10_000n, {
                  kind: "event",
                  scope: "bench",
                  key: `${name}-${w}-${i}-${t0}`,
                  appId: null,
                  event: "bench.call"
                })
                latencies.push(performance.now() - s)
              }
            }), { concurrency: "unbounded", discard: true })
          const seconds = (performance.now() - t0) / 1000
          const cpu = process.cpuUsage(cpu0)
          latencies.sort((a, b) => a - b)
          console.log(
            `| ${name} | ${(latencies.length / seconds).toFixed(0)} | ${percentile(latencies, 50).toFixed(1)} | ` +
              `${percentile(latencies, 99).toFixed(1)} | ${((cpu.user + cpu.system) / 1000 / latencies.length).toFixed(3)} | ` +
              `${Os.loadavg()[0]!.toFixed(2)} |`
          )
        })
      console.log("| run | charges/s | p50 ms | p99 ms | CPU ms per charge (this process) | load avg |")
      console.log("| --- | ---: | ---: | ---: | ---: | ---: |")
      yield* run("warm-up", (w) => users[w % USERS]!)
      yield* run("Wallets.charge, one hot wallet", () => users[0]!)
      yield* run(`Wallets.charge, ${USERS} wallets`, (w) => users[w % USERS]!)
    })
    await Effect.runPromise(program.pipe(
      Effect.provide(Live),
      Logger.withMinimumLogLevel(LogLevel.Warning)
    ) as Effect.Effect<void>)
  } finally {
    await db.drop()
  }
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
