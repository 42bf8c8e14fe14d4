import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { PlatformAuthentication } from "../identity/Domain.js"
import { InvalidRequest, NotFound } from "../platform/Errors.js"
import { ListParams } from "../platform/http/Lists.js"
import { CreateSchedule, ScheduleId, ScheduleView, UpdateSchedule } from "./Domain.js"

const IdPath = Schema.Struct({ id: ScheduleId.unchecked })

/**
 * Schedules of the caller's partition (docs/schedules.md): an expert run at each firing of a cron expression in a
 * time zone, as a background run (or a turn of a session). Another partition's schedule is a 404.
 */
export class SchedulesApi extends HttpApiGroup.make("schedules")
  .add(
    HttpApiEndpoint.post("create", "/v1/schedules")
      .setPayload(CreateSchedule)
      .addSuccess(ScheduleView, { status: 201 })
      .addError(NotFound)
      .annotate(
        OpenApi.Description,
        "Run an expert on a cron schedule (5 fields, in `timezone`; a daylight-saving change fires once). Each firing " +
          "starts a background run (GET /v1/runs) or, with `session`, a turn of that session."
      )
  )
  .add(
    HttpApiEndpoint.get("list", "/v1/schedules")
      .setUrlParams(ListParams)
      .addSuccess(Schema.Struct({ data: Schema.Array(ScheduleView), has_more: Schema.Boolean }))
      .addError(NotFound)
  )
  .add(HttpApiEndpoint.get("get", "/v1/schedules/:id").setPath(IdPath).addSuccess(ScheduleView).addError(NotFound))
  .add(
    HttpApiEndpoint.patch("update", "/v1/schedules/:id")
      .setPath(IdPath)
      .setPayload(UpdateSchedule)
      .addSuccess(ScheduleView)
      .addError(NotFound)
      .annotate(OpenApi.Description, "Change the cron, zone, input, missed-firing policy or description; the next firing is computed again.")
  )
  .add(
    HttpApiEndpoint.del("delete", "/v1/schedules/:id")
      .setPath(IdPath)
      .addSuccess(Schema.Struct({ id: Schema.String, object: Schema.Literal("schedule"), deleted: Schema.Literal(true) }))
      .addError(NotFound)
      .annotate(OpenApi.Description, "Remove a schedule; runs it started go on.")
  )
  .add(
    HttpApiEndpoint.post("pause", "/v1/schedules/:id/pause")
      .setPath(IdPath)
      .addSuccess(ScheduleView)
      .addError(NotFound)
      .annotate(OpenApi.Description, "Stop firing until resumed (idempotent).")
  )
  .add(
    HttpApiEndpoint.post("resume", "/v1/schedules/:id/resume")
      .setPath(IdPath)
      .addSuccess(ScheduleView)
      .addError(NotFound)
      .annotate(OpenApi.Description, "Fire again from the next time after now; firings due while paused are not run (idempotent).")
  )
  .middleware(PlatformAuthentication)
  .addError(InvalidRequest)
  .annotate(OpenApi.Title, "Schedules")
  .annotate(OpenApi.Description, "Experts run on a cron schedule, as background runs, whether anyone watches or not.")
{}
