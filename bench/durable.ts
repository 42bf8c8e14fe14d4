/**
 * Durable runs under faults (issue 43 item 6, docs/runs.md "The durable bench"): three runners from `dist/` over a
 * PostgreSQL and a Redis of their own, background runs of every kind (multi-step with a tool, slow single steps, tool
 * calls waiting on approvals answered later, some denied, some cancelled), schedules firing every minute, and a
 * webhook receiver that fails a fifth of the deliveries. Meanwhile it injects, one after the other and spread over the
 * submissions, the faults of `--faults` (all four unless said):
 *
 *   kill      kill -9 of the busiest runner (most shard locks), started again
 *   stop      SIGSTOP of the busiest runner for `--pause` seconds (20), then SIGCONT
 *   postgres  a PostgreSQL restart (`pg_ctl restart -m fast`)
 *   redis     a Redis restart (killed, started empty)
 *
 * Then it checks, and exits non-zero on any failure:
 *
 * - every run is terminal within DURABLE_SETTLE_SECONDS of the last fault clearing (or of the last submission, when
 *   the submissions go on after it): none `queued` or `in_progress`;
 * - no step billed twice: one ledger entry per key, each run's `credits_charged` equal to its entries' sum, and at
 *   most one entry per model step (`<run>:<n>`, n ≤ the run's steps);
 * - every approved call ran, every denied one was told denied; every cancel honoured (`cancelled`);
 * - every terminal event delivered at least once, with one `webhook-id` per event (the receiver verifies each
 *   signature with `standardwebhooks`);
 * - every schedule firing ran exactly once (one firing row per time, one run per firing, each terminal).
 *
 *   npm run build
 *   DURABLE_RUNS=40 npx tsx bench/durable.ts                     # the short form, all faults (about three minutes)
 *   DURABLE_RUNS=40 npx tsx bench/durable.ts --faults kill       # kill -9 alone (on the machine's PostgreSQL and Redis)
 *   DURABLE_RUNS=2000 DURABLE_SCHEDULES=50 DURABLE_MINUTES=3 npx tsx bench/durable.ts   # the full form
 *
 * The `postgres` and `redis` faults run the cluster on a PostgreSQL and a Redis the bench starts for itself
 * (test/support/Services.ts: PostgreSQL's binaries and redis-server must be installed), never the shared ones; with
 * only `kill` and `stop`, it makes its database on DATABASE_URL's server and takes a database number of REDIS_URL.
 *
 * Settings (environment): DATABASE_URL (the server the bench makes its database on without its own services; default
 * postgres://postgres@127.0.0.1:5432/test), REDIS_URL (default redis://127.0.0.1:6379; the bench picks a database
 * number of its own, DURABLE_REDIS_DB to choose it), DURABLE_RUNS (40), DURABLE_SCHEDULES (3), DURABLE_MINUTES
 * (how long the full form keeps submitting and schedules firing; 0: submit everything at once), DURABLE_SETTLE_SECONDS
 * (60), DURABLE_KEEP_LOGS (a directory for the runners' output), DURABLE_KEEP_DB=1 (keep the database, to read the
 * runs' rows afterwards; with its own services, the bench's PostgreSQL is left running and its address printed),
 * DURABLE_LOG_LEVEL (the runners' LOG_LEVEL, `warn`).
 *
 * The harness (bench/durable-harness.ts) is the one the CI's short form runs too (test/cluster/durable.test.ts).
 */
import * as Crypto from "node:crypto"
import * as Os from "node:os"
import { buildIsStale } from "../test/support/Local.js"
import { DURABLE_FAULTS, type DurableFault, runDurable } from "./durable-harness.js"

if (buildIsStale()) throw new Error("dist/ is missing or older than src/: run `npm run build` first (the bench runs what users run)")

const args = new Map<string, string>()
for (let i = 2; i < process.argv.length; i += 2) args.set(process.argv[i]!.replace(/^--/, ""), process.argv[i + 1] ?? "")
for (const name of args.keys()) if (name !== "faults" && name !== "pause") throw new Error(`unknown option --${name} (--faults, --pause)`)
const FAULTS = (args.get("faults") ?? DURABLE_FAULTS.join(",")).split(",").filter((f) => f.length > 0)
for (const fault of FAULTS) {
  if (!(DURABLE_FAULTS as ReadonlyArray<string>).includes(fault)) throw new Error(`unknown fault ${fault}: --faults takes ${DURABLE_FAULTS.join(",")}`)
}
const RUNS = Number(process.env.DURABLE_RUNS ?? 40)
const SCHEDULES = Number(process.env.DURABLE_SCHEDULES ?? 3)
const report = await runDurable({
  runs: RUNS,
  schedules: SCHEDULES,
  faults: FAULTS as Array<DurableFault>,
  pauseSeconds: Number(args.get("pause") ?? 20),
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
console.log("\n| fault | at | cleared after | every shard held again after |\n| --- | --- | --- | --- |")
for (const f of report.faults) console.log(`| ${f.fault} | ${f.at.toFixed(1)} s | ${f.clearedAfter.toFixed(1)} s | ${f.settledAfter.toFixed(1)} s |`)
if (report.failures.length > 0) {
  console.log(`\nFAILED after ${seconds} s (runners' output in ${report.logDir}):\n- ${report.failures.join("\n- ")}`)
  process.exit(1)
}
const faults = report.faults.map((f) => f.fault).join(", ") || "no fault"
console.log(
  `\nOK: ${report.submitted} background runs, ${SCHEDULES} schedules (${report.firings} firings), ${report.answered} approvals answered, ` +
    `${report.cancelled} cancels, ${report.delivered} deliveries accepted; faults: ${faults}; every run terminal ` +
    `${report.terminalAfter.toFixed(1)} s after the faults and the submissions ended; ${seconds} s in all (load average ${Os.loadavg()[0]!.toFixed(1)})`
)
process.exit(0)
