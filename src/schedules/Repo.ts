import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import { Effect, Schema } from "effect"
import { SessionId, UserId, WebhookId } from "../platform/Ids.js"
import type { Partition } from "../identity/Partition.js"
import { ScheduleId } from "./Domain.js"

export const ScheduleRow = Schema.Struct({
  id: ScheduleId,
  accountId: UserId,
  endUserId: Schema.String,
  agent: Schema.String,
  cron: Schema.String,
  timezone: Schema.String,
  input: Schema.String,
  sessionId: Schema.NullOr(SessionId),
  webhookId: Schema.NullOr(WebhookId),
  missed: Schema.Literal("run_once", "skip"),
  description: Schema.String,
  status: Schema.Literal("active", "paused"),
  nextRunAt: Schema.NullOr(Schema.DateFromSelf),
  lastFireAt: Schema.NullOr(Schema.DateFromSelf),
  lastStatus: Schema.NullOr(Schema.Literal("pending", "started", "skipped", "failed")),
  lastRunId: Schema.NullOr(Schema.String),
  lastError: Schema.NullOr(Schema.String),
  createdAt: Schema.DateFromSelf,
  updatedAt: Schema.DateFromSelf
})
export type ScheduleRow = typeof ScheduleRow.Type

/** A firing to start, with what starting it needs. */
export const FiringRow = Schema.Struct({
  scheduleId: ScheduleId,
  fireAt: Schema.DateFromSelf,
  accountId: UserId,
  endUserId: Schema.String,
  agent: Schema.String,
  input: Schema.String,
  sessionId: Schema.NullOr(SessionId),
  webhookId: Schema.NullOr(WebhookId)
})
export type FiringRow = typeof FiringRow.Type

/** A schedule whose next firing is due, locked by the scheduler that claimed it. */
export const DueRow = Schema.Struct({
  id: ScheduleId,
  cron: Schema.String,
  timezone: Schema.String,
  missed: Schema.Literal("run_once", "skip"),
  nextRunAt: Schema.DateFromSelf
})
export type DueRow = typeof DueRow.Type

const SELECT = `
  SELECT s.id, s.account_id, s.end_user_id, s.agent, s.cron, s.timezone, s.input, s.session_id, s.webhook_id, s.missed,
         s.description, s.status, s.next_run_at, l.fire_at AS last_fire_at, l.status AS last_status,
         l.run_id AS last_run_id, l.error AS last_error, s.created_at, s.updated_at
  FROM schedules s
  LEFT JOIN LATERAL (
    SELECT fire_at, status, run_id, error FROM schedule_firings f WHERE f.schedule_id = s.id ORDER BY fire_at DESC LIMIT 1
  ) l ON true`

const Owned = Schema.Struct({ accountId: UserId, endUserId: Schema.String, id: ScheduleId })
const FiringStatus = Schema.Literal("pending", "started", "skipped", "failed")

/**
 * Schedules' SQL. Every time comes from the caller (the Effect `Clock`), never the database's `now()`, so firings
 * follow one clock, which tests drive with the `TestClock`. SQL errors are defects here.
 */
export class SchedulesRepo extends Effect.Service<SchedulesRepo>()("atrium/schedules/SchedulesRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const insert = SqlSchema.void({
      Request: Schema.Struct({
        id: ScheduleId,
        accountId: UserId,
        endUserId: Schema.String,
        agent: Schema.String,
        cron: Schema.String,
        timezone: Schema.String,
        input: Schema.String,
        sessionId: Schema.NullOr(SessionId),
        webhookId: Schema.NullOr(WebhookId),
        missed: Schema.String,
        description: Schema.String,
        nextRunAt: Schema.DateFromSelf,
        now: Schema.DateFromSelf
      }),
      execute: (r) =>
        sql`
          INSERT INTO schedules (id, account_id, end_user_id, agent, cron, timezone, input, session_id, webhook_id, missed,
                                 description, next_run_at, created_at, updated_at)
          VALUES (${r.id}, ${r.accountId}, ${r.endUserId}, ${r.agent}, ${r.cron}, ${r.timezone}, ${r.input}, ${r.sessionId},
                  ${r.webhookId}, ${r.missed}, ${r.description}, ${r.nextRunAt}, ${r.now}, ${r.now})`
    })

    const list = SqlSchema.findAll({
      Request: Schema.Struct({ accountId: UserId, endUserId: Schema.String }),
      Result: ScheduleRow,
      execute: (p) =>
        sql`${sql.literal(SELECT)} WHERE s.account_id = ${p.accountId} AND s.end_user_id = ${p.endUserId}
            ORDER BY s.created_at DESC, s.id DESC LIMIT 1000`
    })

    const find = SqlSchema.findOne({
      Request: Owned,
      Result: ScheduleRow,
      execute: (o) => sql`${sql.literal(SELECT)} WHERE s.id = ${o.id} AND s.account_id = ${o.accountId} AND s.end_user_id = ${o.endUserId}`
    })

    const update = SqlSchema.void({
      Request: Schema.Struct({
        ...Owned.fields,
        cron: Schema.String,
        timezone: Schema.String,
        input: Schema.String,
        missed: Schema.String,
        description: Schema.String,
        status: Schema.String,
        nextRunAt: Schema.NullOr(Schema.DateFromSelf),
        now: Schema.DateFromSelf
      }),
      execute: (u) =>
        sql`
          UPDATE schedules SET cron = ${u.cron}, timezone = ${u.timezone}, input = ${u.input}, missed = ${u.missed},
            description = ${u.description}, status = ${u.status}, next_run_at = ${u.nextRunAt}, updated_at = ${u.now}
          WHERE id = ${u.id} AND account_id = ${u.accountId} AND end_user_id = ${u.endUserId}`
    })

    const remove = SqlSchema.findAll({
      Request: Owned,
      Result: Schema.Struct({ id: ScheduleId }),
      execute: (o) =>
        sql`DELETE FROM schedules WHERE id = ${o.id} AND account_id = ${o.accountId} AND end_user_id = ${o.endUserId} RETURNING id`
    })

    const due = SqlSchema.findAll({
      Request: Schema.Struct({ now: Schema.DateFromSelf, limit: Schema.Number }),
      Result: DueRow,
      execute: ({ limit, now }) =>
        sql`
          SELECT id, cron, timezone, missed, next_run_at FROM schedules
          WHERE status = 'active' AND next_run_at <= ${now}
          ORDER BY next_run_at LIMIT ${limit}
          FOR UPDATE SKIP LOCKED`
    })

    const insertFiring = SqlSchema.void({
      Request: Schema.Struct({ scheduleId: ScheduleId, fireAt: Schema.DateFromSelf, status: FiringStatus, now: Schema.DateFromSelf }),
      execute: (f) =>
        sql`
          INSERT INTO schedule_firings (schedule_id, fire_at, status, created_at, updated_at)
          VALUES (${f.scheduleId}, ${f.fireAt}, ${f.status}, ${f.now}, ${f.now})
          ON CONFLICT (schedule_id, fire_at) DO NOTHING`
    })

    const advance = SqlSchema.void({
      Request: Schema.Struct({ id: ScheduleId, nextRunAt: Schema.DateFromSelf, now: Schema.DateFromSelf }),
      execute: (a) => sql`UPDATE schedules SET next_run_at = ${a.nextRunAt}, updated_at = ${a.now} WHERE id = ${a.id}`
    })

    const pending = SqlSchema.findAll({
      Request: Schema.Number,
      Result: FiringRow,
      execute: (limit) =>
        sql`
          SELECT f.schedule_id, f.fire_at, s.account_id, s.end_user_id, s.agent, s.input, s.session_id, s.webhook_id
          FROM schedule_firings f JOIN schedules s ON s.id = f.schedule_id
          WHERE f.status = 'pending'
          ORDER BY f.created_at, f.fire_at LIMIT ${limit}`
    })

    const settle = SqlSchema.void({
      Request: Schema.Struct({
        scheduleId: ScheduleId,
        fireAt: Schema.DateFromSelf,
        status: FiringStatus,
        runId: Schema.NullOr(Schema.String),
        error: Schema.NullOr(Schema.String),
        now: Schema.DateFromSelf
      }),
      execute: (s) =>
        sql`
          UPDATE schedule_firings SET status = ${s.status}, run_id = ${s.runId}, error = ${s.error}, updated_at = ${s.now}
          WHERE schedule_id = ${s.scheduleId} AND fire_at = ${s.fireAt} AND status = 'pending'`
    })

    const firings = SqlSchema.findAll({
      Request: ScheduleId,
      Result: Schema.Struct({ fireAt: Schema.DateFromSelf, status: FiringStatus, runId: Schema.NullOr(Schema.String) }),
      execute: (id) => sql`SELECT fire_at, status, run_id FROM schedule_firings WHERE schedule_id = ${id} ORDER BY fire_at`
    })

    const owned = (partition: Partition, id: ScheduleId) => ({ ...partition, id })
    return {
      insert: (row: Parameters<typeof insert>[0]) => Effect.orDie(insert(row)),
      list: (partition: Partition) => Effect.orDie(list(partition)),
      find: (partition: Partition, id: ScheduleId) => Effect.orDie(find(owned(partition, id))),
      update: (row: Parameters<typeof update>[0]) => Effect.orDie(update(row)),
      remove: (partition: Partition, id: ScheduleId) => Effect.map(remove(owned(partition, id)), (rows) => rows.length > 0).pipe(Effect.orDie),
      /**
       * Makes the firings of every due schedule and moves each to its next time, in one transaction: `decide` says,
       * for a due schedule, the firing to make (with its status) and the next time. A schedule locked by another
       * scheduler is left to it.
       */
      claimDue: (
        now: Date,
        limit: number,
        decide: (row: DueRow) => { readonly firing: "pending" | "skipped"; readonly next: Date }
      ) =>
        sql.withTransaction(Effect.gen(function*() {
          const rows = yield* due({ now, limit })
          for (const row of rows) {
            const { firing, next } = decide(row)
            yield* insertFiring({ scheduleId: row.id, fireAt: row.nextRunAt, status: firing, now })
            yield* advance({ id: row.id, nextRunAt: next, now })
          }
          return rows.length
        })).pipe(Effect.orDie),
      pending: (limit: number) => Effect.orDie(pending(limit)),
      settle: (row: Parameters<typeof settle>[0]) => Effect.orDie(settle(row)),
      /** A schedule's firings, oldest first (tests and the operator's audit). */
      firings: (id: ScheduleId) => Effect.orDie(firings(id))
    } as const
  })
}) {}
