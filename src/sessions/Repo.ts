import type { Prompt } from "@effect/ai"
import { SqlClient } from "@effect/sql"
import { Effect, Option } from "effect"
import type { Partition } from "../runtime/Repo.js"

export type SessionStatus = "idle" | "running" | "waiting_approval"

export interface SessionRow {
  readonly id: string
  readonly agentId: string
  readonly agentIdentifier: string
  readonly accountId: string
  readonly endUserId: string
  readonly environmentId: string | null
  readonly title: string | null
  readonly metadata: Record<string, unknown>
  readonly status: SessionStatus
  readonly createdAt: Date
  readonly updatedAt: Date
}

export interface TurnRow {
  readonly turn: number
  readonly runId: string
  readonly messages: ReadonlyArray<Prompt.MessageEncoded>
  readonly chars: number
  readonly status: string
  readonly createdAt: Date
}

export interface LoggedEvent {
  readonly seq: number
  readonly turn: number
  readonly payload: { readonly type: string; readonly seq: number; readonly [key: string]: unknown }
}

const json = (value: unknown) => (typeof value === "string" ? JSON.parse(value) : value)

const SESSION = `s.id, s.agent_id, a.identifier AS agent_identifier, s.account_id, s.end_user_id, s.environment_id,
  s.title, s.metadata, s.status, s.created_at, s.updated_at`

const toSession = (row: any): SessionRow => ({ ...row, metadata: json(row.metadata) ?? {} })

/** Sessions, their turns (history) and event logs. SQL errors are defects here. */
export class SessionsRepo extends Effect.Service<SessionsRepo>()("atrium/sessions/SessionsRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const insert = (session: {
      id: string
      agentId: string
      partition: Partition
      environmentId: string | null
      title: string | null
      metadata: Record<string, unknown>
    }) =>
      sql`
        INSERT INTO sessions (id, agent_id, account_id, end_user_id, environment_id, title, metadata)
        VALUES (${session.id}, ${session.agentId}, ${session.partition.accountId}, ${session.partition.endUserId},
                ${session.environmentId}, ${session.title}, ${JSON.stringify(session.metadata)}::jsonb)`.pipe(
        Effect.asVoid,
        Effect.orDie
      )

    const byId = (id: string) =>
      sql`SELECT ${sql.literal(SESSION)} FROM sessions s JOIN agents a ON a.id = s.agent_id WHERE s.id = ${id}`.pipe(
        Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), toSession)),
        Effect.orDie
      )

    /** The partition's sessions, newest first, `limit + 1` rows so the caller can tell `has_more`. */
    const list = (partition: Partition, limit: number, before: Option.Option<{ createdAt: Date; id: string }>) =>
      sql`
        SELECT ${sql.literal(SESSION)} FROM sessions s JOIN agents a ON a.id = s.agent_id
        WHERE s.account_id = ${partition.accountId} AND s.end_user_id = ${partition.endUserId}
          ${Option.match(before, { onNone: () => sql``, onSome: (b) => sql`AND (s.created_at, s.id) < (${b.createdAt}, ${b.id})` })}
        ORDER BY s.created_at DESC, s.id DESC LIMIT ${limit + 1}`.pipe(
        Effect.map((rows) => rows.map(toSession)),
        Effect.orDie
      )

    const setStatus = (id: string, status: SessionStatus) =>
      sql`UPDATE sessions SET status = ${status}, updated_at = now() WHERE id = ${id}`.pipe(Effect.asVoid, Effect.orDie)

    /** Moves a session (and its workspace files) to another end user of the same account. */
    const adopt = (id: string, accountId: string, from: string, to: string) =>
      sql.withTransaction(Effect.gen(function*() {
        yield* sql`UPDATE sessions SET end_user_id = ${to}, updated_at = now() WHERE id = ${id}`
        yield* sql`
          UPDATE workspace_files SET end_user_id = ${to}
          WHERE account_id = ${accountId} AND end_user_id = ${from} AND workspace = ${id}`
      })).pipe(Effect.orDie)

    /** Removes the session, its history, its log and its workspace files. */
    const remove = (session: SessionRow) =>
      sql.withTransaction(Effect.gen(function*() {
        yield* sql`
          DELETE FROM workspace_files
          WHERE account_id = ${session.accountId} AND end_user_id = ${session.endUserId} AND workspace = ${session.id}`
        yield* sql`DELETE FROM sessions WHERE id = ${session.id}`
      })).pipe(Effect.orDie)

    const turns = (id: string) =>
      sql<any>`
        SELECT turn, run_id, messages, chars, status, created_at FROM session_turns
        WHERE session_id = ${id} ORDER BY turn`.pipe(
        Effect.map((rows) => rows.map((row): TurnRow => ({ ...row, messages: json(row.messages) }))),
        Effect.orDie
      )

    const saveTurn = (id: string, turn: TurnRow) =>
      sql`
        INSERT INTO session_turns (session_id, turn, run_id, messages, chars, status)
        VALUES (${id}, ${turn.turn}, ${turn.runId}, ${JSON.stringify(turn.messages)}::jsonb, ${turn.chars}, ${turn.status})
        ON CONFLICT (session_id, turn) DO NOTHING`.pipe(Effect.asVoid, Effect.orDie)

    const appendEvent = (id: string, event: LoggedEvent) =>
      sql`
        INSERT INTO session_events (session_id, seq, turn, payload)
        VALUES (${id}, ${event.seq}, ${event.turn}, ${JSON.stringify(event.payload)}::jsonb)`.pipe(
        Effect.asVoid,
        Effect.orDie
      )

    /** Where a reloaded session goes on: the last `seq` and the last turn number. */
    const positions = (id: string) =>
      sql<{ seq: string | null; turn: number | null }>`
        SELECT (SELECT max(seq) FROM session_events WHERE session_id = ${id})::text AS seq,
               GREATEST((SELECT max(turn) FROM session_turns WHERE session_id = ${id}),
                        (SELECT max(turn) FROM session_events WHERE session_id = ${id})) AS turn`.pipe(
        Effect.map((rows) => ({ seq: Number(rows[0]?.seq ?? 0), turn: Number(rows[0]?.turn ?? 0) })),
        Effect.orDie
      )

    /** Logged events after `seq`, in order, at most `limit`. */
    const eventsAfter = (id: string, seq: number, limit: number) =>
      sql<any>`
        SELECT seq, turn, payload FROM session_events
        WHERE session_id = ${id} AND seq > ${seq} ORDER BY seq LIMIT ${limit}`.pipe(
        Effect.map((rows) => rows.map((row): LoggedEvent => ({ seq: Number(row.seq), turn: row.turn, payload: json(row.payload) }))),
        Effect.orDie
      )

    /** The `seq` before the first event of the turn in flight (its `run.created`), if a turn is in flight. */
    const inFlightStart = (id: string) =>
      sql<{ seq: string }>`
        SELECT (min(seq) - 1)::text AS seq FROM session_events
        WHERE session_id = ${id} AND turn = (SELECT max(turn) FROM session_events WHERE session_id = ${id})
          AND NOT EXISTS (
            SELECT 1 FROM session_events e WHERE e.session_id = ${id}
              AND e.turn = (SELECT max(turn) FROM session_events WHERE session_id = ${id})
              AND e.payload->>'type' IN ('complete', 'error'))
        HAVING count(*) > 0`.pipe(
        Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), (row) => Number(row.seq))),
        Effect.orDie
      )

    return { insert, byId, list, setStatus, adopt, remove, turns, saveTurn, appendEvent, positions, eventsAfter, inFlightStart } as const
  })
}) {}
