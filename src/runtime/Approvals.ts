import { Deferred, Duration, Effect, Option } from "effect"
import { NotFound } from "../platform/Errors.js"
import { randomBase62 } from "../platform/Ids.js"
import { duration } from "../platform/Config.js"
import type { Partition } from "./Repo.js"

export interface Decision {
  readonly approved: boolean
  readonly reason: string
}

interface Pending {
  readonly owner: Partition
  readonly decision: Deferred.Deferred<Decision>
}

/**
 * Human approvals of `ask` tool calls. A run that needs one waits here; the same account and end user answer it
 * (`POST /v1/approvals/:id`, or a session's approval event); an approval nobody answers expires after
 * `APPROVAL_TIMEOUT` as a denial with reason `timeout`, so no run waits forever. Pending approvals live in the
 * process that runs the waiting turn: the turn itself is in memory there.
 */
export class Approvals extends Effect.Service<Approvals>()("atrium/runtime/Approvals", {
  effect: Effect.gen(function*() {
    const timeout = yield* duration("APPROVAL_TIMEOUT", Duration.minutes(10))
    const pending = new Map<string, Pending>()

    /** Opens an approval; `wait` resolves with the answer or the timeout's denial, and forgets the approval. */
    const open = (owner: Partition) =>
      Effect.gen(function*() {
        const id = `apv_${randomBase62(20)}`
        const decision = yield* Deferred.make<Decision>()
        pending.set(id, { owner, decision })
        const expiresAt = new Date(Date.now() + Duration.toMillis(timeout))
        const wait = Deferred.await(decision).pipe(
          Effect.timeoutTo({
            duration: timeout,
            onSuccess: (answer) => answer,
            onTimeout: () => ({ approved: false, reason: "timeout" })
          }),
          Effect.ensuring(Effect.sync(() => pending.delete(id)))
        )
        return { id, expiresAt, wait }
      })

    /** Answers an approval of `owner`'s; anyone else's, or one that is gone, is 404 (it reveals nothing). */
    const answer = Effect.fn("Approvals.answer")(function*(owner: Partition, id: string, decision: Decision) {
      const entry = Option.fromNullable(pending.get(id)).pipe(
        Option.filter((p) => p.owner.accountId === owner.accountId && p.owner.endUserId === owner.endUserId)
      )
      if (Option.isNone(entry)) return yield* new NotFound({ message: `No pending approval ${id}.` })
      const accepted = yield* Deferred.succeed(entry.value.decision, decision)
      if (!accepted) return yield* new NotFound({ message: `No pending approval ${id}.` })
      pending.delete(id)
    })

    return { open, answer, timeout } as const
  })
}) {}

