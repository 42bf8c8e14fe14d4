/**
 * Issue 44: a fork of a 1,000-turn session (target ≤ 50 ms on the 2-core machine). A fork shares its origin's history
 * through a pointer (`sessions.fork_of`, `fork_turn`: migration 0021), so it costs what `Sessions.fork` does in the
 * database: one indexed lookup of the turn (`SessionsRepo.hasTurn`), one `INSERT … SELECT` of the new session's
 * row, and reading it back; whatever the origin's length, nothing is copied. Also timed: the fork's first read of
 * its history (the path root → turn through the pointer), which its first turn and `GET /v1/sessions/:id` do.
 *
 *   npx tsx bench/fork.ts [--turns 1000] [--rounds 21]                     (embedded PostgreSQL, PGlite)
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test npx tsx bench/fork.ts   (a database of its own on that server)
 *
 * A script, not a test: it prints medians and p90s and asserts nothing but that each fork exists.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Layer, Logger, LogLevel, Option } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { DatabaseLive } from "../src/platform/Database.js"
import { SessionId, UserId } from "../src/platform/Ids.js"
import { SessionsRepo } from "../src/sessions/Repo.js"
import { createBenchDatabase, percentile } from "./support.js"

const args = new Map<string, string>()
for (let i = 2; i < process.argv.length; i += 2) args.set(process.argv[i]!.replace(/^--/, ""), process.argv[i + 1]!)
const TURNS = Number(args.get("turns") ?? 1000)
const ROUNDS = Number(args.get("rounds") ?? 21)

const summary = (label: string, times: Array<number>) => {
  const sorted = [...times].sort((a, b) => a - b)
  console.log(`| ${label} | ${percentile(sorted, 50).toFixed(2)} | ${percentile(sorted, 90).toFixed(2)} |`)
}

const main = async () => {
  const adminUrl = process.env.DATABASE_URL
  const db = adminUrl === undefined ? undefined : await createBenchDatabase(adminUrl, "atrium_benchf")
  const dataDir = adminUrl === undefined ? Fs.mkdtempSync(Path.join(Os.tmpdir(), "atrium-bench-fork-")) : undefined
  if (db !== undefined) process.env.DATABASE_URL = db.url
  if (dataDir !== undefined) process.env.DATA_DIR = dataDir
  try {
    const program = Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const repo = yield* SessionsRepo
      yield* sql`INSERT INTO users (id, phone) VALUES ('usr_benchf', '+15550000001')`
      yield* sql`INSERT INTO agents (id, identifier, owner_id, draft) VALUES ('agt_benchf', 'benchf', 'usr_benchf', '{}'::jsonb)`
      yield* sql`INSERT INTO sessions (id, agent_id, account_id, end_user_id, leaf_turn) VALUES ('ses_benchf', 'agt_benchf', 'usr_benchf', '', ${TURNS})`
      // A line of TURNS turns, each a question and an answer of a few hundred characters.
      yield* sql`
        INSERT INTO session_turns (session_id, turn, parent_turn, run_id, messages, chars, status)
        SELECT 'ses_benchf', n, NULLIF(n - 1, 0), 'run_benchf_' || n,
               jsonb_build_array(jsonb_build_object('role', 'user', 'content', jsonb_build_array(jsonb_build_object('type', 'text', 'text', repeat('question ', 20) || n))),
                                 jsonb_build_object('role', 'assistant', 'content', jsonb_build_array(jsonb_build_object('type', 'text', 'text', repeat('answer ', 40) || n)))),
               500, 'completed'
        FROM generate_series(1, ${TURNS}) AS n`
      const forkTimes: Array<number> = []
      const readTimes: Array<number> = []
      for (let round = 0; round < ROUNDS; round++) {
        const at = TURNS - (round % 10)
        const id = SessionId.make(`ses_benchf_fork_${round}`)
        const t0 = performance.now()
        // What Sessions.fork does after the owner check: the turn is on the tree, the row, the answer.
        if (!(yield* repo.hasTurn(SessionId.make("ses_benchf"), at))) return yield* Effect.dieMessage(`no turn ${at}`)
        yield* repo.fork({ id, from: SessionId.make("ses_benchf"), turn: at, accountId: UserId.make("usr_benchf"), endUserId: "" })
        const forked = yield* repo.byId(id)
        forkTimes.push(performance.now() - t0)
        if (Option.isNone(forked)) return yield* Effect.dieMessage("the fork is missing")
        const t1 = performance.now()
        const path = yield* repo.path(id, at)
        readTimes.push(performance.now() - t1)
        if (path.length !== at) return yield* Effect.dieMessage(`the fork reads ${path.length} turns, not ${at}`)
      }
      console.log(`fork of a ${TURNS}-turn session, ${ROUNDS} rounds, ${adminUrl === undefined ? "embedded (PGlite)" : "PostgreSQL"}, ${Os.cpus().length} cores, load ${Os.loadavg()[0]!.toFixed(1)}`)
      console.log("| step | median ms | p90 ms |")
      console.log("| --- | --- | --- |")
      summary("fork (turn lookup, insert, read back)", forkTimes)
      summary(`the fork's first history read (${TURNS} turns through the pointer)`, readTimes)
    })
    await Effect.runPromise(program.pipe(
      Effect.provide(SessionsRepo.Default.pipe(Layer.provideMerge(DatabaseLive))),
      Effect.scoped,
      Logger.withMinimumLogLevel(LogLevel.Warning)
    ) as Effect.Effect<void>)
  } finally {
    await db?.drop()
    if (dataDir !== undefined) Fs.rmSync(dataDir, { recursive: true, force: true })
  }
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
