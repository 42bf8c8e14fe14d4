import type * as Prompt from "@effect/ai/Prompt"
import type { Fence } from "../platform/cluster/Fences.js"
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import { Effect, Option, Schema } from "effect"
import { decodeFirst, decodeRows, Json } from "../platform/Rows.js"
import type { Partition } from "../identity/Partition.js"
import type { RunOutcome, RunRecord } from "../runtime/Repo.js"

export type SessionStatus = "idle" | "running" | "waiting_approval"

const SessionRowSchema = Schema.Struct({
  id: Schema.String,
  agentId: Schema.String,
  agentIdentifier: Schema.String,
  accountId: Schema.String,
  endUserId: Schema.String,
  environmentId: Schema.NullOr(Schema.String),
  title: Schema.NullOr(Schema.String),
  metadata: Schema.transform(Schema.NullOr(Json(Schema.Record({ key: Schema.String, value: Schema.Unknown }))), Schema.Record({ key: Schema.String, value: Schema.Unknown }), {
    strict: true,
    decode: (metadata) => metadata ?? {},
    encode: (metadata) => metadata
  }),
  status: Schema.Literal("idle", "running", "waiting_approval"),
  createdAt: Schema.DateFromSelf,
  updatedAt: Schema.DateFromSelf
})
export type SessionRow = typeof SessionRowSchema.Type

const TurnRowSchema = Schema.Struct({
  turn: Schema.Number,
  runId: Schema.String,
  messages: Json(Schema.Array(Schema.Unknown)),
  chars: Schema.Number,
  status: Schema.String,
  createdAt: Schema.DateFromSelf
})

/** A turn of the history as the model saw it (messages in the prompt's encoded form). */
export interface TurnRow extends Omit<typeof TurnRowSchema.Type, "messages"> {
  readonly messages: ReadonlyArray<Prompt.MessageEncoded>
}

export interface LoggedEvent {
  readonly seq: number
  readonly turn: number
  readonly payload: { readonly type: string; readonly seq: number; readonly [key: string]: unknown }
}

/** A sent turn, waiting or running, as its session's queue holds it. */
export interface QueuedTurn {
  readonly turn: number
  readonly message: string
  readonly budget: Option.Option<bigint>
}

const QueuedTurnRow = Schema.Struct({
  turn: Schema.Number,
  message: Schema.String,
  budget: Schema.OptionFromNullOr(Schema.BigInt)
})

const LoggedEventRow = Schema.Struct({
  seq: Schema.NumberFromString,
  turn: Schema.Number,
  payload: Json(Schema.Struct({ type: Schema.String, seq: Schema.Number }, { key: Schema.String, value: Schema.Unknown }))
})

/**
 * What one session writes at once to its log (see `SessionLog`): events, a new status, its run's row (started, or
 * with its outcome), the turn as history, and the queue's changes. Any part may be absent.
 */
export interface LogWrite {
  readonly sessionId: string
  /**
   * The generation under which the writer holds the session's shard (fencing, migration 0017): the write is refused
   * once another runner acquired it. `null` or absent: embedded mode, nothing to fence.
   */
  readonly fence?: Fence | null | undefined
  readonly events?: ReadonlyArray<LoggedEvent> | undefined
  readonly status?: SessionStatus | undefined
  readonly run?: { readonly record: RunRecord; readonly outcome: Option.Option<RunOutcome> } | undefined
  readonly turn?: TurnRow | undefined
  readonly enqueue?: QueuedTurn | undefined
  readonly dequeue?: number | undefined
}

const SESSION = `s.id, s.agent_id, a.identifier AS agent_identifier, s.account_id, s.end_user_id, s.environment_id,
  s.title, s.metadata, s.status, s.created_at, s.updated_at`

const sessionRows = decodeRows(SessionRowSchema)
const firstSession = decodeFirst(SessionRowSchema)

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
        Effect.flatMap(firstSession),
        Effect.orDie
      )

    /** The partition's sessions, newest first, `limit + 1` rows so the caller can tell `has_more`. */
    const list = (partition: Partition, limit: number, before: Option.Option<{ createdAt: Date; id: string }>) =>
      sql`
        SELECT ${sql.literal(SESSION)} FROM sessions s JOIN agents a ON a.id = s.agent_id
        WHERE s.account_id = ${partition.accountId} AND s.end_user_id = ${partition.endUserId}
          ${Option.match(before, { onNone: () => sql``, onSome: (b) => sql`AND (s.created_at, s.id) < (${b.createdAt}, ${b.id})` })}
        ORDER BY s.created_at DESC, s.id DESC LIMIT ${limit + 1}`.pipe(
        Effect.flatMap(sessionRows),
        Effect.orDie
      )

    /** The messages of each session's last turn in the history (sessions without a turn are absent). */
    const lastTurns = (ids: ReadonlyArray<string>) =>
      ids.length === 0
        ? Effect.succeed(new Map<string, ReadonlyArray<Prompt.MessageEncoded>>())
        : sql<{ sessionId: string; messages: unknown }>`
            SELECT DISTINCT ON (session_id) session_id, messages FROM session_turns
            WHERE ${sql.in("session_id", ids)} ORDER BY session_id, turn DESC`.pipe(
            Effect.map((rows) => new Map(rows.map((row) => [
              row.sessionId,
              (typeof row.messages === "string" ? JSON.parse(row.messages) : row.messages) as ReadonlyArray<Prompt.MessageEncoded>
            ]))),
            Effect.orDie
          )

    const setTitle = (id: string, title: string | null) =>
      sql`UPDATE sessions SET title = ${title}, updated_at = now() WHERE id = ${id}`.pipe(Effect.asVoid, Effect.orDie)

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
      sql`
        SELECT turn, run_id, messages, chars, status, created_at FROM session_turns
        WHERE session_id = ${id} ORDER BY turn`.pipe(
        Effect.flatMap(decodeRows(TurnRowSchema)),
        // Written by `commitLog` from the prompt's own encoding: read back as it was written.
        Effect.map((rows) => rows as ReadonlyArray<TurnRow>),
        Effect.orDie
      )

    /** Where a reloaded session goes on: the last `seq` and the last turn number (sent turns included). */
    const positions = (id: string) =>
      sql<{ seq: string | null; turn: number | null }>`
        SELECT (SELECT max(seq) FROM session_events WHERE session_id = ${id})::text AS seq,
               GREATEST((SELECT max(turn) FROM session_turns WHERE session_id = ${id}),
                        (SELECT max(turn) FROM session_events WHERE session_id = ${id}),
                        (SELECT max(turn) FROM session_queue WHERE session_id = ${id})) AS turn`.pipe(
        Effect.map((rows) => ({ seq: Number(rows[0]?.seq ?? 0), turn: Number(rows[0]?.turn ?? 0) })),
        Effect.orDie
      )

    /** Logged events after `seq`, in order, at most `limit`. */
    // `seq` comes as text (a bigint) but is ordered as the number it is: the table's column, not the text.
    const eventsAfter = (id: string, seq: number, limit: number) =>
      sql`
        SELECT seq::text AS seq, turn, payload FROM session_events
        WHERE session_id = ${id} AND seq > ${seq} ORDER BY session_events.seq LIMIT ${limit}`.pipe(
        Effect.flatMap(decodeRows(LoggedEventRow)),
        Effect.orDie
      )

    /**
     * The turn in flight, if any (its events are logged and none ended it), and the `seq` before its first event
     * (its `run.created`).
     */
    const inFlight = (id: string) =>
      sql<{ seq: string; turn: number }>`
        SELECT (min(seq) - 1)::text AS seq, max(turn) AS turn FROM session_events
        WHERE session_id = ${id} AND turn = (SELECT max(turn) FROM session_events WHERE session_id = ${id})
          AND NOT EXISTS (
            SELECT 1 FROM session_events e WHERE e.session_id = ${id}
              AND e.turn = (SELECT max(turn) FROM session_events WHERE session_id = ${id})
              AND e.payload->>'type' IN ('complete', 'error'))
        HAVING count(*) > 0`.pipe(
        Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), (row) => ({ seq: Number(row.seq), turn: Number(row.turn) }))),
        Effect.orDie
      )

    /** Whether the turn has its terminal event in the log (`run.completed` or `run.failed`; one at most: 0015). */
    const turnEnded = (id: string, turn: number) =>
      sql<{ ended: boolean }>`
        SELECT EXISTS (SELECT 1 FROM session_events WHERE session_id = ${id} AND turn = ${turn}
          AND payload->>'type' IN ('complete', 'error')) AS ended`.pipe(
        Effect.map((rows) => rows[0]?.ended === true),
        Effect.orDie
      )

    const inFlightStart = (id: string) => Effect.map(inFlight(id), Option.map((turn) => turn.seq))

    /**
     * Where a reader of one turn starts: the `seq` before the turn's first event, or, when the turn has logged nothing
     * yet (it waits behind another), the log's last `seq`. One statement, so both are of one snapshot: a turn's first
     * event that was not in it comes after that last `seq`.
     */
    const turnStart = (id: string, turn: number) =>
      sql<{ seq: string | null }>`
        SELECT COALESCE((SELECT min(seq) - 1 FROM session_events WHERE session_id = ${id} AND turn = ${turn}),
                        (SELECT max(seq) FROM session_events WHERE session_id = ${id}), 0)::text AS seq`.pipe(
        Effect.map((rows) => Number(rows[0]?.seq ?? 0)),
        Effect.orDie
      )

    /**
     * Forgets the sent turns that did end (in the history, or with a last event in the log) though their row stayed:
     * a runner that stopped between the two. They must not run again.
     */
    const dequeueEnded = (id: string) =>
      sql`
        DELETE FROM session_queue q WHERE q.session_id = ${id} AND (
          EXISTS (SELECT 1 FROM session_turns t WHERE t.session_id = q.session_id AND t.turn = q.turn)
          OR EXISTS (SELECT 1 FROM session_events e WHERE e.session_id = q.session_id AND e.turn = q.turn
                       AND e.payload->>'type' IN ('complete', 'error')))`.pipe(Effect.asVoid, Effect.orDie)

    /** Sent turns not yet ended, oldest first: what a reloaded session still owes. */
    const queuedTurns = (id: string) =>
      SqlSchema.findAll({
        Request: Schema.String,
        Result: QueuedTurnRow,
        execute: (sessionId) =>
          sql`SELECT turn, message, budget::text AS budget FROM session_queue WHERE session_id = ${sessionId} ORDER BY turn`
      })(id).pipe(
        Effect.map((rows) => rows.map((row): QueuedTurn => ({ turn: row.turn, message: row.message, budget: row.budget }))),
        Effect.orDie
      )

    /**
     * Answers the indexes of the writes refused by their fence (nothing of them written, nothing notified).
     * Writes a batch of log writes of any sessions, and sends their notifications, as ONE statement: one round trip
     * and one commit (notifications go out when it commits, so no runner hears of an event before it is durable).
     * Within a session the writes are in order; its last status wins. A run started and finished in the same batch
     * is inserted finished (the statement's parts see one snapshot, so an update could not find the insert).
     */
    const commitLog = (writes: ReadonlyArray<LogWrite>, channel: string, notes: ReadonlyArray<ReadonlyArray<string>>) => {
      const events: Array<unknown> = []
      const statuses = new Map<string, { w: number; status: SessionStatus }>()
      const runs = new Map<string, Record<string, unknown>>()
      const turns: Array<unknown> = []
      const enqueued: Array<unknown> = []
      const dequeued: Array<unknown> = []
      const fences: Array<unknown> = []
      const notices: Array<unknown> = []
      writes.forEach((write, w) => {
        if (write.fence !== undefined && write.fence !== null) fences.push({ w, shard: write.fence.shard, generation: write.fence.generation })
        for (const note of notes[w] ?? []) notices.push({ w, note })
        for (const event of write.events ?? []) {
          events.push({ w, session_id: write.sessionId, seq: event.seq, turn: event.turn, payload: event.payload })
        }
        if (write.status !== undefined) statuses.set(write.sessionId, { w, status: write.status })
        if (write.run !== undefined) {
          const { outcome, record } = write.run
          runs.set(record.id, {
            w,
            id: record.id,
            agent_id: record.agentId,
            agent_version: record.agentVersion,
            payer_id: record.payerId,
            end_user_id: record.endUserId,
            session_id: record.sessionId,
            parent_run_id: record.parentRunId,
            ...Option.match(outcome, {
              onNone: () => ({ status: "running", finished: false, denied_tools: [] }),
              onSome: (o) => ({
                status: o.status,
                failure_code: o.failureCode,
                failure_message: o.failureMessage,
                input_tokens: o.inputTokens,
                output_tokens: o.outputTokens,
                credits_charged: o.creditsCharged.toString(),
                tools_denied: o.deniedTools.length,
                answer_chars: o.answerChars,
                denied_tools: o.deniedTools,
                finished: true
              })
            })
          })
        }
        if (write.turn !== undefined) {
          turns.push({
            w,
            session_id: write.sessionId,
            turn: write.turn.turn,
            run_id: write.turn.runId,
            messages: write.turn.messages,
            chars: write.turn.chars,
            status: write.turn.status
          })
        }
        if (write.enqueue !== undefined) {
          enqueued.push({
            w,
            session_id: write.sessionId,
            turn: write.enqueue.turn,
            message: write.enqueue.message,
            budget: Option.getOrNull(Option.map(write.enqueue.budget, String))
          })
        }
        if (write.dequeue !== undefined) dequeued.push({ w, session_id: write.sessionId, turn: write.dequeue })
      })
      const status = Array.from(statuses, ([id, { status, w }]) => ({ w, id, status }))
      // Every part of a write is written only if its fence holds: `refused` names the writes whose fence is stale.
      // The generations' rows are locked `FOR SHARE` (in shard order) for the statement: an acquisition of the
      // shard by another runner waits for this write, or this write sees the new generation.
      return sql<{ notified: number; refused: Array<number> }>`
        WITH f AS (
          SELECT * FROM jsonb_to_recordset(${JSON.stringify(fences)}::jsonb) AS f(w integer, shard text, generation bigint)
        ), fence AS MATERIALIZED (
          SELECT g.shard, g.generation FROM shard_generations g
          WHERE g.shard IN (SELECT f.shard FROM f)
          ORDER BY g.shard FOR SHARE
        ), refused AS (
          SELECT f.w FROM f WHERE NOT EXISTS (SELECT 1 FROM fence WHERE fence.shard = f.shard AND fence.generation = f.generation)
        ), q AS (
          INSERT INTO session_queue (session_id, turn, message, budget)
          SELECT session_id, turn, message, budget FROM jsonb_to_recordset(${JSON.stringify(enqueued)}::jsonb)
            AS q(w integer, session_id text, turn integer, message text, budget bigint)
          WHERE q.w NOT IN (SELECT w FROM refused)
        ), r AS (
          INSERT INTO runs (id, agent_id, agent_version, payer_id, end_user_id, session_id, parent_run_id, status,
            failure_code, failure_message, input_tokens, output_tokens, credits_charged, tools_denied, answer_chars,
            denied_tools, finished_at)
          SELECT id, agent_id, agent_version, payer_id, end_user_id, session_id, parent_run_id, status, failure_code,
            failure_message, coalesce(input_tokens, 0), coalesce(output_tokens, 0), coalesce(credits_charged, 0),
            coalesce(tools_denied, 0), answer_chars, denied_tools, CASE WHEN finished THEN now() END
          FROM jsonb_to_recordset(${JSON.stringify(Array.from(runs.values()))}::jsonb)
            AS r(w integer, id text, agent_id text, agent_version integer, payer_id text, end_user_id text, session_id text,
                 parent_run_id text, status text, failure_code text, failure_message text, input_tokens integer,
                 output_tokens integer, credits_charged bigint, tools_denied integer, answer_chars integer,
                 denied_tools jsonb, finished boolean)
          WHERE r.w NOT IN (SELECT w FROM refused)
          ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status, failure_code = EXCLUDED.failure_code,
            failure_message = EXCLUDED.failure_message, input_tokens = EXCLUDED.input_tokens,
            output_tokens = EXCLUDED.output_tokens, credits_charged = EXCLUDED.credits_charged,
            tools_denied = EXCLUDED.tools_denied, answer_chars = EXCLUDED.answer_chars,
            denied_tools = EXCLUDED.denied_tools, finished_at = EXCLUDED.finished_at
          WHERE runs.status = 'running'
        ), e AS (
          INSERT INTO session_events (session_id, seq, turn, payload)
          SELECT session_id, seq, turn, payload FROM jsonb_to_recordset(${JSON.stringify(events)}::jsonb)
            AS e(w integer, session_id text, seq bigint, turn integer, payload jsonb)
          WHERE e.w NOT IN (SELECT w FROM refused)
        ), t AS (
          INSERT INTO session_turns (session_id, turn, run_id, messages, chars, status)
          SELECT session_id, turn, run_id, messages, chars, status FROM jsonb_to_recordset(${JSON.stringify(turns)}::jsonb)
            AS t(w integer, session_id text, turn integer, run_id text, messages jsonb, chars integer, status text)
          WHERE t.w NOT IN (SELECT w FROM refused)
          ON CONFLICT (session_id, turn) DO NOTHING
        ), s AS (
          UPDATE sessions SET status = s.status, updated_at = now()
          FROM jsonb_to_recordset(${JSON.stringify(status)}::jsonb) AS s(w integer, id text, status text)
          WHERE sessions.id = s.id AND s.w NOT IN (SELECT w FROM refused)
        ), d AS (
          DELETE FROM session_queue USING jsonb_to_recordset(${JSON.stringify(dequeued)}::jsonb) AS d(w integer, session_id text, turn integer)
          WHERE session_queue.session_id = d.session_id AND session_queue.turn = d.turn AND d.w NOT IN (SELECT w FROM refused)
        ), n AS (
          SELECT pg_notify(${channel}, n.note) FROM jsonb_to_recordset(${JSON.stringify(notices)}::jsonb) AS n(w integer, note text)
          WHERE n.w NOT IN (SELECT w FROM refused)
        )
        SELECT (SELECT count(*) FROM n)::int AS notified, ARRAY(SELECT w FROM refused) AS refused`.pipe(
        Effect.map((rows): ReadonlyArray<number> => (rows[0]?.refused ?? []).map(Number)),
        Effect.orDie,
        Effect.withSpan("SessionsRepo.commitLog", { attributes: { writes: writes.length } })
      )
    }

    /** Tells every runner listening on `channel` (cluster mode's live fan-out of session events). */
    const notify = (channel: string, payload: string) =>
      sql`SELECT pg_notify(${channel}, ${payload})`.pipe(Effect.asVoid, Effect.orDie)

    /**
     * Closes the runs a dead runner left `running` in this session (the turn it was running when it died), with the
     * credits the ledger holds for that turn's steps (keyed `session:<id>:<turn>:<step>`, RunEngine's `chargeKey`):
     * a run's recorded credits match what its payer was charged, even when its runner died between the two.
     */
    const interruptRuns = (id: string, turn: Option.Option<number>, maxSteps: number) =>
      sql`
        UPDATE runs SET status = 'failed', failure_code = 'interrupted',
          failure_message = 'The runner of this turn stopped during it.', finished_at = now(),
          credits_charged = coalesce((
            SELECT -sum(l.amount) FROM ledger_entries l
            WHERE l.scope = 'run' AND l.idempotency_key IN (
              SELECT ${`session:${id}:${Option.getOrElse(turn, () => 0)}:`} || step FROM generate_series(1, ${maxSteps}) AS step)
          ), 0)
        WHERE session_id = ${id} AND status = 'running'`.pipe(Effect.asVoid, Effect.orDie)

    return {
      setTitle,
      insert,
      byId,
      list,
      lastTurns,
      setStatus,
      adopt,
      remove,
      turns,
      positions,
      eventsAfter,
      inFlight,
      inFlightStart,
      turnStart,
      turnEnded,
      dequeueEnded,
      queuedTurns,
      notify,
      commitLog,
      interruptRuns
    } as const
  })
}) {}
