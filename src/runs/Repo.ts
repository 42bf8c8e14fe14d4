import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import { Effect, Option, Schema } from "effect"
import type { Partition } from "../identity/Partition.js"
import { AgentId, SessionId, UserId } from "../platform/Ids.js"
import { RunId } from "../runtime/Domain.js"
import type { RunOutcome } from "../runtime/Repo.js"

/** A run's row as `GET /v1/runs/:id` reads it (migrations 0006, 0009, 0018). */
export const RunRow = Schema.Struct({
  id: RunId,
  agent: Schema.NullOr(Schema.String),
  status: Schema.Literal("queued", "running", "completed", "failed", "cancelled", "incomplete"),
  background: Schema.Boolean,
  output: Schema.NullOr(Schema.String),
  inputTokens: Schema.Number,
  outputTokens: Schema.Number,
  creditsCharged: Schema.BigInt,
  failureCode: Schema.NullOr(Schema.String),
  failureMessage: Schema.NullOr(Schema.String),
  incompleteReason: Schema.NullOr(Schema.String),
  sessionId: Schema.NullOr(SessionId),
  parentRunId: Schema.NullOr(RunId),
  createdAt: Schema.DateFromSelf,
  startedAt: Schema.NullOr(Schema.DateFromSelf),
  finishedAt: Schema.NullOr(Schema.DateFromSelf),
  deadlineAt: Schema.NullOr(Schema.DateFromSelf),
  cancelRequested: Schema.Boolean
})
export type RunRow = typeof RunRow.Type

/** What a background run's workflow reads to run it on any runner. */
export const BackgroundRow = Schema.Struct({
  id: RunId,
  accountId: UserId,
  endUserId: Schema.String,
  agent: Schema.NullOr(Schema.String),
  status: RunRow.fields.status,
  request: Schema.Unknown,
  deadlineAt: Schema.NullOr(Schema.DateFromSelf),
  cancelRequested: Schema.Boolean
})
export type BackgroundRow = typeof BackgroundRow.Type

export const TERMINAL = new Set(["completed", "failed", "cancelled", "incomplete"])

const Caller = { accountId: UserId, endUserId: Schema.String }

/** JSON columns come back parsed from PostgreSQL and as text from some drivers. */
const parsed = (value: unknown) => (typeof value === "string" ? JSON.parse(value) : value)

const columns = (sql: SqlClient.SqlClient) =>
  sql`r.id, coalesce(r.agent, a.identifier) AS agent, r.status, r.background, r.output, r.input_tokens, r.output_tokens,
      r.credits_charged, r.failure_code, r.failure_message, r.incomplete_reason, r.session_id, r.parent_run_id,
      r.created_at, r.started_at, r.finished_at, r.deadline_at, r.cancel_requested_at IS NOT NULL AS cancel_requested`

/** Runs as their callers read them, background runs' queue and cancels, and their event logs. SQL errors are defects. */
export class RunRecords extends Effect.Service<RunRecords>()("atrium/runs/RunRecords", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    // The partition is in the statement, not checked after: another caller's run is simply not found (spec 2.7).
    const findOne = SqlSchema.findOne({
      Request: Schema.Struct({ id: Schema.String, ...Caller }),
      Result: RunRow,
      execute: ({ accountId, endUserId, id }) =>
        sql`
          SELECT ${columns(sql)} FROM runs r LEFT JOIN agents a ON a.id = r.agent_id
          WHERE r.id = ${id} AND r.payer_id = ${accountId} AND r.end_user_id = ${endUserId}`
    })

    const ListQuery = Schema.Struct({
      ...Caller,
      agent: Schema.NullOr(Schema.String),
      status: Schema.NullOr(Schema.String),
      createdAfter: Schema.NullOr(Schema.DateFromSelf),
      createdBefore: Schema.NullOr(Schema.DateFromSelf),
      after: Schema.NullOr(Schema.String),
      limit: Schema.Number
    })
    const findMany = SqlSchema.findAll({
      Request: ListQuery,
      Result: RunRow,
      execute: (q) =>
        sql`
          SELECT ${columns(sql)} FROM runs r LEFT JOIN agents a ON a.id = r.agent_id
          WHERE r.payer_id = ${q.accountId} AND r.end_user_id = ${q.endUserId}
            ${q.agent === null ? sql`` : sql`AND coalesce(r.agent, a.identifier) = ${q.agent}`}
            ${q.status === null ? sql`` : sql`AND r.status = ${q.status}`}
            ${q.createdAfter === null ? sql`` : sql`AND r.created_at >= ${q.createdAfter}`}
            ${q.createdBefore === null ? sql`` : sql`AND r.created_at < ${q.createdBefore}`}
            ${
            q.after === null ? sql`` : sql`AND (r.created_at, r.id) < (
              SELECT created_at, id FROM runs WHERE id = ${q.after} AND payer_id = ${q.accountId} AND end_user_id = ${q.endUserId})`
          }
          ORDER BY r.created_at DESC, r.id DESC LIMIT ${q.limit + 1}`
    })

    const insertQueued = SqlSchema.void({
      Request: Schema.Struct({
        id: RunId,
        ...Caller,
        agentId: Schema.NullOr(AgentId),
        agentVersion: Schema.NullOr(Schema.Number),
        agent: Schema.String,
        sessionId: Schema.NullOr(SessionId),
        request: Schema.Unknown,
        deadlineAt: Schema.DateFromSelf
      }),
      execute: (run) =>
        sql`
          INSERT INTO runs (id, agent_id, agent_version, payer_id, end_user_id, session_id, status, agent, background,
                            request, deadline_at)
          VALUES (${run.id}, ${run.agentId}, ${run.agentVersion}, ${run.accountId}, ${run.endUserId}, ${run.sessionId},
                  'queued', ${run.agent}, true, ${JSON.stringify(run.request)}::jsonb, ${run.deadlineAt})
          ON CONFLICT (id) DO NOTHING`
    })

    /**
     * A session turn sent with `background: true`, before it runs: its run, `queued`, under the turn's run id. The
     * turn's own writes take the row over when it starts (sessions/LogRepo.ts); one that started first is left alone.
     */
    const insertTurn = SqlSchema.void({
      Request: Schema.Struct({ id: Schema.String, ...Caller, agentId: Schema.String, agent: Schema.String, sessionId: Schema.String }),
      execute: (run) =>
        sql`
          INSERT INTO runs (id, agent_id, payer_id, end_user_id, session_id, status, agent, background)
          VALUES (${run.id}, ${run.agentId}, ${run.accountId}, ${run.endUserId}, ${run.sessionId}, 'queued', ${run.agent}, true)
          ON CONFLICT (id) DO UPDATE SET background = true`
    })

    /** A deleted session's runs that had not ended: its queued and running turns will not run on. */
    const closeSession = SqlSchema.void({
      Request: Schema.String,
      execute: (sessionId) =>
        sql`
          UPDATE runs SET status = 'cancelled', finished_at = now()
          WHERE session_id = ${sessionId} AND status IN ('queued', 'running')`
    })

    const findBackground = SqlSchema.findOne({
      Request: Schema.String,
      Result: BackgroundRow,
      execute: (id) =>
        sql`
          SELECT id, payer_id AS account_id, end_user_id, agent, status, request, deadline_at,
                 cancel_requested_at IS NOT NULL AS cancel_requested
          FROM runs WHERE id = ${id} AND background`
    })

    const started = SqlSchema.void({
      Request: Schema.String,
      execute: (id) =>
        sql`UPDATE runs SET status = 'running', started_at = coalesce(started_at, now()) WHERE id = ${id} AND status IN ('queued', 'running')`
    })

    const finishing = SqlSchema.findAll({
      Request: Schema.Struct({
        id: Schema.String,
        status: Schema.String,
        failureCode: Schema.NullOr(Schema.String),
        failureMessage: Schema.NullOr(Schema.String),
        incompleteReason: Schema.NullOr(Schema.String),
        inputTokens: Schema.Number,
        outputTokens: Schema.Number,
        creditsCharged: Schema.BigInt,
        answerChars: Schema.Number,
        deniedTools: Schema.parseJson(Schema.Array(Schema.String)),
        output: Schema.String
      }),
      Result: Schema.Struct({ id: Schema.String }),
      execute: (run) =>
        sql`
          UPDATE runs SET status = ${run.status}, failure_code = ${run.failureCode}, failure_message = ${run.failureMessage},
            incomplete_reason = ${run.incompleteReason}, input_tokens = ${run.inputTokens}, output_tokens = ${run.outputTokens},
            credits_charged = ${run.creditsCharged}, answer_chars = ${run.answerChars},
            denied_tools = ${run.deniedTools}::jsonb, tools_denied = jsonb_array_length(${run.deniedTools}::jsonb),
            output = ${run.output}, finished_at = now()
          WHERE id = ${run.id} AND status IN ('queued', 'running') RETURNING id`
    })

    const cancelling = SqlSchema.findAll({
      Request: Schema.Struct({ id: Schema.String, ...Caller }),
      Result: Schema.Struct({ id: Schema.String }),
      execute: ({ accountId, endUserId, id }) =>
        sql`
          UPDATE runs SET cancel_requested_at = coalesce(cancel_requested_at, now())
          WHERE id = ${id} AND payer_id = ${accountId} AND end_user_id = ${endUserId} AND background RETURNING id`
    })

    /**
     * Background runs (not a session's turn, not a subagent) that the sweep (runs/Background.ts) makes sure of, older
     * than `seconds`: `queued` ones, whose workflow may never have been started (the runner that wrote the row died
     * before it sent the start), and open ones with something to wake them for (a cancel asked, an approval answered),
     * whose wake-up may have been lost.
     */
    const stranded = SqlSchema.findAll({
      Request: Schema.Struct({ seconds: Schema.Number, limit: Schema.Number }),
      Result: Schema.Struct({ id: RunId, status: Schema.String }),
      execute: ({ limit, seconds }) =>
        sql`
          SELECT r.id, r.status FROM runs r
          WHERE r.background AND r.session_id IS NULL AND r.parent_run_id IS NULL AND r.status IN ('queued', 'running')
            AND r.created_at < now() - make_interval(secs => ${seconds})
            AND (r.status = 'queued'
              OR r.cancel_requested_at < now() - make_interval(secs => ${seconds})
              OR EXISTS (SELECT 1 FROM pending_approvals a WHERE a.run_id = r.id AND a.answer IS NOT NULL))
          ORDER BY r.created_at LIMIT ${limit}`
    })

    const childrenCharged = SqlSchema.single({
      Request: Schema.String,
      Result: Schema.Struct({ charged: Schema.BigInt }),
      execute: (id) => sql`SELECT COALESCE(sum(credits_charged), 0)::text AS charged FROM runs WHERE parent_run_id = ${id}`
    })

    const cancelled = SqlSchema.findAll({
      Request: Schema.Array(RunId),
      Result: Schema.Struct({ id: RunId }),
      execute: (ids) => sql`SELECT id FROM runs WHERE id IN ${sql.in(ids)} AND cancel_requested_at IS NOT NULL`
    })

    const appendEvents = SqlSchema.void({
      Request: Schema.Struct({ runId: Schema.String, events: Schema.Array(Schema.Struct({ seq: Schema.Number, payload: Schema.Unknown })) }),
      execute: ({ events, runId }) =>
        sql`
          INSERT INTO run_events (run_id, seq, payload)
          SELECT ${runId}, e.seq, e.payload FROM jsonb_to_recordset(${JSON.stringify(events)}::jsonb) AS e(seq integer, payload jsonb)
          ON CONFLICT (run_id, seq) DO NOTHING`
    })

    // An abandoned attempt's events are kept, marked, and left out of every read (docs/runs.md, "A step tried again").
    const eventsAfter = SqlSchema.findAll({
      Request: Schema.Struct({ runId: Schema.String, after: Schema.Number, limit: Schema.Number }),
      Result: Schema.Struct({ seq: Schema.Number, payload: Schema.Unknown }),
      execute: ({ after, limit, runId }) =>
        sql`
          SELECT seq, payload FROM run_events
          WHERE run_id = ${runId} AND seq > ${after} AND payload->>'superseded' IS NULL
          ORDER BY seq LIMIT ${limit}`
    })

    const shownUpTo = SqlSchema.single({
      Request: Schema.Struct({ runId: Schema.String, seq: Schema.Number }),
      Result: Schema.Struct({ shown: Schema.Number }),
      execute: ({ runId, seq }) =>
        sql`
          SELECT count(*)::int AS shown FROM run_events
          WHERE run_id = ${runId} AND seq <= ${seq} AND payload->>'superseded' IS NULL`
    })

    const stepAttempts = SqlSchema.findAll({
      Request: Schema.String,
      Result: Schema.Struct({ step: Schema.String, attempt: Schema.Number }),
      execute: (runId) =>
        sql`
          SELECT payload->>'step' AS step, max((payload->>'attempt')::int) AS attempt
          FROM run_events WHERE run_id = ${runId} AND payload->>'step' IS NOT NULL
          GROUP BY 1`
    })

    const supersede = SqlSchema.void({
      Request: Schema.Struct({ runId: Schema.String, step: Schema.String, attempt: Schema.Number }),
      execute: ({ attempt, runId, step }) =>
        sql`
          UPDATE run_events SET payload = payload || '{"superseded": true}'::jsonb
          WHERE run_id = ${runId} AND payload->>'step' = ${step} AND (payload->>'attempt')::int < ${attempt}
            AND payload->>'superseded' IS NULL`
    })

    const logState = SqlSchema.single({
      Request: Schema.String,
      Result: Schema.Struct({ last: Schema.Number, ended: Schema.Boolean }),
      execute: (runId) =>
        sql`
          SELECT coalesce(max(seq), 0)::int AS last,
                 coalesce(bool_or(payload->>'type' IN ('complete', 'error')), false) AS ended
          FROM run_events WHERE run_id = ${runId}`
    })

    return {
      byId: (partition: Partition, id: RunId) => Effect.orDie(findOne({ id, ...partition })),
      list: (partition: Partition, query: Omit<typeof ListQuery.Type, "accountId" | "endUserId">) =>
        Effect.map(findMany({ ...partition, ...query }), (rows) => ({ data: rows.slice(0, query.limit), hasMore: rows.length > query.limit })).pipe(Effect.orDie),
      enqueue: (run: Omit<Parameters<typeof insertQueued>[0], "accountId" | "endUserId"> & { partition: Partition }) =>
        Effect.orDie(insertQueued({ ...run, ...run.partition })),
      enqueueTurn: (run: { id: RunId; partition: Partition; agentId: AgentId; agent: string; sessionId: SessionId }) =>
        Effect.orDie(insertTurn({ id: run.id, ...run.partition, agentId: run.agentId, agent: run.agent, sessionId: run.sessionId })),
      closeSession: (sessionId: SessionId) => Effect.orDie(closeSession(sessionId)),
      background: (id: RunId) =>
        Effect.map(findBackground(id), Option.map((row) => ({ ...row, request: parsed(row.request) }))).pipe(Effect.orDie),
      started: (id: RunId) => Effect.orDie(started(id)),
      /** The end of a background run, once: false when it had already ended. */
      finish: (id: RunId, status: string, outcome: RunOutcome, incompleteReason: string | null) =>
        Effect.map(finishing({
          id,
          status,
          failureCode: outcome.failureCode,
          failureMessage: outcome.failureMessage,
          incompleteReason,
          inputTokens: outcome.inputTokens,
          outputTokens: outcome.outputTokens,
          creditsCharged: outcome.creditsCharged,
          answerChars: outcome.answerChars,
          deniedTools: outcome.deniedTools,
          output: outcome.output ?? ""
        }), (rows) => rows.length > 0).pipe(Effect.orDie),
      /** Asks a background run of the caller's to stop: false when the caller has no such background run. */
      requestCancel: (partition: Partition, id: RunId) =>
        Effect.map(cancelling({ id, ...partition }), (rows) => rows.length > 0).pipe(Effect.orDie),
      cancelled: (ids: ReadonlyArray<RunId>) =>
        ids.length === 0 ? Effect.succeed([]) : Effect.map(cancelled(ids), (rows) => rows.map((row) => row.id)).pipe(Effect.orDie),
      appendEvents: (runId: RunId, events: ReadonlyArray<{ seq: number; payload: unknown }>) =>
        events.length === 0 ? Effect.void : Effect.orDie(appendEvents({ runId, events })),
      eventsAfter: (runId: RunId, after: number, limit = 500) =>
        Effect.map(eventsAfter({ runId, after, limit }), (rows) => rows.map((row) => ({ seq: row.seq, payload: parsed(row.payload) as { type: string } }))).pipe(Effect.orDie),
      logState: (runId: RunId) => Effect.orDie(logState(runId)),
      /** How many of the run's events up to `seq` a read shows (the superseded left out). */
      shownUpTo: (runId: RunId, seq: number) => Effect.orDie(Effect.map(shownUpTo({ runId, seq }), (row) => row.shown)),
      /** The last attempt the log holds of each step that told events in it (`attempt` of its events). */
      stepAttempts: (runId: RunId) => Effect.orDie(stepAttempts(runId)),
      /** Marks the events of `step`'s attempts before `attempt` superseded: no read returns them any more. */
      supersede: (runId: RunId, step: string, attempt: number) => Effect.orDie(supersede({ runId, step, attempt })),
      stranded: (seconds: number, limit = 500) => Effect.orDie(stranded({ seconds, limit })),
      /** The credits a run's subagents recorded (each its steps' and its own subagents'). */
      childrenCharged: (id: RunId) => Effect.orDie(Effect.map(childrenCharged(id), (row) => row.charged))
    } as const
  })
}) {}
