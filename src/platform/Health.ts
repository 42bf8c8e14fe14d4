import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Schema } from "effect"
import { Capabilities, CapabilityStatus } from "./Capabilities.js"
import { ServiceUnavailable } from "./Errors.js"
import { KeyValue } from "./KeyValue.js"

export class HealthApi extends HttpApiGroup.make("health")
  .add(
    HttpApiEndpoint.get("health", "/api/health")
      .addSuccess(Schema.Struct({
        status: Schema.Literal("ok"),
        database: Schema.Literal("ok"),
        store: Schema.Literal("ok"),
        capabilities: Schema.Record({ key: Schema.String, value: CapabilityStatus }).annotations({
          description: "What this process can offer beyond answering (run_code: its sandbox), and why not when not."
        })
      }))
      .addError(ServiceUnavailable)
      .annotate(OpenApi.Description, "200 when the database and the key-value store answer; 503 naming what does not.")
  )
  .annotate(OpenApi.Title, "Health")
  .annotate(OpenApi.Description, "Whether this process, its database and its key-value store answer.")
{}

/** Both checks run at once and each has its own deadline, so a hung dependency gives a 503, not a hung probe. */
export const makeHealthCheck = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const kv = yield* KeyValue
  const capabilities = yield* Capabilities
  const probe = (name: string, check: Effect.Effect<unknown, unknown>) =>
    check.pipe(
      Effect.timeoutFail({ duration: "3 seconds", onTimeout: () => "timeout" }),
      Effect.as(undefined),
      Effect.catchAllCause(() => Effect.succeed(name))
    )
  return Effect.gen(function*() {
  const down = yield* Effect.all([probe("database", sql`SELECT 1`), probe("store", kv.ping)], {
    concurrency: "unbounded"
  })
  const failing = down.filter((name) => name !== undefined)
  if (failing.length > 0) {
    return yield* new ServiceUnavailable({ message: `Unavailable: ${failing.join(", ")}.` })
  }
  return { status: "ok", database: "ok", store: "ok", capabilities: yield* capabilities.all } as const
  })
})
