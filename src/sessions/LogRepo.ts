import type * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import { Effect, Option, Schema } from "effect"
import type { LogWrite, SessionStatus } from "./Rows.js"

/**
 * The batch as the statement reads it: each part a JSON array of records (`jsonb_to_recordset`), `w` the index of the
 * write it belongs to. Built from the typed `LogWrite`s below; one parameter per part keeps it one statement.
 */
const Batch = Schema.Struct({
  fences: Schema.String,
  enqueued: Schema.String,
  runs: Schema.String,
  events: Schema.String,
  turns: Schema.String,
  status: Schema.String,
  dequeued: Schema.String,
  notices: Schema.String,
  channel: Schema.String
})

/** `refused`: the indexes (`w`) of the writes whose fence is stale, an `integer[]`. */
const Committed = Schema.Struct({ notified: Schema.Number, refused: Schema.Array(Schema.Number) })

/** The session log's one statement (`SessionsRepo.commitLog`), on `sql`. */
export const commitLogWith = (sql: SqlClient.SqlClient) => {
  const commit = SqlSchema.single({
    Request: Batch,
    Result: Committed,
    execute: (batch) =>
      sql`
        WITH f AS (
          SELECT * FROM jsonb_to_recordset(${batch.fences}::jsonb) AS f(w integer, shard text, generation bigint)
        ), fence AS MATERIALIZED (
          SELECT g.shard, g.generation FROM shard_generations g
          WHERE g.shard IN (SELECT f.shard FROM f)
          ORDER BY g.shard FOR SHARE
        ), refused AS (
          SELECT f.w FROM f WHERE NOT EXISTS (SELECT 1 FROM fence WHERE fence.shard = f.shard AND fence.generation = f.generation)
        ), q AS (
          INSERT INTO session_queue (session_id, turn, message, budget, parent_turn, branch)
          SELECT session_id, turn, message, budget, parent_turn, branch FROM jsonb_to_recordset(${batch.enqueued}::jsonb)
            AS q(w integer, session_id text, turn integer, message text, budget bigint, parent_turn integer, branch boolean)
          WHERE q.w NOT IN (SELECT w FROM refused)
        ), r AS (
          INSERT INTO runs (id, agent_id, agent_version, payer_id, end_user_id, session_id, parent_run_id, status,
            failure_code, failure_message, input_tokens, output_tokens, credits_charged, tools_denied, answer_chars,
            denied_tools, finished_at)
          SELECT id, agent_id, agent_version, payer_id, end_user_id, session_id, parent_run_id, status, failure_code,
            failure_message, coalesce(input_tokens, 0), coalesce(output_tokens, 0), coalesce(credits_charged, 0),
            coalesce(tools_denied, 0), answer_chars, denied_tools, CASE WHEN finished THEN now() END
          FROM jsonb_to_recordset(${batch.runs}::jsonb)
            AS r(w integer, id text, agent_id text, agent_version integer, payer_id text, end_user_id text, session_id text,
                 parent_run_id text, status text, failure_code text, failure_message text, input_tokens integer,
                 output_tokens integer, credits_charged bigint, tools_denied integer, answer_chars integer,
                 denied_tools jsonb, finished boolean)
          WHERE r.w NOT IN (SELECT w FROM refused)
          ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status, failure_code = EXCLUDED.failure_code,
            failure_message = EXCLUDED.failure_message, input_tokens = EXCLUDED.input_tokens,
            output_tokens = EXCLUDED.output_tokens, credits_charged = EXCLUDED.credits_charged,
            tools_denied = EXCLUDED.tools_denied, answer_chars = EXCLUDED.answer_chars,
            denied_tools = EXCLUDED.denied_tools, finished_at = EXCLUDED.finished_at,
            agent_id = coalesce(EXCLUDED.agent_id, runs.agent_id), agent_version = coalesce(EXCLUDED.agent_version, runs.agent_version),
            started_at = coalesce(runs.started_at, now())
          -- A background message's run was written 'queued' when the message was sent (runs/Repo.ts enqueueTurn).
          WHERE runs.status IN ('queued', 'running')
        ), e AS (
          INSERT INTO session_events (session_id, seq, turn, payload)
          SELECT session_id, seq, turn, payload FROM jsonb_to_recordset(${batch.events}::jsonb)
            AS e(w integer, session_id text, seq bigint, turn integer, payload jsonb)
          WHERE e.w NOT IN (SELECT w FROM refused)
        ), t AS (
          INSERT INTO session_turns (session_id, turn, run_id, messages, chars, status, parent_turn)
          SELECT session_id, turn, run_id, messages, chars, status, parent_turn FROM jsonb_to_recordset(${batch.turns}::jsonb)
            AS t(w integer, session_id text, turn integer, run_id text, messages jsonb, chars integer, status text,
                 parent_turn integer)
          WHERE t.w NOT IN (SELECT w FROM refused)
          ON CONFLICT (session_id, turn) DO NOTHING
        ), s AS (
          UPDATE sessions SET status = coalesce(s.status, sessions.status),
            leaf_turn = CASE WHEN s.set_leaf THEN s.leaf ELSE sessions.leaf_turn END, updated_at = now()
          FROM jsonb_to_recordset(${batch.status}::jsonb) AS s(w integer, id text, status text, set_leaf boolean, leaf integer)
          WHERE sessions.id = s.id AND s.w NOT IN (SELECT w FROM refused)
        ), d AS (
          DELETE FROM session_queue USING jsonb_to_recordset(${batch.dequeued}::jsonb) AS d(w integer, session_id text, turn integer)
          WHERE session_queue.session_id = d.session_id AND session_queue.turn = d.turn AND d.w NOT IN (SELECT w FROM refused)
        ), n AS (
          SELECT pg_notify(${batch.channel}, n.note) FROM jsonb_to_recordset(${batch.notices}::jsonb) AS n(w integer, note text)
          WHERE n.w NOT IN (SELECT w FROM refused)
        )
        SELECT (SELECT count(*) FROM n)::int AS notified, ARRAY(SELECT w FROM refused) AS refused`
  })

  /**
   * Answers the indexes of the writes refused by their fence (nothing of them written, nothing notified).
   * Writes a batch of log writes of any sessions, and sends their notifications, as ONE statement: one round trip
   * and one commit (notifications go out when it commits, so no runner hears of an event before it is durable).
   * Within a session the writes are in order; its last status wins. A run started and finished in the same batch
   * is inserted finished (the statement's parts see one snapshot, so an update could not find the insert).
   */
  const commitLog = (writes: ReadonlyArray<LogWrite>, channel: string, notes: ReadonlyArray<ReadonlyArray<string>>) => {
    const events: Array<unknown> = []
    // One row per session (the status and the leaf in one update: a statement updates a row once).
    const statuses = new Map<string, { w: number; status: SessionStatus | null; set_leaf: boolean; leaf: number | null }>()
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
      if (write.status !== undefined || write.leaf !== undefined) {
        const before = statuses.get(write.sessionId)
        statuses.set(write.sessionId, {
          w,
          status: write.status ?? before?.status ?? null,
          set_leaf: write.leaf !== undefined || (before?.set_leaf ?? false),
          leaf: write.leaf !== undefined ? write.leaf.turn : before?.leaf ?? null
        })
      }
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
          status: write.turn.status,
          parent_turn: write.turn.parentTurn
        })
      }
      if (write.enqueue !== undefined) {
        enqueued.push({
          w,
          session_id: write.sessionId,
          turn: write.enqueue.turn,
          message: write.enqueue.message,
          budget: Option.getOrNull(Option.map(write.enqueue.budget, String)),
          parent_turn: write.enqueue.parent === undefined ? null : Option.getOrNull(write.enqueue.parent),
          branch: write.enqueue.parent !== undefined && Option.isSome(write.enqueue.parent)
        })
      }
      if (write.dequeue !== undefined) dequeued.push({ w, session_id: write.sessionId, turn: write.dequeue })
    })
    const status = Array.from(statuses, ([id, row]) => ({ id, ...row }))
    // Every part of a write is written only if its fence holds: `refused` names the writes whose fence is stale.
    // The generations' rows are locked `FOR SHARE` (in shard order) for the statement: an acquisition of the
    // shard by another runner waits for this write, or this write sees the new generation.
    return commit({
      fences: JSON.stringify(fences),
      enqueued: JSON.stringify(enqueued),
      runs: JSON.stringify(Array.from(runs.values())),
      events: JSON.stringify(events),
      turns: JSON.stringify(turns),
      status: JSON.stringify(status),
      dequeued: JSON.stringify(dequeued),
      notices: JSON.stringify(notices),
      channel
    }).pipe(
      Effect.map((row) => row.refused),
      Effect.orDie,
      Effect.withSpan("SessionsRepo.commitLog", { attributes: { writes: writes.length } })
    )
  }
  return commitLog
}
