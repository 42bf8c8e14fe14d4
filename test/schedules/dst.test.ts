import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, TestClock, TestContext } from "effect"
import { UserId } from "../../src/platform/Ids.js"
import { SchedulesConfig } from "../../src/schedules/Config.js"
import { ScheduleId } from "../../src/schedules/Domain.js"
import { SchedulesRepo } from "../../src/schedules/Repo.js"
import { makeScheduler, ScheduleFirer } from "../../src/schedules/Scheduler.js"
import { nextFiring } from "../../src/schedules/Schedules.js"
import { insertUser, TestDatabase } from "../support/Database.js"

/**
 * Issue 43's Done-when: a schedule in `Europe/Paris` fires once across a daylight-saving change, on the TestClock.
 * The scheduler's own passes (`Scheduler.ts`) run against the real schema every 15 minutes of test time over three
 * days around each change (a firing up to 15 minutes late is on time here: `SCHEDULE_MISSED_AFTER` is 30 minutes); what starts a firing is recorded instead of starting runs (the firer is the port the
 * scheduler is given), so the count is the scheduler's alone.
 */

const MINUTE = 60_000

/** The scheduler over a database of the test's own, with a firer that records what it was asked to start. */
const setup = Effect.gen(function*() {
  const fired: Array<string> = []
  const firer = Layer.succeed(ScheduleFirer, {
    fire: (firing) => Effect.sync(() => (fired.push(firing.fireAt.toISOString()), { _tag: "Started" as const, runId: null }))
  })
  const scheduler = yield* makeScheduler.pipe(Effect.provide(firer))
  return { fired, scheduler }
})

const Env = Layer.mergeAll(SchedulesRepo.Default, SchedulesConfig.Default).pipe(
  Layer.provideMerge(TestDatabase({ SCHEDULE_MISSED_AFTER: "30 minutes" }))
)

const daily = (start: string, id: string) =>
  Effect.gen(function*() {
    const repo = yield* SchedulesRepo
    yield* insertUser(`usr_${id}`)
    const now = new Date(start)
    yield* repo.insert({
      id: ScheduleId.make(id),
      accountId: UserId.make(`usr_${id}`),
      endUserId: "",
      agent: "digest",
      cron: "30 2 * * *",
      timezone: "Europe/Paris",
      input: "the nightly digest",
      sessionId: null,
      webhookId: null,
      missed: "run_once",
      description: "",
      nextRunAt: nextFiring("30 2 * * *", "Europe/Paris", now),
      now
    })
  })

/** Passes every 15 minutes of test time, from `start` for `hours`. */
const passes = (scheduler: Effect.Effect.Success<typeof setup>["scheduler"], start: string, hours: number) =>
  Effect.gen(function*() {
    yield* TestClock.setTime(new Date(start).getTime())
    for (let t = 0; t < hours * 60; t += 15) {
      yield* scheduler.pass()
      yield* TestClock.adjust(15 * MINUTE)
    }
  })

describe("schedules across daylight-saving changes (TestClock)", () => {
  it.effect("02:30 in Paris fires once a day when the clocks go back: the repeated hour does not fire twice", () =>
    Effect.gen(function*() {
      const { fired, scheduler } = yield* setup
      yield* TestClock.setTime(new Date("2026-10-24T12:00:00Z").getTime())
      yield* daily("2026-10-24T12:00:00Z", "sched_autumn")
      yield* passes(scheduler, "2026-10-24T12:00:00Z", 72)
      // 02:30 CEST on the 25th (00:30Z) is the first of the two 02:30s; the second (01:30Z, CET) does not fire.
      assert.deepStrictEqual(fired, ["2026-10-25T00:30:00.000Z", "2026-10-26T01:30:00.000Z", "2026-10-27T01:30:00.000Z"])
      const firings = yield* Effect.flatMap(SchedulesRepo, (repo) => repo.firings(ScheduleId.make("sched_autumn")))
      assert.deepStrictEqual(firings.map((f) => [f.fireAt.toISOString(), f.status]), fired.map((at) => [at, "started"]))
    }).pipe(Effect.provide(Env), Effect.provide(TestContext.TestContext)), 120_000)

  it.effect("02:30 in Paris fires once on the night it does not exist (the clocks go forward), then at 02:30 again", () =>
    Effect.gen(function*() {
      const { fired, scheduler } = yield* setup
      yield* TestClock.setTime(new Date("2026-03-27T12:00:00Z").getTime())
      yield* daily("2026-03-27T12:00:00Z", "sched_spring")
      yield* passes(scheduler, "2026-03-27T12:00:00Z", 72)
      // 02:30 does not exist on the 29th: it fires once, at 03:30 CEST (01:30Z), and the next day at 02:30 CEST.
      assert.deepStrictEqual(fired, ["2026-03-28T01:30:00.000Z", "2026-03-29T01:30:00.000Z", "2026-03-30T00:30:00.000Z"])
    }).pipe(Effect.provide(Env), Effect.provide(TestContext.TestContext)), 120_000)

  it.effect("a firing missed while the cluster was down runs once on recovery, never once per missed time", () =>
    Effect.gen(function*() {
      const { fired, scheduler } = yield* setup
      yield* TestClock.setTime(new Date("2026-06-01T12:00:00Z").getTime())
      yield* daily("2026-06-01T12:00:00Z", "sched_down")
      // Down for three days: no pass ran. On recovery, one firing (its first missed time), then the next one.
      yield* passes(scheduler, "2026-06-05T09:00:00Z", 24)
      assert.deepStrictEqual(fired, ["2026-06-02T00:30:00.000Z", "2026-06-06T00:30:00.000Z"])
    }).pipe(Effect.provide(Env), Effect.provide(TestContext.TestContext)), 120_000)
})
