import * as Singleton from "@effect/cluster/Singleton"
import { Clock, Context, Duration, Effect, Layer, Schedule } from "effect"
import { SchedulesConfig } from "./Config.js"
import { type DueRow, type FiringRow, SchedulesRepo } from "./Repo.js"
import { nextFiring } from "./Schedules.js"

/** How a firing's start went: its run (or the session's turn) is under way, or it cannot run, with why. */
export type FiringOutcome =
  | { readonly _tag: "Started"; readonly runId: string | null }
  | { readonly _tag: "Failed"; readonly reason: string }

/**
 * Starts one firing (`Fire.ts`: a background run, or a turn of the schedule's session). Starting the same firing
 * twice starts it once: its identity is its schedule and time.
 */
export class ScheduleFirer extends Context.Tag("atrium/schedules/ScheduleFirer")<ScheduleFirer, {
  readonly fire: (firing: FiringRow) => Effect.Effect<FiringOutcome>
}>() {}

/**
 * What a due schedule's firing is, and its next time. On time (or late by less than `missedAfter`) it fires; later
 * than that it was missed, and its policy runs it once or skips it. The next time is the first after now, so any
 * other firings missed meanwhile are not made at all: a schedule catches up once, never in a burst.
 */
export const decide = (row: DueRow, now: Date, missedAfter: Duration.Duration) => {
  const missed = now.getTime() - row.nextRunAt.getTime() > Duration.toMillis(missedAfter)
  return {
    firing: missed && row.missed === "skip" ? "skipped" as const : "pending" as const,
    next: nextFiring(row.cron, row.timezone, new Date(Math.max(now.getTime(), row.nextRunAt.getTime())))
  }
}

/**
 * The scheduler (docs/schedules.md): one pass makes the firings of every due schedule (a row per schedule and time,
 * in the transaction that moves the schedule on) and then starts every pending firing. A firing made but not yet
 * started when its scheduler died is started by the next pass, wherever it runs; starting is idempotent.
 */
export const makeScheduler = Effect.gen(function*() {
  const repo = yield* SchedulesRepo
  const firer = yield* ScheduleFirer
  const { missedAfter } = yield* SchedulesConfig

  const pass = Effect.fn("Scheduler.pass")(function*() {
    const now = new Date(yield* Clock.currentTimeMillis)
    const made = yield* repo.claimDue(now, 100, (row) => decide(row, now, missedAfter))
    const pending = yield* repo.pending(100)
    for (const firing of pending) {
      const outcome = yield* firer.fire(firing)
      yield* repo.settle({
        scheduleId: firing.scheduleId,
        fireAt: firing.fireAt,
        status: outcome._tag === "Started" ? "started" : "failed",
        runId: outcome._tag === "Started" ? outcome.runId : null,
        error: outcome._tag === "Failed" ? outcome.reason : null,
        now: new Date(yield* Clock.currentTimeMillis)
      })
    }
    return { made, started: pending.length }
  })
  return { pass } as const
})

/**
 * The scheduler as a cluster singleton: one in the whole cluster, on whichever runner holds its shard, moved with
 * it when that runner goes (never one per process). Its passes run every `SCHEDULE_POLL`; a pass that fails (the
 * database away) is logged, and the next one goes on.
 */
export const SchedulerLive = Singleton.make(
  "atrium/schedules/Scheduler",
  Effect.gen(function*() {
    const { poll } = yield* SchedulesConfig
    const scheduler = yield* makeScheduler
    yield* scheduler.pass().pipe(
      Effect.catchAllCause((cause) => Effect.logWarning("schedules: a scheduler pass failed", cause)),
      Effect.repeat(Schedule.spaced(poll))
    )
  })
).pipe(Layer.provide([SchedulesRepo.Default, SchedulesConfig.Default]))
