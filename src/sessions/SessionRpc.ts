import * as Entity from "@effect/cluster/Entity"
import * as Rpc from "@effect/rpc/Rpc"
import { Schema } from "effect"
import { MultitaskStrategy, SessionBusy } from "./Domain.js"

/**
 * The session entity's contract (docs/architecture.md, "Contracts"): its RPCs, apart from the entity's
 * implementation (`Session.ts`), as Effect-TS/discord-bot keeps entity contracts apart from their runners.
 */

export class SessionGone extends Schema.TaggedError<SessionGone>()("SessionGone", { message: Schema.String }) {}


/**
 * `follower`: the runner whose stream follows the session, named by the runner (`SessionHub.self`): the owner tells
 * it the session's events from now on (docs/sessions.md, "Who is told").
 */
const Follower = Schema.optional(Schema.String)

/**
 * Queues a turn; answers at once with the turn's number (its events carry it), not when the turn ends. `parent`: the
 * turn it continues (a branch; null: a new root), absent for the session's leaf when it runs. `strategy`: see
 * `MultitaskStrategy` (absent: `enqueue`); `reject` while busy fails with `SessionBusy`.
 */
const Send = Rpc.make("Send", {
  payload: {
    message: Schema.String,
    follower: Follower,
    budget: Schema.NullOr(Schema.BigInt),
    parent: Schema.optional(Schema.NullOr(Schema.Number)),
    strategy: Schema.optional(MultitaskStrategy)
  },
  success: Schema.Struct({ turn: Schema.Number }),
  error: Schema.Union(SessionGone, SessionBusy.tagged)
})

/** Switches the session's current leaf (null: before the first turn); false while a turn runs or waits. */
const SetLeaf = Rpc.make("SetLeaf", {
  payload: { leaf: Schema.NullOr(Schema.Number) },
  success: Schema.Boolean,
  error: SessionGone
})

/** Stops the running turn, if any: true when one was stopped. */
const Interrupt = Rpc.make("Interrupt", { success: Schema.Boolean })

/**
 * Cancels one turn by its run's id (`POST /v1/runs/:id/cancel`, issue 43): the running turn is stopped as `Interrupt`
 * stops it; a queued one ends, cancelled, when its place comes, without running. False when neither is that run's.
 */
const CancelTurn = Rpc.make("CancelTurn", { payload: { runId: Schema.String }, success: Schema.Boolean })

/** Stops everything before the session is deleted: the running turn and every queued one. */
const Stop = Rpc.make("Stop", { success: Schema.Boolean })

/**
 * Loads the session if it is not loaded: loading closes a turn a crash left open, so a reader that wakes the session
 * first never waits for a turn that will not finish. With `follower`, answers once what was logged before it can be
 * read, and tells that runner what is logged from then on.
 */
const Wake = Rpc.make("Wake", { payload: { follower: Follower }, success: Schema.Boolean })

/** Reads the session's row again: its end user changed (adopt), and the next turn is paid and filed for the new one. */
const Reload = Rpc.make("Reload", { success: Schema.Boolean })

/**
 * A session as an `@effect/cluster` entity (entity id = session id): the one place its turns run, one at a time, in
 * the order they were sent. A turn runs in a fiber the entity owns, not in the request that sent it, so a client
 * that disconnects does not stop it; every event of the turn is written to the session's log (with a session-wide
 * `seq`) before live subscribers see it. An idle session passivates and is reloaded from the database, so a
 * conversation can go on after a restart or days later.
 */
export const Session = Entity.make("Session", [Send, Interrupt, CancelTurn, Stop, Wake, Reload, SetLeaf])
