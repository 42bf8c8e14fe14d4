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

    /** The other runners' heartbeats as they are now (with the name of their sessions), and whether `self`'s is fresh. */
    const heartbeats = (self: string, freshSeconds: number) =>
      sql<{ address: string; applicationName: string; beat: string; selfFresh: boolean }>`
        SELECT b.address, b.application_name, r.last_heartbeat::text AS beat,
          EXISTS (SELECT 1 FROM cluster_runners me WHERE me.address = ${self}
                    AND me.last_heartbeat >= now() - make_interval(secs => ${freshSeconds})) AS self_fresh
        FROM cluster_runner_backends b JOIN cluster_runners r ON r.address = b.address
        WHERE b.address <> ${self}`

    /**
     * Ends every database session named `applicationName` (a silent runner's) in this database: its advisory locks go
     * with them. Only this database's: a server may hold several, and names are per process, not per database.
     */
    const cut = (applicationName: string) =>
      sql<{ ended: number }>`
        SELECT count(pg_terminate_backend(pid))::int AS ended FROM pg_stat_activity
        WHERE application_name = ${applicationName} AND datname = current_database()`.pipe(
        Effect.map((rows) => rows[0]?.ended ?? 0)
      )

    return { register, unregister, heartbeats, cut } as const
  })
}) {}
