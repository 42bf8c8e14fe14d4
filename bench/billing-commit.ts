/**
 * What one shared wallet commit costs PostgreSQL: `LedgerRepo.commitWallets` with 1..256 entries of one wallet and
 * with one entry for each of 64 wallets, against a fresh database (all migrations, so every trigger of the ledger
 * runs), next to a trivial transaction (the price of a commit's WAL flush alone).
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test npx tsx bench/billing-commit.ts
 *
 * A script, not a test: it prints medians and asserts nothing.
 */
import { UserId } from "../src/platform/Ids.js"
import { SqlClient } from "@effect/sql"
import { Effect, Layer, Logger, LogLevel } from "effect"
import * as Os from "node:os"
import { LedgerRepo, type NewEntry, type WalletCommit, type WalletState } from "../src/billing/Repo.js"
import { AppConfig } from "../src/platform/Config.js"
import { DatabaseLive } from "../src/platform/Database.js"
import { createBenchDatabase, percentile } from "./support.js"

const ADMIN_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test"
const ROUNDS = 21

const median = (values: Array<number>) => percentile(values.sort((a, b) => a - b), 50)

const main = async () => {
  const db = await createBenchDatabase(ADMIN_URL, "atrium_benchc")
  process.env.DATABASE_URL = db.url
  try {
    const program = Effect.gen(function*() {
      const repo = yield* LedgerRepo
      const sql = yield* SqlClient.SqlClient
      const users = Array.from({ length: 64 }, (_, i) => UserId.unchecked.make(`benchc_${i}`))
      yield* sql`INSERT INTO users ${sql.insert(users.map((id, i) => ({ id, phone: `+1555${String(i).padStart(7, "0")}` })))}`
      const states = new Map<string, WalletState>()
      for (const user of users) states.set(user, yield* repo.load(user, 1_000_000_000n))
      let serial = 0
      const batchOf = (user: UserId, n: number): WalletCommit => {
        const from = states.get(user)!
        let { balance, seq } = from
        const entries: Array<NewEntry> = []
        for (let i = 0; i < n; i++) {
          balance -= 10_000n
          seq += 1n
          entries.push({
            kind: "event", scope: "bench", key: `k-${serial++}`, appId: null, event: "bench.call", metadata: null,
            description: null, seq, amount: -10_000n, balanceAfter: balance, createdAt: new Date()
          })
        }
        return { userId: user, fence: null, fromSeq: from.seq, entries, next: { balance, seq } }
      }
      const time = (label: string, make: () => ReadonlyArray<WalletCommit>) =>
        Effect.gen(function*() {
          const times: Array<number> = []
          for (let round = 0; round < ROUNDS; round++) {
            const commits = make()
            const t0 = performance.now()
            const outcomes = yield* repo.commitWallets(commits)
            times.push(performance.now() - t0)
            if (outcomes.some((o) => o._tag !== "Committed")) return yield* Effect.dieMessage("not committed")
            for (const c of commits) states.set(c.userId, c.next)
          }
          console.log(`| ${label} | ${median(times).toFixed(2)} |`)
        })
      console.log(`load average ${Os.loadavg().map((l) => l.toFixed(2)).join(" ")}\n`)
      console.log("| one statement | median ms |")
      console.log("| --- | ---: |")
      for (const n of [1, 16, 64, 256]) yield* time(`1 wallet, ${n} ${n === 1 ? "entry" : "entries"}`, () => [batchOf(users[0]!, n)])
      yield* time("64 wallets, 1 entry each", () => users.map((u) => batchOf(u, 1)))
      yield* time("64 wallets, 4 entries each", () => users.map((u) => batchOf(u, 4)))
      const trivial: Array<number> = []
      for (let round = 0; round < ROUNDS; round++) {
        const t0 = performance.now()
        yield* sql`UPDATE wallets SET updated_at = now() WHERE user_id = ${users[1]!}`
        trivial.push(performance.now() - t0)
      }
      console.log(`| a one-row UPDATE (its commit's WAL flush) | ${median(trivial).toFixed(2)} |`)
    })
    await Effect.runPromise(program.pipe(
      Effect.provide(LedgerRepo.Default.pipe(Layer.provideMerge(Layer.mergeAll(AppConfig.Default, DatabaseLive)))),
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
