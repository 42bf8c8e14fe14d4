import { createHash } from "node:crypto"
import { Effect, FiberSet, Layer, Option } from "effect"
import { LedgerReads } from "../billing/LedgerReads.js"
import { UserId } from "../platform/Ids.js"
import { RunId } from "../runtime/Domain.js"
import { BackgroundRuns } from "../runs/Background.js"
import { RunRecords } from "../runs/Repo.js"
import { Runs } from "../runs/Runs.js"
import { Sessions } from "../sessions/Sessions.js"
import { Webhooks } from "../webhooks/Webhooks.js"
import type { FiringRow } from "./Repo.js"
import { ScheduleFirer } from "./Scheduler.js"
import type { CallerIdentity } from "../identity/Domain.js"

/** A firing's run id, from its identity: a second start of the same firing finds its run. */
export const firingRunId = (firing: Pick<FiringRow, "scheduleId" | "fireAt">) =>
  RunId.make(`run_${createHash("sha256").update(`${firing.scheduleId}\n${firing.fireAt.toISOString()}`).digest("base64url").replace(/[-_]/g, "").slice(0, 20)}`)

const noSink = { event: () => {}, end: () => {} }

/**
 * How a firing starts: as the schedule's partition (its account and end user, as an API key with that end user
 * would), a background run of its expert, or a turn of its session. An expert that can no longer be run (removed,
 * unpublished) or a wallet with nothing in it fails the firing, with `schedule.failed` to the account's endpoints
 * and the schedule's own; the schedule goes on.
 */
export const ScheduleFirerLive = Layer.scoped(
  ScheduleFirer,
  Effect.gen(function*() {
    // Session turns started by firings, followed to their end here without holding up the scheduler's pass.
    const turns = yield* FiberSet.make()
    const runs = yield* Runs
    const background = yield* BackgroundRuns
    const records = yield* RunRecords
    const sessions = yield* Sessions
    const webhooks = yield* Webhooks
    const ledger = yield* LedgerReads

    const failed = (firing: FiringRow, reason: string) =>
      webhooks.emit({
        account: firing.accountId,
        type: "schedule.failed",
        data: { object: "schedule", id: firing.scheduleId, fire_at: firing.fireAt.toISOString(), reason },
        idempotencyKey: `schedule:${firing.scheduleId}:${firing.fireAt.toISOString()}:failed`,
        endpoint: firing.webhookId ?? undefined
      }).pipe(Effect.as({ _tag: "Failed" as const, reason }))

    const fire = Effect.fn("ScheduleFirer.fire")(function*(firing: FiringRow) {
      const caller: CallerIdentity = {
        userId: UserId.make(firing.accountId),
        via: "api_key",
        apiKeyId: Option.none(),
        endUserId: firing.endUserId === "" ? Option.none() : Option.some(firing.endUserId)
      }
      const agent = yield* runs.runnable(firing.agent, caller.userId)
      if (Option.isNone(agent)) return yield* failed(firing, `The expert ${firing.agent} can no longer be run (removed or unpublished).`)
      // A wallet not yet used is made with the signup grant at the run's first charge; an empty one cannot pay.
      const balance = yield* ledger.balance(firing.accountId)
      if (Option.isSome(balance) && balance.value <= 0n) return yield* failed(firing, "The wallet has no credits.")
      const key = `schedule:${firing.scheduleId}:${firing.fireAt.toISOString()}`
      if (firing.sessionId !== null) {
        // A turn of the session, under the firing's identity as its Idempotency-Key: a second start of the same
        // firing attaches to the first one's turn instead of sending it again. The turn runs in the session's
        // entity, followed from here in the background; a session that is gone fails the firing.
        if (Option.isNone(yield* Effect.option(sessions.get(caller, firing.sessionId)))) {
          return yield* failed(firing, `The session ${firing.sessionId} is gone.`)
        }
        yield* FiberSet.run(
          turns,
          sessions.sendOnce(caller, firing.sessionId, key, firing.input, Option.none(), noSink).pipe(
            Effect.scoped,
            Effect.catchAllCause((cause) => Effect.logWarning(`schedules: a firing's turn of ${firing.sessionId} failed`, cause))
          )
        )
        return { _tag: "Started" as const, runId: null }
      }
      const runId = firingRunId(firing)
      if (Option.isNone(yield* records.background(runId))) {
        // The run was just written: its read back cannot miss.
        yield* Effect.orDie(background.start(caller, agent.value, { message: firing.input, history: [], budget: null }, runId))
      }
      return { _tag: "Started" as const, runId }
    })
    return { fire }
  })
)
