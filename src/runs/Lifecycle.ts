import { Context, type Effect } from "effect"
import type { CallerIdentity } from "../identity/Domain.js"
import type { InvalidRequest, NotFound, ServiceUnavailable } from "../platform/Errors.js"
import type { UserId } from "../platform/Ids.js"
import type { RunId } from "../runtime/Domain.js"
import type { RunRow } from "./Repo.js"
import type { runObject } from "./Views.js"

/** How a background run ended, as whoever is told of it reads it. */
export interface RunEnded {
  /** The account that ran it and pays: who is told (its webhooks). */
  readonly accountId: UserId
  /** The run as `GET /v1/runs/:id` answers it once it has ended. */
  readonly run: ReturnType<typeof runObject>
  /** The `/v1/responses` response the run answers, if any. */
  readonly responseId: string | null
}

/**
 * The port through which a background run's end is told (issue 43; the webhooks module implements it, wired in
 * Server.ts, so runs does not depend on how an end is delivered). The run's workflow calls it inside its recorded
 * `finish` activity: a runner that dies after the run's end was written but before the activity was recorded tells
 * it again on resume, so `ended` must be idempotent by the run's id and status.
 */
export class RunEnds extends Context.Tag("atrium/runs/RunEnds")<RunEnds, {
  readonly ended: (event: RunEnded) => Effect.Effect<void>
}>() {}

/**
 * The port through which `POST /v1/runs/:id/cancel` stops a run that is a session's turn: the turn is the session's to
 * stop (as its interrupt route does), and sessions build on runs, so the sessions module implements it (wired in
 * Server.ts) and runs does not import sessions. Answers the run once it has ended, as `Sessions.cancelTurn` does.
 */
export class TurnCancels extends Context.Tag("atrium/runs/TurnCancels")<TurnCancels, {
  readonly cancel: (caller: CallerIdentity, runId: RunId) => Effect.Effect<RunRow, NotFound | InvalidRequest | ServiceUnavailable>
}>() {}
