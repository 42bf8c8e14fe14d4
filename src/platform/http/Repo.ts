import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import { Duration, Effect, Option, Schema } from "effect"
import type { KeyValueStore } from "../KeyValue.js"

const Claim = Schema.Struct({ key: Schema.String, value: Schema.String, seconds: Schema.Number })

/**
 * Create idempotency (`Idempotency-Key`, Idempotency.ts) kept in PostgreSQL, not Redis: a key must hold for its
 * 24 hours whatever happens to the store of what may be lost (issue 33: a create retried after a Redis FLUSHALL made a
 * second session). The table is migration 0015's; an expired row counts as absent and is replaced by the next claim.
 * Only what `idempotent` uses is here; the other store operations die (nothing calls them).
 */
export class IdempotencyRepo extends Effect.Service<IdempotencyRepo>()("atrium/platform/IdempotencyRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const seconds = (ttl: Duration.DurationInput) => Math.max(1, Math.ceil(Duration.toMillis(ttl) / 1000))
    const unused = Effect.dieMessage("not an operation of the idempotency store")

    const get = SqlSchema.findOne({
      Request: Schema.String,
      Result: Schema.Struct({ value: Schema.String }),
      execute: (key) => sql`SELECT value FROM idempotency_keys WHERE key = ${key} AND expires_at > now()`
    })
    const set = SqlSchema.void({
      Request: Claim,
      execute: ({ key, seconds, value }) =>
        sql`
          INSERT INTO idempotency_keys (key, value, expires_at) VALUES (${key}, ${value}, now() + make_interval(secs => ${seconds}))
          ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, expires_at = EXCLUDED.expires_at`
    })
    const claim = SqlSchema.findOne({
      Request: Claim,
      Result: Schema.Struct({ key: Schema.String }),
      execute: ({ key, seconds, value }) =>
        sql`
          INSERT INTO idempotency_keys (key, value, expires_at) VALUES (${key}, ${value}, now() + make_interval(secs => ${seconds}))
          ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, expires_at = EXCLUDED.expires_at
            WHERE idempotency_keys.expires_at <= now()
          RETURNING key`
    })
    const remove = SqlSchema.void({
      Request: Schema.Array(Schema.String),
      execute: (keys) => sql`DELETE FROM idempotency_keys WHERE key IN ${sql.in(keys)}`
    })

    const store: KeyValueStore = {
      get: (key) => get(key).pipe(Effect.map(Option.map((row) => row.value)), Effect.orDie),
      set: (key, value, ttl) => Effect.orDie(set({ key, value, seconds: seconds(ttl) })),
      setIfAbsent: (key, value, ttl) =>
        claim({ key, value, seconds: seconds(ttl) }).pipe(Effect.map(Option.isSome), Effect.orDie),
      delete: (...keys) => Effect.orDie(remove(keys)),
      take: () => unused,
      touch: () => unused,
      getAndTouch: () => unused,
      ttl: () => unused,
      ping: Effect.void
    }
    return store
  })
}) {}
