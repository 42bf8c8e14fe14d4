import type * as Prompt from "@effect/ai/Prompt"
import { createHash } from "node:crypto"
import { type Option, Schema } from "effect"
import type { Fence } from "../platform/cluster/Fences.js"
import { Json } from "../platform/Rows.js"
import { RunId } from "../runtime/Domain.js"
import type { RunOutcome, RunRecord } from "../runtime/Repo.js"
import { AgentId, EnvironmentId, SessionId, UserId } from "../platform/Ids.js"

/**
 * A turn's run id, from the turn's identity (its session and number): known the moment the session numbers the turn,
 * before it runs, so a message sent with `background: true` answers its run at once (docs/sessions.md), and the
 * same on whichever runner runs the turn. A turn runs once (a turn cut by a crash is closed, not run again).
 */
export const turnRunId = (sessionId: SessionId, turn: number) =>
  RunId.make(`run_${createHash("sha256").update(`${sessionId}\n${turn}`).digest("base64url").replace(/[-_]/g, "").slice(0, 20)}`)

/** The rows of sessions, their history, queue and event log, and what one session writes at once (`commitLog`). */
export type SessionStatus = "idle" | "running" | "waiting_approval"

export const SessionRowSchema = Schema.Struct({
  id: SessionId,
  agentId: AgentId,
  agentIdentifier: Schema.String,
  accountId: UserId,
  endUserId: Schema.String,
  environmentId: Schema.NullOr(EnvironmentId),
  title: Schema.NullOr(Schema.String),
  metadata: Schema.transform(Schema.NullOr(Json(Schema.Record({ key: Schema.String, value: Schema.Unknown }))), Schema.Record({ key: Schema.String, value: Schema.Unknown }), {
    strict: true,
    decode: (metadata) => metadata ?? {},
    encode: (metadata) => metadata
  }),
  status: Schema.Literal("idle", "running", "waiting_approval"),
  createdAt: Schema.DateFromSelf,
  updatedAt: Schema.DateFromSelf,
  /** The current leaf: every read of the history follows the path from the root to it (null before a first turn). */
  leafTurn: Schema.NullOr(Schema.Number),
  /** A fork's origin and the turn it was forked at (docs/sessions.md "Branches"). */
  forkOf: Schema.NullOr(Schema.String),
  forkTurn: Schema.NullOr(Schema.Number)
})
export type SessionRow = typeof SessionRowSchema.Type

export const TurnRowSchema = Schema.Struct({
  turn: Schema.Number,
  /** The turn it answers after (issue 44: a session is a tree of turns); null for a first turn. */
  parentTurn: Schema.NullOr(Schema.Number),
  runId: RunId,
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
  /**
   * The turn it continues: given (a branch: regenerate, edit, a `previous_response_id`; `null` for the root), or none,
   * the session's leaf when it runs.
   */
  readonly parent?: Option.Option<number | null> | undefined
}

export const QueuedTurnRow = Schema.Struct({
  turn: Schema.Number,
  message: Schema.String,
  budget: Schema.OptionFromNullOr(Schema.BigInt),
  parentTurn: Schema.NullOr(Schema.Number),
  branch: Schema.Boolean
})

/** A turn of a session's tree as its reads see it (`SessionsRepo.tree`): own turns, and a fork's inherited path. */
export interface TreeTurn extends TurnRow {
  /** The session whose turn it is (the fork's origin for an inherited one). */
  readonly sessionId: SessionId
}

export const LoggedEventRow = Schema.Struct({
  seq: Schema.NumberFromString,
  turn: Schema.Number,
  payload: Json(Schema.Struct({ type: Schema.String, seq: Schema.Number }, { key: Schema.String, value: Schema.Unknown }))
})

/**
 * What one session writes at once to its log (see `SessionLog`): events, a new status, its run's row (started, or
 * with its outcome), the turn as history, and the queue's changes. Any part may be absent.
 */
export interface LogWrite {
  readonly sessionId: SessionId
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
  /** The session's current leaf from now on (null: before its first turn). */
  readonly leaf?: { readonly turn: number | null } | undefined
}
