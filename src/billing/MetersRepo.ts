import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import { Effect, Schema } from "effect"
import { AppId } from "../platform/Ids.js"
import { MeterId } from "./Domain.js"
import type { Micros } from "../platform/Money.js"

const MeterRowSchema = Schema.Struct({
  id: MeterId,
  appId: AppId,
  eventName: Schema.String,
  /** Micro-credits per event. */
  creditsPerUse: Schema.BigInt,
  disabled: Schema.Boolean,
  createdAt: Schema.DateFromSelf
})
export type MeterRow = typeof MeterRowSchema.Type

const METER_COLUMNS = "id, app_id, event_name, credits_per_use::text, disabled, created_at"

const MeterKey = Schema.Struct({ appId: AppId, eventName: Schema.String })
const MeterPatch = Schema.Struct({
  appId: AppId,
  meterId: MeterId,
  creditsPerUse: Schema.NullOr(Schema.BigInt),
  disabled: Schema.NullOr(Schema.Boolean)
})

/** The meters of OAuth apps (spec 2.6): what an event of an app costs. The apps are identity's (`identity/oauth`). */
export class MetersRepo extends Effect.Service<MetersRepo>()("atrium/billing/MetersRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const insertMeter = SqlSchema.findOne({
      Request: MeterRowSchema.pipe(Schema.omit("createdAt", "disabled")),
      Result: MeterRowSchema,
      execute: (meter) =>
        sql`
          INSERT INTO meters (id, app_id, event_name, credits_per_use)
          VALUES (${meter.id}, ${meter.appId}, ${meter.eventName}, ${meter.creditsPerUse})
          ON CONFLICT (app_id, event_name) DO NOTHING
          RETURNING ${sql.literal(METER_COLUMNS)}`
    })
    const metersOf = SqlSchema.findAll({
      Request: AppId,
      Result: MeterRowSchema,
      execute: (appId) => sql`SELECT ${sql.literal(METER_COLUMNS)} FROM meters WHERE app_id = ${appId} ORDER BY created_at, id`
    })
    const meterOf = SqlSchema.findOne({
      Request: MeterKey,
      Result: MeterRowSchema,
      execute: ({ appId, eventName }) =>
        sql`SELECT ${sql.literal(METER_COLUMNS)} FROM meters WHERE app_id = ${appId} AND event_name = ${eventName}`
    })
    const patchMeter = SqlSchema.findOne({
      Request: MeterPatch,
      Result: MeterRowSchema,
      execute: (patch) =>
        sql`
          UPDATE meters SET
            credits_per_use = COALESCE(${patch.creditsPerUse}::bigint, credits_per_use),
            disabled = COALESCE(${patch.disabled}::boolean, disabled),
            updated_at = now()
          WHERE id = ${patch.meterId} AND app_id = ${patch.appId} RETURNING ${sql.literal(METER_COLUMNS)}`
    })

    return {
      insertMeter: (meter: Omit<MeterRow, "createdAt" | "disabled">) => Effect.orDie(insertMeter(meter)),
      listMeters: (appId: AppId) => Effect.orDie(metersOf(appId)),
      findMeter: (appId: AppId, eventName: string) => Effect.orDie(meterOf({ appId, eventName })),
      updateMeter: (appId: AppId, meterId: MeterId, patch: {
        readonly creditsPerUse?: Micros | undefined
        readonly disabled?: boolean | undefined
      }) =>
        Effect.orDie(patchMeter({
          appId,
          meterId,
          creditsPerUse: patch.creditsPerUse ?? null,
          disabled: patch.disabled ?? null
        }))
    } as const
  })
}) {}
