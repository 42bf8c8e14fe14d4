import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

/**
 * Which database sessions belong to which runner, so that a runner that stopped answering can be cut off from the
 * database by the others (Cluster.ts `watchRunners`, issues 26 and 33): every connection of a process carries the
 * process's `application_name` (Database.ts, Listener.ts), and each runner files it under its address here
 * (migration 0015). `cluster_runners` is @effect/cluster's own table (its heartbeat rows).
 */
export class RunnersRepo extends Effect.Service<RunnersRepo>()("atrium/platform/RunnersRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const register = (address: string, applicationName: string) =>
      sql`
        INSERT INTO cluster_runner_backends (address, application_name) VALUES (${address}, ${applicationName})
        ON CONFLICT (address) DO UPDATE SET application_name = EXCLUDED.application_name, updated_at = now()`.pipe(Effect.asVoid)

    const unregister = (address: string) =>
      sql`DELETE FROM cluster_runner_backends WHERE address = ${address}`.pipe(Effect.asVoid)

    /**
     * Ends every database session of the runners (other than `self`) whose heartbeat is older than `silentSeconds`,
     * when `self`'s own is fresh: their advisory shard locks go with their connections. Returns how many were ended.
     */
    const cutSilent = (self: string, silentSeconds: number) =>
      sql<{ ended: number }>`
        SELECT count(pg_terminate_backend(a.pid))::int AS ended
        FROM pg_stat_activity a
        JOIN cluster_runner_backends b ON a.application_name = b.application_name
        JOIN cluster_runners r ON r.address = b.address
        WHERE b.address <> ${self} AND r.last_heartbeat < now() - make_interval(secs => ${silentSeconds})
          -- Only a runner whose own heartbeat is fresh judges: when every heartbeat is late, the database is slow,
          -- not the others dead.
          AND EXISTS (SELECT 1 FROM cluster_runners me WHERE me.address = ${self}
                        AND me.last_heartbeat >= now() - make_interval(secs => ${silentSeconds / 2}))`.pipe(
        Effect.map((rows) => rows[0]?.ended ?? 0)
      )

    return { register, unregister, cutSilent } as const
  })
}) {}
