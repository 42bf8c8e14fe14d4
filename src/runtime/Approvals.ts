import { Deferred, Duration, Effect, Option, Schema, Stream } from "effect"
import { createHash } from "node:crypto"
import { AppConfig } from "../platform/Config.js"
import { Notifications } from "../platform/Listener.js"
import { NotFound } from "../platform/Errors.js"
import { duration } from "../platform/Config.js"
import { APPROVALS_CHANNEL, ApprovalsRepo } from "./approvals/Repo.js"
import { ApprovalId, type RunId } from "./Domain.js"
import type { Partition } from "../identity/Partition.js"

export interface Decision {
  readonly approved: boolean
  readonly reason: string
}

interface Pending {
  readonly owner: Partition
  /** The session whose turn waits, if any: only that session (or `/v1/approvals/:id`) may answer. */
  readonly sessionId: Option.Option<string>
  readonly decision: Deferred.Deferred<Decision>
}

const Answer = Schema.parseJson(Schema.Struct({ id: ApprovalId.unchecked, approved: Schema.Boolean, reason: Schema.String }))

/**
 * Human approvals of `ask` tool calls. A run that needs one waits here; the same account and end user answer it
 * (`POST /v1/approvals/:id`, or a session's approval event); an approval nobody answers expires after
 * `APPROVAL_TIMEOUT` as a denial with reason `timeout`, so no run waits forever.
 *
 * The waiting run is in the memory of the runner that runs it. In cluster mode the answer may reach any runner: a
 * pending approval is also a row (whose it is, until when), the runner that takes the answer claims the row (one
 * claim wins) and tells every runner on the `atrium_approvals` channel; the one with the waiting run resumes it.
 */
export class Approvals extends Effect.Service<Approvals>()("atrium/runtime/Approvals", {
  scoped: Effect.gen(function*() {
    const timeout = yield* duration("APPROVAL_TIMEOUT", Duration.minutes(10))
    const clustered = Option.isSome((yield* AppConfig).databaseUrl)
    const repo = yield* ApprovalsRepo
    const pending = new Map<string, Pending>()

    const resolveLocal = (id: ApprovalId, decision: Decision) =>
      Effect.suspend(() => {
        const entry = pending.get(id)
        if (entry === undefined) return Effect.succeed(false)
        pending.delete(id)
        return Deferred.succeed(entry.decision, decision)
      })

    const resolveFrom = (payload: string) =>
      Schema.decodeUnknown(Answer)(payload).pipe(
        Effect.flatMap((answer) => resolveLocal(answer.id, answer)),
        Effect.catchAll(() => Effect.logWarning("unreadable approval notification"))
      )

    if (clustered) {
      const signals = (yield* Notifications).listen(APPROVALS_CHANNEL)
      yield* signals.pipe(
        Stream.runForEach((signal) =>
          signal._tag === "Note"
            ? resolveFrom(signal.payload)
            // Listening again after a lost connection: answers claimed meanwhile are in their rows.
            : signal.again && pending.size > 0
            ? Effect.flatMap(repo.answered(Array.from(pending.keys())), Effect.forEach(resolveFrom)).pipe(
              Effect.catchAllCause((cause) => Effect.logWarning("approvals could not be caught up after a reconnection", cause))
            )
            : Effect.void
        ),
        Effect.forkScoped
      )
    }

    /** Opens an approval; `wait` resolves with the answer or the timeout's denial, and forgets the approval. */
    const open = (owner: Partition, sessionId: Option.Option<string> = Option.none()) =>
      Effect.gen(function*() {
        const id = ApprovalId.random()
        const decision = yield* Deferred.make<Decision>()
        const expiresAt = new Date(Date.now() + Duration.toMillis(timeout))
        if (clustered) {
          yield* repo.insert({
            id,
            accountId: owner.accountId,
            endUserId: owner.endUserId,
            sessionId: Option.getOrNull(sessionId),
            expiresAt
          })
        }
        pending.set(id, { owner, sessionId, decision })
        const wait = Deferred.await(decision).pipe(
          Effect.timeoutTo({
            duration: timeout,
            onSuccess: (answer) => answer,
            onTimeout: () => ({ approved: false, reason: "timeout" })
          }),
          Effect.ensuring(Effect.suspend(() => {
            pending.delete(id)
            return clustered ? repo.remove(id) : Effect.void
          }))
        )
        return { id, expiresAt, wait }
      })

    /**
     * Opens an approval of a background run (issue 43): nothing waits for it in this runner's memory. Its row names
     * the run, whose workflow waits on a `DurableDeferred` (runs/Background.ts) that the answer resolves, on any
     * runner, in embedded mode too; nobody answering is the workflow's `DurableClock` at `expiresAt`.
     */
    const openDurable = Effect.fn("Approvals.openDurable")(function*(owner: Partition, runId: RunId, key: string) {
      // Its id is its identity: a step cut by a fault and executed again opens the same approval (the one its
      // workflow waits on, whose answer may already be in), not a second one nobody waits for.
      const id = ApprovalId.make(`apv_${createHash("sha256").update(`${runId}\n${key}`).digest("base64url").replace(/[-_]/g, "").slice(0, 20)}`)
      const expiresAt = yield* repo.insertDurable({
        id,
        accountId: owner.accountId,
        endUserId: owner.endUserId,
        sessionId: null,
        expiresAt: new Date(Date.now() + Duration.toMillis(timeout)),
        runId
      })
      return { id, expiresAt }
    })

    /**
     * Answers an approval of `owner`'s; anyone else's, or one that is gone, is 404 (it reveals nothing). Answered
     * through a session (`throughSession`), it must be that session's own: another session of the same end user
     * would otherwise run the tool in the first session and wait on a turn of its own that never comes.
     * Some run id: the approval is a background run's (`openDurable`), claimed here; the caller resolves the run's
     * deferred with the decision (runs/Background.ts `BackgroundRuns.approve`).
     */
    const answer = Effect.fn("Approvals.answer")(function*(
      owner: Partition,
      id: ApprovalId,
      decision: Decision,
      throughSession: Option.Option<string> = Option.none()
    ) {
      const gone = new NotFound({ message: `No pending approval ${id}.` })
      const local = Option.fromNullable(pending.get(id))
      if (Option.isSome(local)) {
        const mine = local.value.owner.accountId === owner.accountId && local.value.owner.endUserId === owner.endUserId
        const sameSession = Option.isNone(throughSession) ||
          (Option.isSome(local.value.sessionId) && local.value.sessionId.value === throughSession.value)
        if (!mine || !sameSession) return yield* gone
      }
      if (!clustered && Option.isSome(local)) {
        if (!(yield* resolveLocal(id, decision))) return yield* gone
        return Option.none<RunId>()
      }
      // Claimed in its row: in cluster mode every approval has one; in embedded mode only a background run's.
      const answer = JSON.stringify({ id, approved: decision.approved, reason: decision.reason })
      const claimed = yield* repo.claim({
        id,
        accountId: owner.accountId,
        endUserId: owner.endUserId,
        sessionId: Option.getOrNull(throughSession),
        answer
      })
      if (Option.isNone(claimed)) return yield* gone
      if (claimed.value.runId !== null) return Option.some(claimed.value.runId)
      if (Option.isSome(local)) {
        yield* resolveLocal(id, decision)
        return Option.none<RunId>()
      }
      yield* repo.notify(answer)
      return Option.none<RunId>()
    })

    /**
     * The answer claimed for a background run's approval, if any: read when its expiry's clock fires, since an answer
     * claimed just before the expiry may not have reached the run's workflow yet (the one who answered got a 200).
     */
    const claimedAnswer = (id: ApprovalId) =>
      Effect.map(repo.answered([id]), (answers) =>
        Option.flatMap(Option.fromNullable(answers[0]), (json) =>
          Option.map(Schema.decodeUnknownOption(Answer)(json), ({ approved, reason }): Decision => ({ approved, reason }))))

    return { open, openDurable, answer, claimedAnswer, timeout, forgetRun: repo.removeOfRun } as const
  }),
  dependencies: [ApprovalsRepo.Default, AppConfig.Default, Notifications.Default]
}) {}
