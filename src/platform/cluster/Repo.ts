import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import { Effect, Schema } from "effect"
import { rowDefects } from "../Rows.js"

const Heartbeat = Schema.Struct({
  address: Schema.String,
  applicationName: Schema.String,
  /** The beat's timestamp as text: only compared with the one seen before, never read as a time. */
  beat: Schema.String,
  selfFresh: Schema.Boolean
})
const Count = Schema.Struct({ n: Schema.Number })
/** A generation is a `bigint` column; the fences carry it as text (compared, sent back, never added to here). */
const Generation = Schema.Struct({ shard: Schema.String, generation: Schema.String })

/**
 * Which database sessions belong to which runner, so that a runner that stopped answering can be cut off from the
 * database by the others (`cluster/Watch.ts`, issues 26 and 33): every connection of a runner carries the
 * runner's `application_name` (Database.ts, Listener.ts), and each runner files it under its address here
 * (migration 0015). `cluster_runners` is @effect/cluster's own table (its heartbeat rows). SQL errors stay failures
 * here: the cluster's callers retry or log them (a watch must outlive a lost connection).
 */
export class RunnersRepo extends Effect.Service<RunnersRepo>()("atrium/platform/RunnersRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const registerRow = SqlSchema.void({
      Request: Schema.Struct({ address: Schema.String, applicationName: Schema.String }),
      execute: ({ address, applicationName }) =>
        sql`
          INSERT INTO cluster_runner_backends (address, application_name) VALUES (${address}, ${applicationName})
          ON CONFLICT (address) DO UPDATE SET application_name = EXCLUDED.application_name, updated_at = now(), beat_at = now()`
    })
    const register = (address: string, applicationName: string) => rowDefects(registerRow({ address, applicationName }))

    const unregisterRow = SqlSchema.void({
      Request: Schema.String,
      execute: (address) => sql`DELETE FROM cluster_runner_backends WHERE address = ${address}`
    })
    const unregister = (address: string) => rowDefects(unregisterRow(address))

    /**
     * This runner's own heartbeat for the others' watch (migration 0017, the database's clock), and the other runners'
     * heartbeats as they are now (with the name of their sessions), and whether `self`'s is fresh: one statement per
     * watch, not a beat and a read apart (two round trips every `beat`, the larger part of an idle runner's work). The
     * read sees the table as it was before this beat, so `selfFresh` speaks of the previous one, as it did when the
     * beat had a fiber of its own.
     */
    const beatRows = SqlSchema.findAll({
      Request: Schema.Struct({ self: Schema.String, freshSeconds: Schema.Number }),
      Result: Heartbeat,
      execute: ({ freshSeconds, self }) =>
        sql`
          WITH beat AS (UPDATE cluster_runner_backends SET beat_at = now() WHERE address = ${self})
          SELECT b.address, b.application_name, b.beat_at::text AS beat,
            EXISTS (SELECT 1 FROM cluster_runner_backends me WHERE me.address = ${self}
                      AND me.beat_at >= now() - make_interval(secs => ${freshSeconds})) AS self_fresh
          FROM cluster_runner_backends b
          WHERE b.address <> ${self}`
    })
    const beatAndWatch = (self: string, freshSeconds: number) => rowDefects(beatRows({ self, freshSeconds }))

    /**
     * Ends every database session named `applicationName` (a silent runner's) in this database: its advisory locks go
     * with them. Only this database's: a server may hold several, and names are per process, not per database.
     */
    const terminate = SqlSchema.single({
      Request: Schema.String,
      Result: Count,
      execute: (applicationName) =>
        sql`
          SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
          WHERE application_name = ${applicationName} AND datname = current_database()`
    })
    const cut = (applicationName: string) => rowDefects(Effect.map(terminate(applicationName), (row) => row.n))

    /** How many database sessions named `applicationName` are still there (a cut one's end is asynchronous). */
    const sessionsNamed = SqlSchema.single({
      Request: Schema.String,
      Result: Count,
      execute: (applicationName) =>
        sql`
          SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = ${applicationName} AND datname = current_database()`
    })
    const remaining = (applicationName: string) => rowDefects(Effect.map(sessionsNamed(applicationName), (row) => row.n))

    /**
     * Takes a silent runner out of the shard assignment (the cluster's own `healthy` flag, which its health check
     * sets back once the runner answers pings again): without it its shards would wait for its heartbeat row to expire.
     */
    const unhealthy = SqlSchema.void({
      Request: Schema.String,
      execute: (address) => sql`UPDATE cluster_runners SET healthy = false WHERE address = ${address}`
    })
    const markUnhealthy = (address: string) => rowDefects(unhealthy(address))

    /**
     * Raises the generation of each shard `runner` has just acquired (fencing tokens, migration 0017) and answers the
     * new generations. In shard order, so two acquisitions lock the rows in the same order.
     *
     * A shard this runner acquires again while it is still the last owner under the generation it knew (`known`: its
     * locks went with a database restart and nobody took the shard meanwhile) keeps that generation: its entities'
     * state is still the newest, and raising it would fence every running turn of the cluster after each restart.
     * Had another runner acquired it in between, that runner raised it, so the generations differ and it is raised.
     */
    /**
     * Unprocessed requests to entities of `entityTypes` that a runner read more than `seconds` ago and has not
     * answered: read again at the next poll of their shard's owner. The cluster's storage does not read a message
     * again for ten minutes once read (SqlMessageStorage `last_read`), and a runner that read one and then skipped
     * it (its request id still marked processed from the execution before, its entity closing) would leave it there
     * that long: a background run resumed by an answer, then not run for ten minutes (runs/Background.ts, the
     * sweep). A request being processed is skipped by its owner as before (the cluster knows it is in flight).
     */
    const rereadRows = SqlSchema.single({
      Request: Schema.Struct({ entityTypes: Schema.Array(Schema.String), seconds: Schema.Number }),
      Result: Schema.Struct({ n: Schema.Number }),
      execute: ({ entityTypes, seconds }) =>
        sql`
          WITH stale AS (
            UPDATE cluster_messages SET last_read = NULL
            WHERE processed = false AND kind = 0 AND entity_type IN ${sql.in(entityTypes)}
              AND last_read < now() - make_interval(secs => ${seconds})
              AND NOT EXISTS (SELECT 1 FROM cluster_replies r WHERE r.request_id = cluster_messages.request_id AND r.kind = 0)
            RETURNING 1)
          SELECT count(*)::int AS n FROM stale`
    })
    const rereadStale = (entityTypes: ReadonlyArray<string>, seconds: number) =>
      rowDefects(Effect.map(rereadRows({ entityTypes, seconds }), (row) => row.n))

    const raised = SqlSchema.findAll({
      Request: Schema.Struct({ runner: Schema.String, shards: Schema.Array(Schema.String), known: Schema.Array(Schema.NullOr(Schema.String)) }),
      Result: Generation,
      execute: ({ known, runner, shards }) =>
        sql`
          INSERT INTO shard_generations (shard, generation, runner)
          SELECT s.shard, COALESCE(s.known, 0) + 1, ${runner}
          FROM unnest(${shards}::text[], ${known}::bigint[]) AS s(shard, known)
          ORDER BY s.shard
          ON CONFLICT (shard) DO UPDATE SET
            generation = CASE
              WHEN shard_generations.runner = EXCLUDED.runner AND shard_generations.generation + 1 = EXCLUDED.generation
                THEN shard_generations.generation
              ELSE shard_generations.generation + 1 END,
            runner = EXCLUDED.runner,
            -- A kept generation is no move: the acquisition it continues keeps its time, so the calls in flight to
            -- this runner are not cut and sent again (ShardMoves reads it as "acquired since the call was sent").
            acquired_at = CASE
              WHEN shard_generations.runner = EXCLUDED.runner AND shard_generations.generation + 1 = EXCLUDED.generation
                THEN shard_generations.acquired_at
              ELSE now() END
          RETURNING shard, generation::text AS generation`
    })
    const raiseGenerations = (runner: string, shards: ReadonlyArray<{ readonly shard: string; readonly known: string | null }>) =>
      rowDefects(raised({ runner, shards: shards.map((s) => s.shard), known: shards.map((s) => s.known) }))

    /**
     * The latest acquisition of each of `shards` (`ShardMoves`: calls in flight to a shard that moved since): by
     * whom, its time as text (which acquisition) and its age by the database's clock, so no two clocks are compared.
     */
    const acquiredRows = SqlSchema.findAll({
      Request: Schema.Array(Schema.String),
      Result: Schema.Struct({ shard: Schema.String, runner: Schema.String, acquiredAt: Schema.String, ageMs: Schema.Number }),
      execute: (shards) =>
        sql`
          SELECT shard, runner, acquired_at::text AS acquired_at,
            (extract(epoch FROM clock_timestamp() - acquired_at) * 1000)::float8 AS age_ms
          FROM shard_generations WHERE shard = ANY(${shards}::text[])`
    })
    const acquisitions = (shards: ReadonlyArray<string>) => rowDefects(acquiredRows(shards))

    return { register, unregister, beatAndWatch, cut, remaining, markUnhealthy, raiseGenerations, rereadStale, acquisitions } as const
  })
}) {}
