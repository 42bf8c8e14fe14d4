import { RunId } from "../runtime/Domain.js"
import type * as Prompt from "@effect/ai/Prompt"
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import type * as Statement from "@effect/sql/Statement"
import { Effect, Option, Schema } from "effect"
import { SessionId, UserId } from "../platform/Ids.js"
import type { Partition } from "../identity/Partition.js"
import { Json } from "../platform/Rows.js"
import { commitLogWith } from "./LogRepo.js"
import {
  LoggedEventRow,
  type QueuedTurn,
  QueuedTurnRow,
  type SessionRow,
  SessionRowSchema,
  type SessionStatus,
  type TreeTurn,
  TurnRowSchema
} from "./Rows.js"
import { pathTo, type Tree, visibleTree } from "./Tree.js"


const SESSION = `s.id, s.agent_id, a.identifier AS agent_identifier, s.account_id, s.end_user_id, s.environment_id,
  s.title, s.metadata, s.status, s.created_at, s.updated_at, s.leaf_turn, s.fork_of, s.fork_turn`

const Positions = Schema.Struct({
  seq: Schema.NullOr(Schema.NumberFromString),
  turn: Schema.NullOr(Schema.Number),
  leaf: Schema.NullOr(Schema.Number)
})
const ChainTurn = Schema.Struct({
  ...TurnRowSchema.fields,
  sessionId: SessionId,
  depth: Schema.Number
})
const ForkRow = Schema.Struct({
  id: SessionId,
  from: SessionId,
  turn: Schema.Number,
  accountId: UserId,
  endUserId: Schema.String
})
const InFlight = Schema.Struct({ seq: Schema.NumberFromString, turn: Schema.Number })
const LastTurn = Schema.Struct({ sessionId: SessionId, messages: Json(Schema.Array(Schema.Unknown)) })
const SessionTurn = Schema.Struct({ id: SessionId, turn: Schema.Number })

/** Sessions, their turns (history) and event logs. SQL errors are defects here. */
export class SessionsRepo extends Effect.Service<SessionsRepo>()("atrium/sessions/SessionsRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const insertRow = SqlSchema.void({
      Request: Schema.Struct({
        id: SessionId,
        agentId: Schema.String,
        accountId: UserId,
        endUserId: Schema.String,
        environmentId: Schema.NullOr(Schema.String),
        title: Schema.NullOr(Schema.String),
        metadata: Schema.parseJson(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
      }),
      execute: (session) =>
        sql`
          INSERT INTO sessions (id, agent_id, account_id, end_user_id, environment_id, title, metadata)
          VALUES (${session.id}, ${session.agentId}, ${session.accountId}, ${session.endUserId},
                  ${session.environmentId}, ${session.title}, ${session.metadata}::jsonb)`
    })
    const insert = (session: {
      id: SessionId
      agentId: string
      partition: Partition
      environmentId: string | null
      title: string | null
      metadata: Record<string, unknown>
    }) =>
      Effect.orDie(insertRow({
        id: session.id,
        agentId: session.agentId,
        accountId: session.partition.accountId,
        endUserId: session.partition.endUserId,
        environmentId: session.environmentId,
        title: session.title,
        metadata: session.metadata
      }))

    const sessionById = SqlSchema.findOne({
      Request: SessionId,
      Result: SessionRowSchema,
      execute: (id) => sql`SELECT ${sql.literal(SESSION)} FROM sessions s JOIN agents a ON a.id = s.agent_id WHERE s.id = ${id}`
    })
    const byId = (id: SessionId) => Effect.orDie(sessionById(id))

    const sessionPage = SqlSchema.findAll({
      Request: Schema.Struct({
        accountId: UserId,
        endUserId: Schema.String,
        limit: Schema.Number,
        before: Schema.NullOr(Schema.Struct({ createdAt: Schema.DateFromSelf, id: SessionId })),
        /** A `LIKE` pattern (wildcards in the words escaped) over the title and the texts of the session's turns. */
        matching: Schema.NullOr(Schema.String)
      }),
      Result: SessionRowSchema,
      execute: (page) =>
        sql`
          SELECT ${sql.literal(SESSION)} FROM sessions s JOIN agents a ON a.id = s.agent_id
          WHERE s.account_id = ${page.accountId} AND s.end_user_id = ${page.endUserId}
            ${page.before === null ? sql`` : sql`AND (s.created_at, s.id) < (${page.before.createdAt}, ${page.before.id})`}
            ${page.matching === null ? sql`` : sql`AND (s.title ILIKE ${page.matching} OR EXISTS (
              SELECT 1 FROM session_turns t
              CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(t.messages) = 'array' THEN t.messages ELSE '[]'::jsonb END) m
              CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(m->'content') = 'array' THEN m->'content'
                                                           ELSE jsonb_build_array(jsonb_build_object('text', m->'content')) END) c
              WHERE t.session_id = s.id AND c->>'text' ILIKE ${page.matching}))`}
          ORDER BY s.created_at DESC, s.id DESC LIMIT ${page.limit + 1}`
    })
    /** The partition's sessions, newest first, `limit + 1` rows so the caller can tell `has_more`. */
    const list = (
      partition: Partition,
      limit: number,
      before: Option.Option<{ createdAt: Date; id: SessionId }>,
      search: Option.Option<string> = Option.none()
    ) =>
      Effect.orDie(sessionPage({
        accountId: partition.accountId,
        endUserId: partition.endUserId,
        limit,
        before: Option.getOrNull(before),
        // The words as typed: `%` and `_` in them are letters, not wildcards.
        matching: Option.getOrNull(Option.map(search, (words) => `%${words.replace(/[\\%_]/g, (c) => `\\${c}`)}%`))
      }))

    const lastTurnsOf = SqlSchema.findAll({
      Request: Schema.Array(Schema.String),
      Result: LastTurn,
      execute: (ids) =>
        sql`
          SELECT s.id AS session_id, t.messages FROM sessions s
          JOIN session_turns t ON t.turn = s.leaf_turn
            AND t.session_id = CASE WHEN s.leaf_turn <= s.fork_turn THEN s.fork_of ELSE s.id END
          WHERE ${sql.in("s.id", ids)}`
    })
    /** The messages of each session's leaf turn (sessions without a turn are absent). */
    const lastTurns = (ids: ReadonlyArray<SessionId>) =>
      ids.length === 0
        ? Effect.succeed(new Map<SessionId, ReadonlyArray<Prompt.MessageEncoded>>())
        : lastTurnsOf(ids).pipe(
          // Written by `commitLog` from the prompt's own encoding: read back as it was written.
          Effect.map((rows) => new Map(rows.map((row) => [row.sessionId, row.messages as ReadonlyArray<Prompt.MessageEncoded>]))),
          Effect.orDie
        )

    const titleRow = SqlSchema.void({
      Request: Schema.Struct({ id: SessionId, title: Schema.NullOr(Schema.String) }),
      execute: ({ id, title }) => sql`UPDATE sessions SET title = ${title}, updated_at = now() WHERE id = ${id}`
    })
    const setTitle = (id: SessionId, title: string | null) => Effect.orDie(titleRow({ id, title }))

    const statusRow = SqlSchema.void({
      Request: Schema.Struct({ id: SessionId, status: Schema.Literal("idle", "running", "waiting_approval") }),
      execute: ({ id, status }) => sql`UPDATE sessions SET status = ${status}, updated_at = now() WHERE id = ${id}`
    })
    const setStatus = (id: SessionId, status: SessionStatus) => Effect.orDie(statusRow({ id, status }))

    const Workspace = Schema.Struct({ accountId: UserId, endUserId: Schema.String, id: SessionId })
    const moveSession = SqlSchema.void({
      Request: Schema.Struct({ id: SessionId, to: Schema.String }),
      execute: ({ id, to }) => sql`UPDATE sessions SET end_user_id = ${to}, updated_at = now() WHERE id = ${id}`
    })
    const moveWorkspace = SqlSchema.void({
      Request: Schema.Struct({ ...Workspace.fields, to: Schema.String }),
      execute: (files) =>
        sql`
          UPDATE workspace_files SET end_user_id = ${files.to}
          WHERE account_id = ${files.accountId} AND end_user_id = ${files.endUserId} AND workspace = ${files.id}`
    })
    /** Moves a session (and its workspace files) to another end user of the same account. */
    const adopt = (id: SessionId, accountId: UserId, from: string, to: string) =>
      sql.withTransaction(Effect.gen(function*() {
        yield* moveSession({ id, to })
        yield* moveWorkspace({ accountId, endUserId: from, id, to })
      })).pipe(Effect.orDie)

    const deleteWorkspace = SqlSchema.void({
      Request: Workspace,
      execute: (files) =>
        sql`
          DELETE FROM workspace_files
          WHERE account_id = ${files.accountId} AND end_user_id = ${files.endUserId} AND workspace = ${files.id}`
    })
    const deleteSession = SqlSchema.void({
      Request: SessionId,
      execute: (id) => sql`DELETE FROM sessions WHERE id = ${id}`
    })
    /** Removes the session, its history, its log and its workspace files. */
    const remove = (session: SessionRow) =>
      sql.withTransaction(Effect.gen(function*() {
        yield* detachForks(session.id)
        yield* deleteWorkspace({ accountId: session.accountId, endUserId: session.endUserId, id: session.id })
        yield* deleteSession(session.id)
      })).pipe(Effect.orDie)

    // The session and its fork chain (origin, origin's origin, ...): each level's own turns (those after the turn it
    // was forked at), up to the turn the level below was forked at. Turn numbers of the levels do not overlap.
    const chainTurns = SqlSchema.findAll({
      Request: Schema.Struct({ id: SessionId, messages: Schema.Boolean }),
      Result: ChainTurn,
      execute: ({ id, messages }) =>
        sql`
          WITH RECURSIVE chain AS (
            SELECT id, fork_of, fork_turn, NULL::integer AS upto, 0 AS depth FROM sessions WHERE id = ${id}
            UNION ALL
            SELECT s.id, s.fork_of, s.fork_turn, LEAST(c.upto, c.fork_turn), c.depth + 1
            FROM chain c JOIN sessions s ON s.id = c.fork_of
          )
          SELECT t.session_id, c.depth, t.turn, t.parent_turn, t.run_id,
                 ${messages ? sql`t.messages, t.chars` : sql`'[]'::jsonb AS messages, 0 AS chars`}, t.status, t.created_at
          FROM chain c JOIN session_turns t ON t.session_id = c.id
          WHERE (c.upto IS NULL OR t.turn <= c.upto) AND (c.fork_turn IS NULL OR t.turn > c.fork_turn)
          ORDER BY t.turn`
    })
    const forkTurnOf = SqlSchema.findOne({
      Request: SessionId,
      Result: Schema.Struct({ forkTurn: Schema.NullOr(Schema.Number) }),
      execute: (id) => sql`SELECT fork_turn FROM sessions WHERE id = ${id}`
    })
    /**
     * The session's tree (`Tree.ts`): its own turns, and for a fork the path it shares with its origin, read where it
     * is (nothing is copied). Without `messages`, only the shape (a fork checks its turn by it).
     */
    const tree = (id: SessionId, options: { readonly messages: boolean } = { messages: true }): Effect.Effect<Tree> =>
      Effect.gen(function*() {
        const forkTurn = Option.match(yield* forkTurnOf(id), { onNone: () => null, onSome: (row) => row.forkTurn })
        // Written by `commitLog` from the prompt's own encoding: read back as it was written.
        const rows = (yield* chainTurns({ id, messages: options.messages })) as unknown as ReadonlyArray<TreeTurn & { depth: number }>
        return visibleTree(forkTurn, rows.filter((row) => row.depth === 0), rows.filter((row) => row.depth > 0))
      }).pipe(Effect.orDie)
    /**
     * `read` in one snapshot of the database: the session's row and its tree as one moment had them. Read apart, a
     * turn ending between the two showed a tree holding that turn under a leaf from before it (its branch hidden:
     * the chat dropped the turn it had just shown, once in a CI run of the browser suite, session 30).
     */
    const inOneSnapshot = <A, E, R>(read: Effect.Effect<A, E, R>) =>
      sql.withTransaction(Effect.zipRight(sql`SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY`, read)).pipe(
        Effect.catchTag("SqlError", Effect.die)
      )
    /** The turns from the root to `leaf`, the history as that branch has it. */
    const path = (id: SessionId, leaf: number | null) => Effect.map(tree(id), (found) => pathTo(found, leaf))

    const ownTurn = SqlSchema.single({
      Request: Schema.Struct({ id: SessionId, turn: Schema.Number }),
      Result: Schema.Struct({ own: Schema.Boolean, forkTurn: Schema.NullOr(Schema.Number) }),
      execute: ({ id, turn }) =>
        sql`
          SELECT EXISTS (SELECT 1 FROM session_turns t WHERE t.session_id = ${id} AND t.turn = ${turn}
                           AND (s.fork_turn IS NULL OR t.turn > s.fork_turn)) AS own, s.fork_turn
          FROM sessions s WHERE s.id = ${id}`
    })
    /**
     * Whether the session's tree has `turn`: one indexed lookup for its own turns (a fork, a switch, a branch check
     * do not read a long session's tree); a fork's shared turn is looked for on the path it shares.
     */
    const hasTurn = (id: SessionId, turn: number) =>
      Effect.gen(function*() {
        const found = yield* ownTurn({ id, turn })
        if (found.own) return true
        if (found.forkTurn === null || turn > found.forkTurn) return false
        return (yield* tree(id, { messages: false })).turns.has(turn)
      }).pipe(Effect.catchTag("NoSuchElementException", () => Effect.succeed(false)), Effect.orDie)

    const forkRow = SqlSchema.void({
      Request: ForkRow,
      execute: (fork) =>
        sql`
          INSERT INTO sessions (id, agent_id, account_id, end_user_id, environment_id, title, metadata, leaf_turn, fork_of, fork_turn)
          SELECT ${fork.id}, agent_id, account_id, end_user_id, environment_id, title, metadata, ${fork.turn}, id, ${fork.turn}
          FROM sessions WHERE id = ${fork.from} AND account_id = ${fork.accountId} AND end_user_id = ${fork.endUserId}`
    })
    /** A new session that shares `from`'s history up to `turn` (the fork-origin pointer, no copy). */
    const fork = (fork: typeof ForkRow.Type) => Effect.orDie(forkRow(fork))

    const forksOf = SqlSchema.findAll({
      Request: SessionId,
      Result: Schema.Struct({ id: SessionId }),
      execute: (id) => sql`SELECT id FROM sessions WHERE fork_of = ${id}`
    })
    const copyTurns = SqlSchema.void({
      Request: Schema.Struct({ id: SessionId, turns: Schema.String }),
      execute: ({ id, turns }) =>
        sql`
          INSERT INTO session_turns (session_id, turn, parent_turn, run_id, messages, chars, status, created_at)
          SELECT ${id}, turn, parent_turn, run_id, messages, chars, status, created_at FROM jsonb_to_recordset(${turns}::jsonb)
            AS t(turn integer, parent_turn integer, run_id text, messages jsonb, chars integer, status text, created_at timestamptz)
          ON CONFLICT (session_id, turn) DO NOTHING`
    })
    const unfork = SqlSchema.void({
      Request: SessionId,
      execute: (id) => sql`UPDATE sessions SET fork_of = NULL, fork_turn = NULL WHERE id = ${id}`
    })
    /**
     * Before a session is deleted, each fork of it gets its own copy of the path it shared (the same turn numbers, so
     * its own turns' parents still name them) and stops pointing at it: deleting an origin takes nothing from a fork.
     */
    const detachForks = (id: SessionId) =>
      Effect.gen(function*() {
        for (const { id: forkId } of yield* forksOf(id)) {
          const shared = [...(yield* tree(forkId)).turns.values()].filter((turn) => turn.sessionId !== forkId)
          yield* copyTurns({
            id: forkId,
            turns: JSON.stringify(shared.map((turn) => ({
              turn: turn.turn,
              parent_turn: turn.parentTurn,
              run_id: turn.runId,
              messages: turn.messages,
              chars: turn.chars,
              status: turn.status,
              created_at: turn.createdAt.toISOString()
            })))
          })
          yield* unfork(forkId)
        }
      })

    const positionsOf = SqlSchema.single({
      Request: SessionId,
      Result: Positions,
      execute: (id) =>
        sql`
          SELECT (SELECT max(seq) FROM session_events WHERE session_id = ${id})::text AS seq,
                 GREATEST((SELECT max(turn) FROM session_turns WHERE session_id = ${id}),
                          (SELECT max(turn) FROM session_events WHERE session_id = ${id}),
                          (SELECT max(turn) FROM session_queue WHERE session_id = ${id}),
                          (SELECT fork_turn FROM sessions WHERE id = ${id})) AS turn,
                 (SELECT leaf_turn FROM sessions WHERE id = ${id}) AS leaf`
    })
    /** Where a reloaded session goes on: the last `seq` and the last turn number (sent turns included). */
    const positions = (id: SessionId) =>
      positionsOf(id).pipe(
        Effect.map((row) => ({ seq: row.seq ?? 0, turn: row.turn ?? 0, leaf: row.leaf })),
        Effect.orDie
      )

    // `seq` comes as text (a bigint) but is ordered as the number it is: the table's column, not the text.
    const eventsAfterSeq = SqlSchema.findAll({
      Request: Schema.Struct({ id: SessionId, seq: Schema.Number, limit: Schema.Number }),
      Result: LoggedEventRow,
      execute: ({ id, limit, seq }) =>
        sql`
          SELECT seq::text AS seq, turn, payload FROM session_events
          WHERE session_id = ${id} AND seq > ${seq} ORDER BY session_events.seq LIMIT ${limit}`
    })
    /** Logged events after `seq`, in order, at most `limit`. */
    const eventsAfter = (id: SessionId, seq: number, limit: number) => Effect.orDie(eventsAfterSeq({ id, seq, limit }))

    const inFlightTurn = SqlSchema.findOne({
      Request: SessionId,
      Result: InFlight,
      execute: (id) =>
        sql`
          SELECT (min(seq) - 1)::text AS seq, max(turn) AS turn FROM session_events
          WHERE session_id = ${id} AND turn = (SELECT max(turn) FROM session_events WHERE session_id = ${id})
            AND NOT EXISTS (
              SELECT 1 FROM session_events e WHERE e.session_id = ${id}
                AND e.turn = (SELECT max(turn) FROM session_events WHERE session_id = ${id})
                AND e.payload->>'type' IN ('complete', 'error'))
          HAVING count(*) > 0`
    })
    /**
     * The turn in flight, if any (its events are logged and none ended it), and the `seq` before its first event
     * (its `run.created`).
     */
    const inFlight = (id: SessionId) => Effect.orDie(inFlightTurn(id))

    const endedTurn = SqlSchema.single({
      Request: SessionTurn,
      Result: Schema.Struct({ ended: Schema.Boolean }),
      execute: ({ id, turn }) =>
        sql`
          SELECT EXISTS (SELECT 1 FROM session_events WHERE session_id = ${id} AND turn = ${turn}
            AND payload->>'type' IN ('complete', 'error')) AS ended`
    })
    /** Whether the turn has its terminal event in the log (`run.completed` or `run.failed`; one at most: 0015). */
    const turnEnded = (id: SessionId, turn: number) =>
      endedTurn({ id, turn }).pipe(Effect.map((row) => row.ended), Effect.orDie)

    const inFlightStart = (id: SessionId) => Effect.map(inFlight(id), Option.map((turn) => turn.seq))

    const turnStartSeq = SqlSchema.single({
      Request: SessionTurn,
      Result: Schema.Struct({ seq: Schema.NumberFromString }),
      execute: ({ id, turn }) =>
        sql`
          SELECT COALESCE((SELECT min(seq) - 1 FROM session_events WHERE session_id = ${id} AND turn = ${turn}),
                          (SELECT max(seq) FROM session_events WHERE session_id = ${id}), 0)::text AS seq`
    })
    /**
     * Where a reader of one turn starts: the `seq` before the turn's first event, or, when the turn has logged nothing
     * yet (it waits behind another), the log's last `seq`. One statement, so both are of one snapshot: a turn's first
     * event that was not in it comes after that last `seq`.
     */
    const turnStart = (id: SessionId, turn: number) =>
      turnStartSeq({ id, turn }).pipe(Effect.map((row) => row.seq), Effect.orDie)

    const dequeueEndedTurns = SqlSchema.void({
      Request: SessionId,
      execute: (id) =>
        sql`
          DELETE FROM session_queue q WHERE q.session_id = ${id} AND (
            EXISTS (SELECT 1 FROM session_turns t WHERE t.session_id = q.session_id AND t.turn = q.turn)
            OR EXISTS (SELECT 1 FROM session_events e WHERE e.session_id = q.session_id AND e.turn = q.turn
                         AND e.payload->>'type' IN ('complete', 'error')))`
    })
    /**
     * Forgets the sent turns that did end (in the history, or with a last event in the log) though their row stayed:
     * a runner that stopped between the two. They must not run again.
     */
    const dequeueEnded = (id: SessionId) => Effect.orDie(dequeueEndedTurns(id))

    const queuedTurnsOf = SqlSchema.findAll({
      Request: SessionId,
      Result: QueuedTurnRow,
      execute: (sessionId) =>
        sql`
          SELECT turn, message, budget::text AS budget, parent_turn, branch FROM session_queue
          WHERE session_id = ${sessionId} ORDER BY turn`
    })
    /** Sent turns not yet ended, oldest first: what a reloaded session still owes. */
    const queuedTurns = (id: SessionId): Effect.Effect<ReadonlyArray<QueuedTurn>> =>
      queuedTurnsOf(id).pipe(
        Effect.map((rows) =>
          rows.map(({ branch, budget, message, parentTurn, turn }) => ({
            turn,
            message,
            budget,
            parent: branch ? Option.some(parentTurn) : Option.none()
          }))
        ),
        Effect.orDie
      )

    const commitLog = commitLogWith(sql)

    const notifyChannel = SqlSchema.void({
      Request: Schema.Struct({ channel: Schema.String, payload: Schema.String }),
      execute: ({ channel, payload }) => sql`SELECT pg_notify(${channel}, ${payload})`
    })
    /** Tells every runner listening on `channel` (cluster mode's live fan-out of session events). */
    const notify = (channel: string, payload: string) => Effect.orDie(notifyChannel({ channel, payload }))

    /**
     * What the ledger holds for a turn's steps, as a SQL expression: its entries keyed `session:<id>:<turn>:<step>`
     * (RunEngine's `chargeKey`), `turn` an expression of the statement it goes in. `id` is the encoded session id: the
     * statements it goes in pass their request's encoded side.
     */
    const turnCredits = (id: typeof SessionId.Encoded, turn: Statement.Fragment, maxSteps: number) =>
      sql`coalesce((
        SELECT -sum(l.amount) FROM ledger_entries l
        WHERE l.scope = 'run' AND l.idempotency_key IN (
          SELECT 'session:' || ${id} || ':' || ${turn} || ':' || step FROM generate_series(1, ${maxSteps}) AS step)
      ), 0)`

    const interruptTurn = SqlSchema.void({
      Request: Schema.Struct({ id: SessionId, turn: Schema.NullOr(Schema.Number), maxSteps: Schema.Number }),
      execute: ({ id, maxSteps, turn }) =>
        sql`
          UPDATE runs SET status = 'failed', failure_code = 'interrupted',
            failure_message = 'The runner of this turn stopped during it.', finished_at = now(),
            credits_charged = ${turnCredits(id, sql`own.turn`, maxSteps)}
          FROM runs r CROSS JOIN LATERAL (
            SELECT coalesce((
              SELECT e.turn FROM session_events e WHERE e.session_id = ${id} AND e.payload->>'type' = 'preparing'
                AND e.payload->>'run_id' = r.id LIMIT 1), ${turn}::int) AS turn
          ) own
          WHERE runs.id = r.id AND r.session_id = ${id} AND r.status = 'running'`
    })
    /**
     * Closes the runs a dead runner left `running` in this session, each with the credits the ledger holds for its
     * own turn's steps (keyed `session:<id>:<turn>:<step>`, RunEngine's `chargeKey`): a run's recorded credits match
     * what its payer was charged, even when its runner died between the two. A run's turn is the one of its
     * `preparing` event (`run.created`, always logged before the run's row: docs/sessions.md "Faults"); `turn` (the
     * one in flight) only for a run without it, and none of the ledger's credits for a run with neither.
     * Not only the turn in flight: an earlier turn's run stays `running` when its turn was closed in the log but the
     * runner stopped (or the database restarted) before this statement, which is a statement of its own.
     */
    const interruptRuns = (id: SessionId, turn: Option.Option<number>, maxSteps: number) =>
      Effect.orDie(interruptTurn({ id, turn: Option.getOrNull(turn), maxSteps }))

    const recountTurn = SqlSchema.void({
      Request: Schema.Struct({ id: SessionId, runId: RunId, turn: Schema.Number, maxSteps: Schema.Number }),
      execute: ({ id, maxSteps, runId, turn }) =>
        sql`
          UPDATE runs SET credits_charged = ${turnCredits(id, sql`${turn}::int`, maxSteps)}
          WHERE id = ${runId} AND session_id = ${id} AND status <> 'running'`
    })
    /**
     * Counts the credits of a cut turn's run again, from the ledger, once its hold was voided for good
     * (`RunPayer.voidHold`): a settle of the cut turn that reached the wallet before the void but after the load's
     * count (`interruptRuns`) is in the ledger by then, and none can post after it (docs/sessions.md, "Faults").
     */
    const recountRun = (id: SessionId, runId: RunId, turn: number, maxSteps: number) =>
      Effect.orDie(recountTurn({ id, runId, turn, maxSteps }))

    const runStartOf = SqlSchema.single({
      Request: Schema.Struct({ id: SessionId, turn: Schema.Number, runId: RunId }),
      Result: Schema.Struct({ logged: Schema.Boolean }),
      execute: ({ id, runId, turn }) =>
        sql`
          SELECT EXISTS (SELECT 1 FROM session_events WHERE session_id = ${id} AND turn = ${turn}
            AND payload->>'type' = 'preparing' AND payload->>'run_id' = ${runId}) AS logged`
    })
    /** Whether the turn's `preparing` event (`run.created`) naming `runId` is in the log. */
    const runStarted = (id: SessionId, turn: number, runId: RunId) =>
      runStartOf({ id, turn, runId }).pipe(Effect.map((row) => row.logged), Effect.orDie)

    return {
      setTitle,
      insert,
      byId,
      list,
      lastTurns,
      setStatus,
      adopt,
      remove,
      tree,
      inOneSnapshot,
      path,
      hasTurn,
      fork,
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
      interruptRuns,
      recountRun,
      runStarted
    } as const
  })
}) {}
