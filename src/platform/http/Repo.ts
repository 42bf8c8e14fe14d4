import * as SqlClient from "@effect/sql/SqlClient"
import { Duration, Effect, Option } from "effect"
import type { KeyValueStore } from "../KeyValue.js"

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
    const store: KeyValueStore = {
      get: (key) =>
        sql<{ value: string }>`SELECT value FROM idempotency_keys WHERE key = ${key} AND expires_at > now()`.pipe(
          Effect.map((rows) => Option.fromNullable(rows[0]?.value)),
          Effect.orDie
        ),
      set: (key, value, ttl) =>
        sql`
          INSERT INTO idempotency_keys (key, value, expires_at) VALUES (${key}, ${value}, now() + make_interval(secs => ${seconds(ttl)}))
          ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, expires_at = EXCLUDED.expires_at`.pipe(Effect.asVoid, Effect.orDie),
      setIfAbsent: (key, value, ttl) =>
        sql<{ key: string }>`
          INSERT INTO idempotency_keys (key, value, expires_at) VALUES (${key}, ${value}, now() + make_interval(secs => ${seconds(ttl)}))
          ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, expires_at = EXCLUDED.expires_at
            WHERE idempotency_keys.expires_at <= now()
          RETURNING key`.pipe(Effect.map((rows) => rows.length > 0), Effect.orDie),
      delete: (...keys) =>
        sql`DELETE FROM idempotency_keys WHERE key IN ${sql.in(keys)}`.pipe(Effect.asVoid, Effect.orDie),
      take: () => unused,
      increment: () => unused,
      touch: () => unused,
      ttl: () => unused,
      ping: Effect.void
    }
    return store
  })
}) {}
