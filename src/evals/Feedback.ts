import { Effect } from "effect"
import type { CallerIdentity } from "../identity/Domain.js"
import type { EvalDatasetId } from "../platform/Ids.js"
import { Evals } from "./Evals.js"
import { EvalsRepo } from "./Repo.js"
import { type StoredRow, textOf } from "./Rows.js"

/**
 * Thumbs-down → dataset (issue 46 item 3, docs/evals.md "Rows from feedback"): the answers of the dataset's expert
 * that an end user rated down and shared with its creator become rows. The input is the user's message of that turn
 * (with no expectation: the creator adds one, or grades it with a judge); the answer they disliked and their reason
 * go in `metadata`. A turn is added once (its `session:turn` is the row's source).
 */

export class FeedbackRows extends Effect.Service<FeedbackRows>()("atrium/evals/FeedbackRows", {
  effect: Effect.gen(function*() {
    const evals = yield* Evals
    const repo = yield* EvalsRepo

    const add = Effect.fn("FeedbackRows.add")(function*(caller: CallerIdentity, datasetId: EvalDatasetId, limit: number) {
      const dataset = yield* evals.ownDataset(caller, datasetId)
      const found = yield* repo.sharedThumbsDown(dataset.agentId, limit)
      const rows = found.flatMap((turn): Array<StoredRow & { sourceRef: string }> => {
        const messages = Array.isArray(turn.messages) ? (turn.messages as ReadonlyArray<{ role?: string; content?: unknown }>) : []
        const question = messages.filter((m) => m.role === "user").map((m) => textOf(m.content)).join("\n").trim()
        if (question === "") return []
        const answer = messages.filter((m) => m.role === "assistant").map((m) => textOf(m.content)).join("\n")
        return [{
          input: { message: question, history: [] },
          expected: { metadata: { rejected_answer: answer.slice(0, 20_000), reason: turn.reason } },
          sourceRef: `${turn.sessionId}:${turn.turn}`
        }]
      })
      return yield* evals.addSourced(dataset, rows, "feedback")
    })

    return { add } as const
  }),
  dependencies: [Evals.Default, EvalsRepo.Default]
}) {}
