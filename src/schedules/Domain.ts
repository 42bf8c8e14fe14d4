import { Cron, DateTime, Either, Option, Schema } from "effect"
import { prefixedId, SessionId, WebhookId } from "../platform/Ids.js"

/** A schedule's id (`sched_…`). */
export const ScheduleId = prefixedId("sched", "ScheduleId")
export type ScheduleId = typeof ScheduleId.Type

/**
 * A 5-field cron expression (minute hour day-of-month month day-of-week), as Effect's `Cron` parses it; the
 * seconds field it also knows is refused, so a schedule fires at most once a minute.
 */
export const CronExpression = Schema.String.pipe(
  Schema.filter((text) => {
    if (text.length > 200) return "must be at most 200 characters"
    if (text.trim().split(/\s+/).length !== 5) return "must have 5 fields: minute hour day-of-month month day-of-week"
    return Either.isRight(Cron.parse(text)) || `is not a cron expression: ${text.slice(0, 100)}`
  })
)

/** An IANA time zone name (`Europe/Paris`, `UTC`). */
export const TimeZoneName = Schema.String.pipe(
  Schema.filter((zone) => zone.length <= 100 && Option.isSome(DateTime.zoneMakeNamed(zone)) || "is not an IANA time zone")
)

export const Missed = Schema.Literal("run_once", "skip").annotations({
  description:
    "A firing found later than SCHEDULE_MISSED_AFTER (the cluster was down): `run_once` (default) runs it once on " +
    "recovery, however many were missed; `skip` skips them."
})

const Input = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(32_000))
const Description = Schema.String.pipe(Schema.maxLength(500))

export const CreateSchedule = Schema.Struct({
  agent: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)),
  cron: CronExpression,
  timezone: Schema.optional(TimeZoneName).annotations({ description: "An IANA zone; UTC when not given." }),
  input: Input.annotations({ description: "The message each firing sends to the expert." }),
  end_user_id: Schema.optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200))).annotations({
    description: "The end user the runs are for; with an API key, the X-End-User-Id header decides it."
  }),
  session: Schema.optional(SessionId.unchecked).annotations({
    description: "A session of yours: each firing is a turn of it instead of a fresh run."
  }),
  webhook: Schema.optional(WebhookId.unchecked).annotations({
    description: "An endpoint of yours (whk_…) that gets this schedule's `schedule.failed` events, whatever it subscribes to."
  }),
  missed: Schema.optional(Missed),
  description: Schema.optional(Description)
})
export type CreateSchedule = typeof CreateSchedule.Type

export const UpdateSchedule = Schema.Struct({
  cron: Schema.optional(CronExpression),
  timezone: Schema.optional(TimeZoneName),
  input: Schema.optional(Input),
  missed: Schema.optional(Missed),
  description: Schema.optional(Description)
})
export type UpdateSchedule = typeof UpdateSchedule.Type

export const ScheduleView = Schema.Struct({
  id: ScheduleId,
  object: Schema.Literal("schedule"),
  agent: Schema.String,
  cron: Schema.String,
  timezone: Schema.String,
  input: Schema.String,
  end_user_id: Schema.NullOr(Schema.String),
  session: Schema.NullOr(SessionId),
  webhook: Schema.NullOr(Schema.String),
  missed: Missed,
  description: Schema.String,
  status: Schema.Literal("active", "paused"),
  next_run_at: Schema.NullOr(Schema.String),
  last_firing: Schema.NullOr(Schema.Struct({
    fire_at: Schema.String,
    status: Schema.Literal("pending", "started", "skipped", "failed"),
    run_id: Schema.NullOr(Schema.String),
    error: Schema.NullOr(Schema.String)
  })),
  created_at: Schema.String,
  updated_at: Schema.String
})
export type ScheduleView = typeof ScheduleView.Type

/** The cron of a schedule in its zone (both were checked when the schedule was written). */
export const cronOf = (expression: string, timezone: string): Cron.Cron => Cron.unsafeParse(expression, timezone)
