/**
 * Durable runs under a fault (issue 43 item 6, docs/runs.md "The durable bench"): three runners from `dist/` over a
 * PostgreSQL database and a Redis database number of their own, background runs of every kind (multi-step with a
 * tool, slow single steps, tool calls waiting on approvals answered later, some denied, some cancelled), schedules
 * firing every minute, and a webhook receiver that fails a fifth of the deliveries; midway the busiest runner is
 * killed with SIGKILL (and started again). Then it checks, and exits non-zero on any failure:
 *
 * - every run is terminal within DURABLE_SETTLE_SECONDS of the fault clearing (none `queued` or `in_progress`);
 * - no step billed twice: one ledger entry per key, each run's `credits_charged` equal to its entries' sum, and at
 *   most one entry per model step (`<run>:<n>`, n ≤ the run's steps);
 * - every approved call ran, every denied one was told denied; every cancel honoured (`cancelled`);
 * - every terminal event delivered at least once, with one `webhook-id` per event (the receiver verifies each
 *   signature with `standardwebhooks`);
 * - every schedule firing ran exactly once (one firing row per time, one run per firing, each terminal).
 *
 *   npm run build
 *   DURABLE_RUNS=40 npx tsx bench/durable.ts            # the short form (CI-sized: about a minute)
 *   DURABLE_RUNS=2000 DURABLE_SCHEDULES=50 DURABLE_MINUTES=3 npx tsx bench/durable.ts   # the full form
 *
 * Settings (environment): DATABASE_URL (the server the bench makes its database on; default
 * postgres://postgres@127.0.0.1:5432/test), REDIS_URL (default redis://127.0.0.1:6379; the bench picks a database
 * number of its own, DURABLE_REDIS_DB to choose it), DURABLE_RUNS (40), DURABLE_SCHEDULES (3), DURABLE_MINUTES
 * (how long the full form keeps submitting and schedules firing; 0: submit everything at once), DURABLE_SETTLE_SECONDS
 * (60), DURABLE_KEEP_LOGS (a directory for the runners' output), DURABLE_KEEP_DB=1 (keep the database, to read the
 * runs' rows afterwards), DURABLE_LOG_LEVEL (the runners' LOG_LEVEL, `warn`).
 *
 * The harness (bench/durable-harness.ts) is the one the CI's short form runs too (test/cluster/durable.test.ts).
 */
import * as Crypto from "node:crypto"
import { buildIsStale } from "../test/support/Local.js"
import { runDurable } from "./durable-harness.js"

if (buildIsStale()) throw new Error("dist/ is missing or older than src/: run `npm run build` first (the bench runs what users run)")

const RUNS = Number(process.env.DURABLE_RUNS ?? 40)
const SCHEDULES = Number(process.env.DURABLE_SCHEDULES ?? 3)
const report = await runDurable({
  runs: RUNS,
  schedules: SCHEDULES,
  minutes: Number(process.env.DURABLE_MINUTES ?? 0),
  settleSeconds: Number(process.env.DURABLE_SETTLE_SECONDS ?? 60),
  adminUrl: process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test",
  redisUrl: process.env.REDIS_URL ?? "redis://127.0.0.1:6379",
  redisDb: Number(process.env.DURABLE_REDIS_DB ?? 1 + Crypto.randomInt(15)),
  keepLogs: process.env.DURABLE_KEEP_LOGS,
  keepDatabase: process.env.DURABLE_KEEP_DB === "1",
  logLevel: process.env.DURABLE_LOG_LEVEL
})

const seconds = report.seconds.toFixed(1)
if (report.failures.length > 0) {
  console.log(`\nFAILED after ${seconds} s (runners' output in ${report.logDir}):\n- ${report.failures.join("\n- ")}`)
  process.exit(1)
}
console.log(`\nOK: ${RUNS} background runs, ${SCHEDULES} schedules, one runner killed with SIGKILL midway; ${seconds} s`)
process.exit(0)
