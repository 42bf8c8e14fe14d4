import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"
import { Capabilities } from "./Capabilities.js"
import { ServiceUnavailable } from "./Errors.js"
import { KeyValue } from "./KeyValue.js"

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
