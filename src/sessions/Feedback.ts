import type { SessionId } from "../platform/Ids.js"
import { Effect } from "effect"
import { type ListParams, pageOf } from "../platform/http/Lists.js"
import { FeedbackRepo, type FeedbackRow } from "./FeedbackRepo.js"
import { Sessions } from "./Sessions.js"
import type { CallerIdentity } from "../identity/Domain.js"

export interface FeedbackInput {
  readonly rating: "up" | "down"
  readonly reason?: string | undefined
  readonly share?: boolean | undefined
}

const view = (sessionId: SessionId, row: FeedbackRow) => ({
  session_id: sessionId,
  turn: row.turn,
  rating: row.rating,
  reason: row.reason,
  shared: row.shared,
  updated_at: row.updatedAt.toISOString()
})

/**
 * Thumbs up or down on a session's answers, by the session's own end user (issue 48; docs/sessions.md "Feedback").
 * Whoever cannot read the session gets the same 404 as for the session.
 */
export class TurnFeedback extends Effect.Service<TurnFeedback>()("atrium/sessions/TurnFeedback", {
  effect: Effect.gen(function*() {
    const sessions = yield* Sessions
    const feedback = yield* FeedbackRepo

    const rate = Effect.fn("TurnFeedback.rate")(function*(caller: CallerIdentity, id: SessionId, turn: number, input: FeedbackInput) {
      const session = yield* sessions.ownedTurn(caller, id, turn)
      const reason = input.reason?.trim()
      const row = yield* feedback.set({
        sessionId: id,
        agentId: session.agentId,
        turn,
        rating: input.rating,
        reason: reason === undefined || reason === "" ? null : reason,
        shared: input.share ?? false
      })
      return view(id, row)
    })

    const clear = Effect.fn("TurnFeedback.clear")(function*(caller: CallerIdentity, id: SessionId, turn: number) {
      yield* sessions.ownedTurn(caller, id, turn)
      return { session_id: id, turn, deleted: yield* feedback.remove(id, turn) }
    })

    /** A session has one rating per turn at most: read whole, paged as the platform's lists are. */
    const list = Effect.fn("TurnFeedback.list")(function*(caller: CallerIdentity, id: SessionId, params: ListParams) {
      yield* sessions.owned(caller, id)
      const rows = (yield* feedback.ofSession(id)).map((row) => view(id, row))
      return yield* pageOf(rows, params, (row) => String(row.turn))
    })

    return { rate, clear, list } as const
  }),
  dependencies: [Sessions.Default, FeedbackRepo.Default]
}) {}
