import { Clock, Cron, Effect, Option } from "effect"
import { NotFound } from "../platform/Errors.js"
import { type ListParams, pageOf } from "../platform/http/Lists.js"
import { Runs } from "../runs/Runs.js"
import { Sessions } from "../sessions/Sessions.js"
import { Webhooks } from "../webhooks/Webhooks.js"
import { type CreateSchedule, cronOf, ScheduleId, type ScheduleView, type UpdateSchedule } from "./Domain.js"
import { type ScheduleRow, SchedulesRepo } from "./Repo.js"
import type { CallerIdentity } from "../identity/Domain.js"
import { ownedBy, runsAs } from "./Policy.js"

export const scheduleView = (row: ScheduleRow): ScheduleView => ({
  id: row.id,
  object: "schedule",
  agent: row.agent,
  cron: row.cron,
  timezone: row.timezone,
  input: row.input,
  end_user_id: row.endUserId === "" ? null : row.endUserId,
  session: row.sessionId,
  webhook: row.webhookId,
  missed: row.missed,
  description: row.description,
  status: row.status,
  next_run_at: row.status === "active" ? row.nextRunAt?.toISOString() ?? null : null,
  last_firing: row.lastFireAt === null || row.lastStatus === null ? null : {
    fire_at: row.lastFireAt.toISOString(),
    status: row.lastStatus,
    run_id: row.lastRunId,
    error: row.lastError
  },
  created_at: row.createdAt.toISOString(),
  updated_at: row.updatedAt.toISOString()
})

/** The first firing strictly after `after` (cron times are whole minutes, so one second past is past the last). */
export const nextFiring = (expression: string, timezone: string, after: Date): Date =>
  Cron.next(cronOf(expression, timezone), new Date(after.getTime() + 1000))

/**
 * Schedules of a partition (docs/schedules.md): made, read, changed, paused and removed here; fired by the
 * cluster's scheduler (`Scheduler.ts`). What a schedule names (its expert, session and webhook endpoint) is checked
 * as the caller may reach it when it is made; at each firing the expert and the wallet are checked again.
 */
export class Schedules extends Effect.Service<Schedules>()("atrium/schedules/Schedules", {
  effect: Effect.gen(function*() {
    const repo = yield* SchedulesRepo
    const runs = yield* Runs
    const sessions = yield* Sessions
    const webhooks = yield* Webhooks
    const now = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms))

    const owned = (caller: CallerIdentity, id: ScheduleId) =>
      Effect.flatMap(repo.find(ownedBy(caller), id), Option.match({
        onNone: () => Effect.fail(new NotFound({ message: `No schedule ${id}.` })),
        onSome: Effect.succeed
      }))

    const create = Effect.fn("Schedules.create")(function*(caller: CallerIdentity, body: CreateSchedule) {
      const partition = yield* runsAs(caller, body.end_user_id)
      const acting: CallerIdentity = { ...caller, endUserId: partition.endUserId === "" ? Option.none() : Option.some(partition.endUserId) }
      if (Option.isNone(yield* runs.runnable(body.agent, caller.userId))) {
        return yield* new NotFound({ message: `No agent ${body.agent}.` })
      }
      if (body.session !== undefined) yield* sessions.get(acting, body.session)
      if (body.webhook !== undefined) yield* webhooks.get(caller.userId, body.webhook)
      const timezone = body.timezone ?? "UTC"
      const at = yield* now
      const id = ScheduleId.random()
      yield* repo.insert({
        id,
        ...partition,
        agent: body.agent,
        cron: body.cron,
        timezone,
        input: body.input,
        sessionId: body.session ?? null,
        webhookId: body.webhook ?? null,
        missed: body.missed ?? "run_once",
        description: body.description ?? "",
        nextRunAt: nextFiring(body.cron, timezone, at),
        now: at
      })
      return scheduleView(yield* owned(acting, id))
    })

    const list = Effect.fn("Schedules.list")(function*(caller: CallerIdentity, params: ListParams) {
      return yield* pageOf((yield* repo.list(ownedBy(caller))).map(scheduleView), params, (s) => s.id)
    })

    const get = Effect.fn("Schedules.get")(function*(caller: CallerIdentity, id: ScheduleId) {
      return scheduleView(yield* owned(caller, id))
    })

    /** Writes a schedule's fields and status; an active schedule's next firing is computed again from now. */
    const write = (caller: CallerIdentity, row: ScheduleRow, change: UpdateSchedule, status: "active" | "paused") =>
      Effect.gen(function*() {
        const at = yield* now
        const cron = change.cron ?? row.cron
        const timezone = change.timezone ?? row.timezone
        const unchanged = cron === row.cron && timezone === row.timezone && status === row.status
        yield* repo.update({
          ...ownedBy(caller),
          id: row.id,
          cron,
          timezone,
          input: change.input ?? row.input,
          missed: change.missed ?? row.missed,
          description: change.description ?? row.description,
          status,
          // Kept when nothing of the timing changed, so an edit of the input does not move a due firing.
          nextRunAt: status === "paused" ? row.nextRunAt : unchanged ? row.nextRunAt : nextFiring(cron, timezone, at),
          now: at
        })
        return scheduleView(yield* owned(caller, row.id))
      })

    const update = Effect.fn("Schedules.update")(function*(caller: CallerIdentity, id: ScheduleId, change: UpdateSchedule) {
      const row = yield* owned(caller, id)
      return yield* write(caller, row, change, row.status)
    })

    const pause = Effect.fn("Schedules.pause")(function*(caller: CallerIdentity, id: ScheduleId) {
      const row = yield* owned(caller, id)
      return row.status === "paused" ? scheduleView(row) : yield* write(caller, row, {}, "paused")
    })

    const resume = Effect.fn("Schedules.resume")(function*(caller: CallerIdentity, id: ScheduleId) {
      const row = yield* owned(caller, id)
      return row.status === "active" ? scheduleView(row) : yield* write(caller, row, {}, "active")
    })

    const remove = Effect.fn("Schedules.remove")(function*(caller: CallerIdentity, id: ScheduleId) {
      if (!(yield* repo.remove(ownedBy(caller), id))) return yield* new NotFound({ message: `No schedule ${id}.` })
      return { id, object: "schedule" as const, deleted: true as const }
    })

    return { create, list, get, update, pause, resume, remove } as const
  }),
  dependencies: [SchedulesRepo.Default, Runs.Default, Sessions.Default, Webhooks.Default]
}) {}
