import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { runDurable } from "../../bench/durable-harness.js"
import { databaseUrl } from "./support.js"

/**
 * Issue 43 item 6, the short form in CI (docs/runs.md, "The durable bench"): the harness of `bench/durable.ts`, with
 * all its checks, on a small load. Two runners from `dist/`, ten background runs of every kind (tool runs, slow runs,
 * approvals answered after the fault, one denied, one cancelled), a schedule, a webhook receiver refusing a fifth of
 * the deliveries; the busiest runner is killed with SIGKILL midway and not started again (the survivor takes its
 * shards: the fault clears then). Every run terminal, no step billed twice, every end delivered under one
 * `webhook-id`, every firing once. Services mode only (PostgreSQL and Redis), as every cluster test.
 */

describe.skipIf(databaseUrl === undefined || process.env.REDIS_URL === undefined)("cluster: durable runs, the short form of bench/durable.ts", () => {
  it.live("ten background runs of every kind through a kill -9: the bench's checks all hold", () =>
    Effect.gen(function*() {
      const lines: Array<string> = []
      const report = yield* Effect.promise(() =>
        runDurable({
          runs: 10,
          schedules: 1,
          runners: 2,
          restartKilled: false,
          startTogether: true,
          settleSeconds: 40,
          adminUrl: databaseUrl!,
          redisUrl: process.env.REDIS_URL!,
          log: (line) => {
            lines.push(line)
            // DURABLE_LOG=1: the harness's progress as it goes (where the time goes on a slow machine).
            if (process.env.DURABLE_LOG !== undefined) console.log(line)
          }
        })
      )
      assert.deepStrictEqual(report.failures, [], lines.join("\n"))
      assert.strictEqual(report.submitted, 10, lines.join("\n"))
      // The approvals were answered after the kill, the cancel asked: the load did what the checks are about.
      assert.strictEqual(report.answered, 3, lines.join("\n"))
      assert.strictEqual(report.cancelled, 1, lines.join("\n"))
    }), { timeout: 240_000 })
})
