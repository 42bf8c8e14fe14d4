import type * as Prompt from "@effect/ai/Prompt"
import * as Singleton from "@effect/cluster/Singleton"
import * as Activity from "@effect/workflow/Activity"
import * as DurableClock from "@effect/workflow/DurableClock"
import * as DurableDeferred from "@effect/workflow/DurableDeferred"
import * as Workflow from "@effect/workflow/Workflow"
import { WorkflowEngine, WorkflowInstance } from "@effect/workflow/WorkflowEngine"
import { Cause, Chunk, Clock, Context, Deferred, Duration, Effect, Exit, FiberRef, Layer, Option, Schedule, Schema, Stream } from "effect"
import { LedgerReads } from "../billing/LedgerReads.js"
import { type Partition, partitionOf } from "../identity/Partition.js"
import { InvalidRequest, NotFound } from "../platform/Errors.js"
import { RunnersRepo } from "../platform/cluster/Repo.js"
import { isOutage } from "../platform/Outage.js"
import type { Micros } from "../platform/Money.js"
import { Approvals, type Decision } from "../runtime/Approvals.js"
import type { InternalEvent } from "../runtime/Events.js"
import type { RunOutcome } from "../runtime/Repo.js"
import { type ChainWait, type ClientTool, CurrentChainWait, type DurableSteps, type RunnableAgent, type RunRequest, type StepCodec, StepResting } from "../runtime/Run.js"
import { RunEngine } from "../runtime/RunEngine.js"
import { ApprovalId, RunId } from "../runtime/Domain.js"
import { isRunStop, RunStop } from "../runtime/RunStop.js"
import { RunsConfig } from "./Config.js"
import { RunEnds } from "./Lifecycle.js"
import { RunRecords, type RunRow, TERMINAL } from "./Repo.js"
import { Runs } from "./Runs.js"
import { runObject } from "./Views.js"
import type { CallerIdentity } from "../identity/Domain.js"

/**
 * Background runs (issue 43, docs/runs.md): a run that answers at once and goes on without its caller, as a
 * workflow of `@effect/workflow` on the cluster's `ClusterWorkflowEngine`. The run's row is written first (`queued`,
 * with everything needed to run it), then the workflow is started for its id; the workflow lives on the shard of its
 * id, so when its runner dies the shard's next owner executes it again. Each model step and each tool call is an
 * activity whose result the engine records (the cluster's message storage), so an execution after a fault answers
 * the finished steps from their records and goes on from the first unfinished one; a step cut mid-way runs again,
 * and its charge key (`<run>:<step>`, the step's identity) makes the wallet take it once.
 */

/** What a background run's workflow needs to run it, on whichever runner: kept in the run's row (`request`). */
export interface StoredRequest {
  readonly message: string
  readonly history: ReadonlyArray<Prompt.MessageEncoded>
  /** Micro-credits, as a string. */
  readonly budget: string | null
  readonly resume?: boolean | undefined
  readonly clientTools?: ReadonlyArray<ClientTool> | undefined
  readonly toolChoice?: unknown
  readonly outputFormat?: unknown
  readonly knowledge?: RunRequest["knowledge"]
  /** What `/v1/responses` keeps to build its response object from the run's events (responses/Responses.ts). */
  readonly response?: unknown
  /** A published version its owner runs rather than the draft (an eval run of that version: docs/evals.md). */
  readonly version?: number | undefined
}

/** The workflow: one execution per run id (its idempotency key), whichever runner starts or resumes it. */
export const BackgroundRun = Workflow.make({
  name: "BackgroundRun",
  payload: { runId: RunId },
  idempotencyKey: ({ runId }) => runId
})

type Stop = "cancelled" | "expired"

/**
 * What wakes a suspended run (issue 43 item 2): its approval's answer, and its cancel. A run waiting for an approval
 * holds no fiber: its workflow is suspended on these, and `DurableDeferred.done` from any runner (the approval or
 * cancel route) resumes it on its shard's owner, which replays it from its records. Their names are their identity
 * within the run's execution (the first `done` of a name wins).
 */
const Answer = Schema.Struct({ approved: Schema.Boolean, reason: Schema.String })
export const approvalAnswer = (approvalId: ApprovalId) => DurableDeferred.make(`approval/${approvalId}`, { success: Answer })
export const CancelAsked = DurableDeferred.make("cancel")

/** How a durable approval's wait ended: the answer (or the timeout's denial), or a stop of the run. */
const Waited = Schema.Union(Answer, Schema.Struct({ stop: Schema.Literal("cancelled", "expired") }))
/** How a durable rest (a step waiting for a resting provider) ended: its clock, or a stop of the run. */
const Rested = Schema.Union(Schema.Struct({ rested: Schema.Literal(true) }), Schema.Struct({ stop: Schema.Literal("cancelled", "expired") }))
/** Always persisted clocks: an in-memory clock (the library's default up to 60 s) would hold a fiber, and the wait's
 * answer, delivered to the busy workflow entity, would wait behind it. */
const persistedClock = (name: string, until: Date) =>
  DurableClock.sleep({ name, duration: Math.max(until.getTime() - Date.now(), 0), inMemoryThreshold: Duration.zero })

/**
 * How a stopped run's log ends: `run.failed` with a code of its own (spec 3.2: a stream ends with run.completed or
 * run.failed), as a session's interrupted turn ends with `interrupted`. The run's record says `cancelled` or
 * `incomplete`.
 */
const stoppedEvent = (stop: Stop): InternalEvent =>
  stop === "cancelled"
    ? { type: "error", code: "cancelled", message: "The run was cancelled." }
    : { type: "error", code: "max_duration", message: "The run passed its deadline (BACKGROUND_RUN_DEADLINE) and stopped incomplete." }

/** A recorded failure as JSON (the message storage keeps JSON): its bigints as strings, a model's error left out. */
const encodeStop = (stop: RunStop): unknown => {
  const encoded = Schema.encodeSync(RunStop)(stop) as Record<string, unknown>
  return JSON.parse(JSON.stringify({ ...encoded, ...(stop._tag === "ModelCallFailed" ? { error: null } : {}) }, (_, value) =>
    typeof value === "bigint" ? value.toString() : value))
}
const decodeStop = (json: Record<string, unknown>): RunStop =>
  Schema.decodeUnknownSync(RunStop)(
    json._tag === "BudgetExhausted" ? { ...json, budget: BigInt(json.budget as string), spent: BigInt(json.spent as string) } : json
  )

/**
 * How a background run waits out an outage (PostgreSQL restarting, a shard between owners) before it gives up: an
 * activity's defect is recorded as its result (`Schema.Defect`), and every execution after it replays that defect, so
 * a step that met a database restart would end its run `failed` (`internal_error`) however soon the database was back
 * (the durable bench's PostgreSQL restart: two slow runs failed so, in a step and in its log's flush).
 */
const OUTAGE_RETRY = Schedule.exponential("200 millis", 2).pipe(Schedule.union(Schedule.spaced("2 seconds")))
const OUTAGE_PATIENCE_MS = 60_000

/**
 * One run's patience with an outage, shared by every `outlasting` of its execution (and the execution's own retries):
 * they nest (the whole body, a step's record, the step inside its activity), and each with a minute of its own would
 * wait a minute per level, the outer ones replaying a defect the inner one had already recorded. One outage gets one
 * minute, counted from when the run first met it (`since`); once a level has given up (`spentAt`), no level tries
 * again. Both end only with a success of work that began after them (the storage answers again): a success of work
 * begun before the outage says nothing about it, and a later outage after the storage came back gets its own minute.
 */
export interface OutagePatience {
  since: number | undefined
  spentAt: number | undefined
}
export const outagePatience = (): OutagePatience => ({ since: undefined, spentAt: undefined })

/**
 * Tries `effect` again while it dies of an outage (`isOutage`), on `OUTAGE_RETRY`, within `patience`. Only defects:
 * the database's failures are defects here (the repositories' `orDie`), and a typed failure (a run's stop, a model's
 * error) keeps its meaning. A step tried again is a step run again after a cut, as after a kill: its charge key makes
 * it billed once.
 */
export const outlastingOf = (patience: OutagePatience) => <A, E, R>(effect: Effect.Effect<A, E, R>, what?: string): Effect.Effect<A, E, R> =>
  Effect.flatMap(Clock.currentTimeMillis, (began) =>
    Effect.tap(effect, () =>
      Effect.sync(() => {
        if (patience.since !== undefined && began >= patience.since) patience.since = undefined
        if (patience.spentAt !== undefined && began >= patience.spentAt) patience.spentAt = undefined
      }))).pipe(
    Effect.sandbox,
    Effect.retry({
      schedule: OUTAGE_RETRY,
      // Told here, where the attempt is known to be made again: a tap on the schedule also told every cause that ends
      // the effect (a workflow suspending on its approval is an interrupt), as "met an outage; asked again".
      while: (cause) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) => {
          if (patience.spentAt !== undefined || Cause.failures(cause).length > 0 || !isOutage(cause)) return Effect.succeed(false)
          patience.since ??= now
          if (now - patience.since < OUTAGE_PATIENCE_MS) {
            return what === undefined ? Effect.succeed(true) : Effect.as(Effect.logWarning(`${what} met an outage; asked again`, cause), true)
          }
          patience.spentAt = now
          return Effect.succeed(false)
        })
    }),
    Effect.unsandbox
  )

/** The attempt of a step whose events are being told (set around each attempt of a step, read by the log's `emit`). */
const TellingAttempt = FiberRef.unsafeMake<{ readonly step: string; readonly attempt: number } | undefined>(undefined)

/**
 * A run's log of events (`run_events`): told in order with their seq, written in batches every 100 ms and at the
 * end of every step (a step's events are in the log before its result is recorded). An execution after a fault goes
 * on from the last seq written; its `run.created` is not told twice, and once the log has its end nothing more is.
 *
 * A step's events carry the step (its activity's name) and its attempt (1, 2, …, counted in the log, so across
 * executions): a step tried again (after a kill, an outage, a wallet that did not answer) begins its attempt by
 * marking the events of the attempts before it superseded, which no read returns any more (docs/runs.md, "A step
 * tried again"), so the log reads as one run.
 */
export const openLog = (repo: RunRecords, runId: RunId, patience: OutagePatience = outagePatience()) =>
  Effect.gen(function*() {
    const outlasting = outlastingOf(patience)
    const { ended, last } = yield* repo.logState(runId)
    // Only an execution after another has attempts to count on: the first one's are all its own.
    const attempts = new Map(last === 0 ? [] : (yield* repo.stepAttempts(runId)).map(({ attempt, step }) => [step, attempt] as const))
    let seq = last
    let pending: Array<{ seq: number; payload: unknown }> = []
    const writing = yield* Effect.makeSemaphore(1)
    // Written through an outage (the insert is idempotent per seq), so a batch is not lost with a flush that met it.
    // Nothing pending, nothing asked: an empty flush succeeding would say nothing of the storage (`OutagePatience`).
    const flush = writing.withPermits(1)(Effect.suspend(() => {
      const batch = pending
      if (batch.length === 0) return Effect.void
      pending = []
      return outlasting(repo.appendEvents(runId, batch))
    }))
    const emit = (event: InternalEvent): Effect.Effect<void> =>
      Effect.flatMap(FiberRef.get(TellingAttempt), (telling) =>
        Effect.sync(() => {
          if (ended || (last > 0 && event.type === "preparing")) return
          pending.push({ seq: ++seq, payload: telling === undefined ? event : { ...event, ...telling } })
        }))
    /**
     * Runs one attempt of `step`, its events told as that attempt's. An attempt after others first writes what they
     * told (a retry within this execution may have some still pending) and then marks it superseded.
     */
    const attempt = <A, E, R>(step: string, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
      Effect.suspend(() => {
        const n = (attempts.get(step) ?? 0) + 1
        attempts.set(step, n)
        const begin = n === 1 ? Effect.void : Effect.zipRight(flush, outlasting(repo.supersede(runId, step, n)))
        return Effect.zipRight(begin, Effect.locally(effect, TellingAttempt, { step, attempt: n }))
      })
    yield* Effect.forkScoped(Effect.repeat(flush, Schedule.spaced("100 millis")))
    // Bounded at the scope's close: a runner stopping during an outage does not wait `outlasting`'s minute per run
    // (its next owner replays the run from its last finished step and writes the log again).
    yield* Effect.addFinalizer(() => Effect.ignore(Effect.timeout(Effect.interruptible(flush), "5 seconds")))
    return { emit, flush, attempt } as const
  })

/** Where a run's cancel reaches it: this runner's running background runs, and one poll for all of them. */
export class RunCancels extends Effect.Service<RunCancels>()("atrium/runs/RunCancels", {
  scoped: Effect.gen(function*() {
    const repo = yield* RunRecords
    const { cancelPoll } = yield* RunsConfig
    const watched = new Map<RunId, Deferred.Deferred<Stop>>()
    const tell = (runId: RunId) => {
      const signal = watched.get(runId)
      return signal === undefined ? Effect.void : Effect.asVoid(Deferred.succeed(signal, "cancelled"))
    }
    // One statement per poll for every run this runner runs: a cancel written on any runner is seen within it.
    const poll = Effect.suspend(() =>
      watched.size === 0 ? Effect.void : Effect.flatMap(repo.cancelled([...watched.keys()]), Effect.forEach(tell, { discard: true }))
    ).pipe(Effect.catchAllCause((cause) => Effect.logWarning("could not read the cancels of background runs", cause)))
    yield* Effect.forkScoped(Effect.repeat(poll, Schedule.spaced(cancelPoll)))
    return {
      watch: (runId: RunId, signal: Deferred.Deferred<Stop>) =>
        Effect.acquireRelease(Effect.sync(() => void watched.set(runId, signal)), () => Effect.sync(() => void watched.delete(runId))),
      /** A cancel answered by this runner reaches a run it runs at once, without waiting for the poll. */
      tell
    } as const
  }),
  dependencies: [RunRecords.Default, RunsConfig.Default]
}) {}

/**
 * The workflow's body, registered with the engine on every runner: runs the engine over the stored request with
 * every step recorded, and records the run's end once (an activity), telling it to `RunEnds` (its webhooks).
 */
export const BackgroundRunLive = Layer.unwrapEffect(Effect.gen(function*() {
  const runs = yield* Runs
  const engine = yield* RunEngine
  const repo = yield* RunRecords
  const cancels = yield* RunCancels
  const ends = yield* RunEnds
  const approvals = yield* Approvals
  const ledger = yield* LedgerReads

  /** What a run is charged: what the ledger holds for its own steps (`<run>:<step>`), and its subagents' credits. */
  const chargedOf = (payer: Partition, runId: RunId) =>
    Effect.zipWith(ledger.runCharged(payer.accountId, runId), repo.childrenCharged(runId), (own, children) => (own + children) as Micros)

  /** Tells the run's end as its row now says it; told again after a fault, the same end (`RunEnds` is idempotent). */
  const tellEnd = Effect.fn("BackgroundRun.tellEnd")(function*(payer: Partition, runId: RunId, stored: StoredRequest) {
    const ended = yield* repo.byId(payer, runId)
    if (Option.isNone(ended)) return
    yield* ends.ended({
      accountId: payer.accountId,
      run: runObject(ended.value),
      responseId: (stored.response as { id?: string } | undefined)?.id ?? null
    })
  })

  const execute = (runId: RunId, patience: OutagePatience) =>
    Effect.gen(function*() {
      const outlasting = outlastingOf(patience)
      const found = yield* repo.background(runId)
      if (Option.isNone(found)) return
      const row = found.value
      const stored = row.request as StoredRequest
      const payer: Partition = { accountId: row.accountId, endUserId: row.endUserId }
      const workflow = yield* Effect.context<WorkflowEngine | WorkflowInstance>()
      const instance = Context.get(workflow, WorkflowInstance)
      // Ended, but executed again: the runner that ended it may have died between writing the end and recording the
      // `finish` activity. The activity answers from its record if it had one; otherwise it tells the end now.
      if (TERMINAL.has(row.status)) {
        return yield* Activity.make({ name: "finish", execute: outlasting(tellEnd(payer, runId, stored)) }).pipe(Effect.provide(workflow))
      }
      const log = yield* openLog(repo, runId, patience)

      // Why the run must stop before its end: a cancel (any runner writes it, this one polls), or its deadline,
      // which is a time in the row, so an execution after a fault keeps the first one's.
      const signal = yield* Deferred.make<Stop>()
      if (row.cancelRequested) yield* Deferred.succeed(signal, "cancelled")
      yield* cancels.watch(runId, signal)
      // While the run executes, its deadline is this runner's timer; while it is suspended (an approval), the
      // `DurableClock` of its wait wakes it at the same time (`persistedClock("deadline", …)` below).
      if (row.deadlineAt !== null) {
        const left = row.deadlineAt.getTime() - Date.now()
        if (left <= 0) yield* Deferred.succeed(signal, "expired")
        else yield* Effect.forkScoped(Effect.zipRight(Effect.sleep(left), Deferred.succeed(signal, "expired")))
      }

      let outcome: RunOutcome | undefined
      /** Stops the run where it is, for `stop`: told to the run's signal, then the engine is interrupted. */
      const stopWith = (stop: Stop) => Effect.zipRight(Deferred.succeed(signal, stop), Effect.interrupt)
      /** What else ends a durable wait: the run's cancel (its deferred) and its deadline (a persisted clock). */
      type Stopped = { readonly stop: Stop }
      const stopBranches: Array<Effect.Effect<Stopped, never, WorkflowEngine | WorkflowInstance>> = [
        Effect.as(DurableDeferred.await(CancelAsked), { stop: "cancelled" as const }),
        ...(row.deadlineAt === null ? [] : [Effect.as(persistedClock("deadline", row.deadlineAt), { stop: "expired" as const })])
      ]
      /** One attempt of a step, recorded under `name`: its result, its run stop, the run's stop, or a rest to wait. */
      const attempt = <A, E>(name: string, codec: StepCodec<A>, effect: Effect.Effect<A, E>, wait: ChainWait) =>
        Activity.make({
          name,
          success: Schema.Unknown,
          // The step races the run's stop: a cancel or a deadline ends the step where it is (a model call cut, its
          // step not charged), and that too is recorded, so an execution after a fault stops there as well. A run
          // already stopped (a replay woken by its cancel) does not start the step at all.
          execute: Effect.flatMap(Deferred.poll(signal), Option.match({
            onSome: (stopped) => Effect.map(stopped, (stopped): unknown => ({ stopped })),
            onNone: () =>
              Effect.raceFirst(
                // Each try is an attempt of its own in the log (an outage's retry here, a kill's re-execution).
                outlasting(log.attempt(name, effect)).pipe(
                  Effect.locally(CurrentChainWait, wait),
                  Effect.map((value): unknown => ({ ok: codec.encode(value) })),
                  Effect.catchAll((error): Effect.Effect<unknown> =>
                    isRunStop(error)
                      ? Effect.succeed({ stop: encodeStop(error) })
                      : error instanceof StepResting
                      ? Effect.succeed({ rest: error.until })
                      : Effect.die(error)
                  )
                ),
                Effect.map(Deferred.await(signal), (stopped): unknown => ({ stopped }))
              )
          })).pipe(Effect.ensuring(log.flush))
        })
      /**
       * A step whose providers all rest (ModelChain, `MAX_CHAIN_WAIT_MS`) ends its first attempt with the time to try
       * again; the workflow waits for it on a persisted `DurableClock` (no fiber, no timer held: a runner that stops
       * meanwhile costs nothing) raced with the run's cancel and deadline, then tries the step once more under a name
       * of its own (`<step>/again`), which does not wait again. Every replay answers both attempts from their records.
       */
      const stepOf = <A, E>(name: string, codec: StepCodec<A>, effect: Effect.Effect<A, E>, again: boolean): Effect.Effect<A, E, WorkflowEngine | WorkflowInstance> =>
        attempt(again ? `${name}/again` : name, codec, effect, again ? "waited" : "defer").pipe(
          Effect.flatMap((recorded) => {
            const result = recorded as { ok?: unknown; stop?: Record<string, unknown>; stopped?: Stop; rest?: number }
            if (result.stop !== undefined) return Effect.fail(decodeStop(result.stop) as E)
            if (result.stopped !== undefined) return Effect.zipRight(Deferred.succeed(signal, result.stopped), Effect.interrupt)
            if (result.rest !== undefined && !again) {
              const until = new Date(result.rest)
              return Effect.gen(function*() {
                const known = yield* Deferred.poll(signal)
                if (Option.isSome(known)) return yield* stopWith(yield* known.value)
                type Branch = Effect.Effect<typeof Rested.Type, never, WorkflowEngine | WorkflowInstance>
                const branches: readonly [Branch, ...Array<Branch>] = [
                  Effect.as(persistedClock(`rest/${name}`, until), { rested: true as const }),
                  ...stopBranches
                ]
                const rested = yield* DurableDeferred.raceAll({ name: `rest/${name}`, success: Rested, error: Schema.Never, effects: branches })
                if ("stop" in rested) return yield* stopWith(rested.stop)
                return yield* stepOf(name, codec, effect, true)
              })
            }
            return Effect.succeed(codec.decode(result.ok))
          })
        )
      const durable: DurableSteps = {
        // The engine's own writes for a step (its activity's request, the wait for its reply) met an outage: asked
        // again (`outlasting`), as the same activity and attempt, whose request the storage already has or takes now.
        step: (name, codec, effect) =>
          outlasting(stepOf(name, codec, effect, false), `background run ${runId}: the record of ${name}`).pipe(Effect.provide(workflow)),
        approve: (key, call, emit) =>
          Effect.gen(function*() {
            // Opened and told once: the approval's row (naming this run) and `approval.required` in the log; a
            // replay answers its id and expiry from the record.
            const opened = yield* Activity.make({
              name: `ask/${key}`,
              success: Schema.Struct({ id: ApprovalId, expiresAt: Schema.String }),
              execute: outlasting(log.attempt(`ask/${key}`, Effect.gen(function*() {
                const approval = yield* approvals.openDurable(payer, runId, key)
                yield* emit({
                  type: "Ask",
                  approval_id: approval.id,
                  tool_call_id: call.id,
                  name: call.name,
                  arguments: call.params,
                  expires_at: approval.expiresAt.toISOString()
                })
                yield* log.flush
                return { id: approval.id, expiresAt: approval.expiresAt.toISOString() }
              })))
            })
            // A stop already known here (a replay woken by its cancel, a deadline passed while it ran) ends the run.
            const known = yield* Deferred.poll(signal)
            if (Option.isSome(known)) return yield* stopWith(yield* known.value)
            // The wait: whichever comes first of the answer, the approval's expiry, a cancel and the run's deadline;
            // the winner is recorded (`raceAll`), so every replay decides the same. While none has come, each branch
            // suspends the workflow: the run holds no fiber, however long it waits.
            type Branch = Effect.Effect<typeof Waited.Type, never, WorkflowEngine | WorkflowInstance>
            const branches: readonly [Branch, ...Array<Branch>] = [
              DurableDeferred.await(approvalAnswer(opened.id)),
              // Its expiry: a timeout, unless an answer was claimed in time and has not reached the workflow yet
              // (no answer is claimed after `expires_at`, so the row is the last word).
              Effect.zipRight(
                persistedClock(`approval/${key}`, new Date(opened.expiresAt)),
                Effect.map(approvals.claimedAnswer(opened.id), Option.getOrElse((): typeof Waited.Type => ({ approved: false, reason: "timeout" })))
              ),
              ...stopBranches
            ]
            const waited = yield* DurableDeferred.raceAll({ name: `approval/${key}`, success: Waited, error: Schema.Never, effects: branches })
            if ("stop" in waited) return yield* stopWith(waited.stop)
            return waited
          }).pipe((waiting) => outlasting(waiting, `background run ${runId}: the approval ${key}`), Effect.provide(workflow)),
        suspended: () => instance.suspended
      }

      const stopped = row.cancelRequested || (row.deadlineAt !== null && row.deadlineAt.getTime() <= Date.now())
      // A stopped run that had begun (its log has events) is replayed all the same: its recorded steps count what
      // it used (posted by its settle), and its first unrecorded step stops it. One that never began stops here.
      const begun = row.status === "running"
      const agent = (stopped && !begun) || row.agent === null
        ? Option.none<RunnableAgent>()
        : stored.version !== undefined
        ? yield* runs.ownVersion(row.agent, payer.accountId, stored.version)
        : yield* runs.runnableOrModel(row.agent, payer.accountId)
      let status: "completed" | "failed" | "cancelled" | "incomplete"
      if (Option.isSome(agent)) {
        yield* repo.started(runId)
        const request: RunRequest = {
          runId,
          agent: agent.value,
          payer,
          history: stored.history,
          message: stored.message,
          budget: Option.map(Option.fromNullable(stored.budget), (budget) => BigInt(budget) as Micros),
          sessionId: Option.none(),
          workspace: "",
          parentRunId: Option.none(),
          depth: 0,
          clientTools: stored.clientTools,
          toolChoice: stored.toolChoice as RunRequest["toolChoice"],
          outputFormat: stored.outputFormat as RunRequest["outputFormat"],
          resume: stored.resume,
          knowledge: stored.knowledge,
          // The row was written when the run was queued; its end is written below, once, by the `finish` activity.
          ledger: { start: () => Effect.void, finish: (_, told) => Effect.sync(() => void (outcome = told)) },
          durable
        }
        const exit = yield* Effect.exit(engine.execute(request, log.emit, runs.resolveSubagent))
        // Suspended (it waits for an approval): not an end. The workflow returns `Suspended` and is resumed by
        // what it waits for; its log is written, and nothing else.
        if (Exit.isFailure(exit) && Cause.isInterruptedOnly(exit.cause) && instance.suspended) {
          yield* log.flush
          return yield* Effect.interrupt
        }
        if (Exit.isSuccess(exit)) status = exit.value.status
        else if (Cause.isInterruptedOnly(exit.cause)) {
          const why = yield* Deferred.poll(signal)
          const stop: Stop = Option.isSome(why) ? yield* why.value : "cancelled"
          status = stop === "expired" ? "incomplete" : "cancelled"
        }
        else status = "failed"
      } else if (stopped) {
        status = row.cancelRequested ? "cancelled" : "incomplete"
      } else {
        yield* log.emit({ type: "error", code: "agent_unavailable", message: `The agent ${row.agent} is not available to this caller any more.` })
        outcome = emptyOutcome("failed", { code: "agent_unavailable", message: `The agent ${row.agent} is not available to this caller any more.` })
        status = "failed"
      }
      const reason = status === "incomplete" ? "max_duration" : null
      if (status === "cancelled" || status === "incomplete") yield* log.emit(stoppedEvent(status === "cancelled" ? "cancelled" : "expired"))
      yield* log.flush
      const told = outcome ?? emptyOutcome(status === "completed" ? "completed" : "failed", status === "failed" ? { code: "internal_error", message: "The run failed on our side." } : undefined)
      const failure = status === "failed" ? { code: told.failureCode ?? "internal_error", message: told.failureMessage ?? "" } : null
      // The end, recorded once: a re-execution after it was recorded answers from the record and tells no one again.
      yield* Activity.make({
        name: "finish",
        execute: outlasting(Effect.gen(function*() {
          // Charged what the ledger holds for its steps (its settle has posted them by now), and what its subagents
          // recorded: not this execution's own count, which misses a step an earlier execution posted and this one
          // replays without its charge (a step cut by a cancel after its charge, the runner dead before this record),
          // and counts steps whose posting the wallet refused or never answered.
          const creditsCharged = yield* chargedOf(payer, runId)
          const outcomeRecorded: RunOutcome = { ...told, creditsCharged, failureCode: failure?.code ?? null, failureMessage: failure?.message ?? null }
          // Written once (a second finish changes nothing), told every time this activity executes: its record is
          // what makes the end told once, and the webhook's idempotency key covers the execution that died before it.
          yield* repo.finish(runId, status, outcomeRecorded, reason)
          // Its approvals can no longer be answered (an answer to one is a 404 from now on).
          yield* approvals.forgetRun(runId)
          yield* tellEnd(payer, runId, stored)
        }))
      }).pipe(Effect.provide(workflow))
    }).pipe(Effect.scoped, Effect.withSpan("BackgroundRun.execute", { attributes: { runId } }))

  /**
   * The last word on a run whose execution kept failing (below): it ends `failed` (`internal_error`), charged what the
   * ledger holds for its steps (its engine's count is lost with the execution; a settle may have posted them before
   * the defect), its approvals forgotten and its end told. Recorded, so a replay does not end it twice; a run that
   * had ended before the defect (its end written, its telling failed) keeps its end, which is told.
   */
  const endAfterDefect = (runId: RunId, cause: Cause.Cause<never>) =>
    Effect.gen(function*() {
      // Patience of its own: the execution's is spent, and the run's end must outlast an outage too.
      const patience = outagePatience()
      const outlasting = outlastingOf(patience)
      yield* Effect.logError(`background run ${runId}: its execution kept failing; it ends failed (internal_error)`, cause)
      const workflow = yield* Effect.context<WorkflowEngine | WorkflowInstance>()
      yield* Activity.make({
        name: "finish/defect",
        execute: outlasting(Effect.gen(function*() {
          const found = yield* repo.background(runId)
          if (Option.isNone(found)) return
          const row = found.value
          const payer: Partition = { accountId: row.accountId, endUserId: row.endUserId }
          if (!TERMINAL.has(row.status)) {
            const failure = { code: "internal_error", message: "The run failed on our side." }
            const log = yield* openLog(repo, runId, patience)
            yield* log.emit({ type: "error", ...failure })
            yield* log.flush
            const creditsCharged = yield* chargedOf(payer, runId)
            yield* repo.finish(runId, "failed", { ...emptyOutcome("failed", failure), creditsCharged }, null)
            yield* approvals.forgetRun(runId)
          }
          yield* tellEnd(payer, runId, row.request as StoredRequest)
        }).pipe(Effect.scoped))
      }).pipe(Effect.provide(workflow))
    })

  /**
   * A defect that leaves the workflow's body is its end for good: the engine records it as the workflow's result
   * (`CaptureDefects`) and never executes it again, so the run would stay `running` for ever, its steps perhaps
   * posted by its settle, its end never told (what the durable bench saw of one run after the kill). The execution
   * is tried again instead (its finished steps answer from their records: nothing is billed or told twice), a few
   * times, and a run that still cannot go on ends failed. An interruption is not a defect: it is how the run suspends.
   */
  return BackgroundRun.toLayer(({ runId }) =>
    Effect.suspend(() => {
      const patience = outagePatience()
      return execute(runId, patience).pipe(
        // An outage outside the activities (the run's row read, its log's state) is waited out before it counts as a
        // defect: the defect's few tries are over in 7.5 s, sooner than a loaded database's restart.
        outlastingOf(patience),
        Effect.sandbox,
        Effect.retry({ schedule: DEFECT_RETRY, while: (cause) => !Cause.isInterruptedOnly(cause) }),
        Effect.catchAll((cause) => Cause.isInterruptedOnly(cause) ? Effect.failCause(cause) : endAfterDefect(runId, cause))
      )
    })
  )
})).pipe(Layer.provide([Runs.Default, RunEngine.Default, RunRecords.Default, RunCancels.Default, Approvals.Default, LedgerReads.Default]))

/** How often, and how far apart, a failing execution of a background run is tried again before the run ends failed. */
const DEFECT_RETRY = Schedule.exponential("500 millis", 2).pipe(Schedule.intersect(Schedule.recurs(4)))

const emptyOutcome = (status: "completed" | "failed", failure?: { code: string; message: string }): RunOutcome => ({
  status,
  failureCode: failure?.code ?? null,
  failureMessage: failure?.message ?? null,
  inputTokens: 0,
  outputTokens: 0,
  creditsCharged: 0n,
  answerChars: 0,
  deniedTools: [],
  output: ""
})

/** Starting, reading, cancelling and following background runs (the routes' side; the workflow is above). */
export class BackgroundRuns extends Effect.Service<BackgroundRuns>()("atrium/runs/BackgroundRuns", {
  effect: Effect.gen(function*() {
    const repo = yield* RunRecords
    const cancels = yield* RunCancels
    const workflows = yield* WorkflowEngine
    const { backgroundDeadline } = yield* RunsConfig

    /** Queues a run of `agent` and starts its workflow; the run is answered at once, `queued`. */
    const start = Effect.fn("BackgroundRuns.start")(function*(caller: CallerIdentity, agent: RunnableAgent, stored: StoredRequest, runId: RunId = RunId.random()) {
      const partition = partitionOf(caller)
      yield* repo.enqueue({
        id: runId,
        partition,
        agentId: agent.id,
        agentVersion: agent.version,
        agent: agent.identifier,
        sessionId: null,
        request: stored,
        deadlineAt: new Date(Date.now() + Duration.toMillis(backgroundDeadline))
      })
      // The start is a persisted message to the run's shard: once sent, the run is executed by whoever owns it.
      yield* BackgroundRun.execute({ runId }, { discard: true }).pipe(Effect.provideService(WorkflowEngine, workflows))
      return yield* get(partition, runId)
    })

    const get = (partition: Partition, id: RunId) =>
      Effect.flatMap(repo.byId(partition, id), Option.match({
        onNone: () => Effect.fail(new NotFound({ message: `No run ${id}.` })),
        onSome: Effect.succeed
      }))

    /**
     * Asks a background run to stop (idempotent: a run that ended, or was asked before, is answered as it is). The
     * runner running it sees the cancel within `BACKGROUND_CANCEL_POLL` (at once when it is this one).
     */
    const cancel = Effect.fn("BackgroundRuns.cancel")(function*(partition: Partition, id: RunId) {
      const run = yield* get(partition, id)
      if (run.sessionId !== null) {
        return yield* new InvalidRequest({ message: `A session's turn is stopped with POST /v1/sessions/${run.sessionId}/interrupt.` })
      }
      if (!run.background) {
        return yield* new InvalidRequest({ message: "Only a background run can be cancelled; a foreground run stops when its client closes its stream." })
      }
      if (!TERMINAL.has(run.status)) {
        yield* repo.requestCancel(partition, id)
        yield* cancels.tell(id)
        // A run suspended on an approval has no runner watching its row: the cancel wakes its workflow.
        yield* wake(id, CancelAsked, Exit.void)
      }
      return yield* get(partition, id)
    })

    /** Completes one of a run's deferreds (its approval's answer, its cancel) from any runner: resumes the run. */
    const wake = <A>(runId: RunId, deferred: DurableDeferred.DurableDeferred<Schema.Schema<A, any>>, exit: Exit.Exit<A>) =>
      Effect.gen(function*() {
        const executionId = yield* BackgroundRun.executionId({ runId })
        const token = DurableDeferred.tokenFromExecutionId(deferred, { workflow: BackgroundRun, executionId })
        yield* DurableDeferred.done(deferred, { token, exit })
      }).pipe(Effect.provideService(WorkflowEngine, workflows))

    /** The answer to a background run's approval (claimed already by `Approvals.answer`): the run goes on with it. */
    const approve = Effect.fn("BackgroundRuns.approve")(function*(runId: RunId, approvalId: ApprovalId, decision: Decision) {
      yield* wake(runId, approvalAnswer(approvalId), Exit.succeed(decision))
    })

    /**
     * A background run's events from `after` on, from its log: while it runs the log is read again every 200 ms,
     * and the stream ends after its last event once the run has ended. Any runner can serve it. `place` is the event's
     * place among those the log shows (its superseded events left out: "A step tried again"), counted from the log's
     * start however far on the stream begins, so a resumed stream numbers on as a read from the start would.
     */
    const events = (run: RunRow, after: number): Stream.Stream<{ seq: number; place: number; payload: { type: string } }> =>
      Stream.unwrap(Effect.map(after === 0 ? Effect.succeed(0) : repo.shownUpTo(run.id, after), (before) =>
        Stream.mapAccum(logFrom(run, after), before, (place, event) => [place + 1, { ...event, place: place + 1 }] as const)))

    const logFrom = (run: RunRow, after: number): Stream.Stream<{ seq: number; payload: { type: string } }> =>
      Stream.paginateChunkEffect(after, (cursor) =>
        Effect.gen(function*() {
          const rows = yield* repo.eventsAfter(run.id, cursor)
          if (rows.length > 0) return [Chunk.unsafeFromArray(rows), Option.some(rows[rows.length - 1]!.seq)] as const
          const now = yield* repo.background(run.id)
          // Ended: its log was written before its end was (the workflow flushes first), so what is left is read once.
          if (Option.isNone(now) || TERMINAL.has(now.value.status)) {
            const last = yield* repo.eventsAfter(run.id, cursor)
            return [Chunk.unsafeFromArray(last), Option.none()] as const
          }
          yield* Effect.sleep("200 millis")
          return [Chunk.empty(), Option.some(cursor)] as const
        }))

    return { start, get, cancel, approve, events } as const
  }),
  dependencies: [RunRecords.Default, RunCancels.Default, RunsConfig.Default]
}) {}

/**
 * The sweep (issue 43: no run stays non-terminal), one in the cluster (a singleton, as the scheduler): every
 * `BACKGROUND_SWEEP` it makes sure of the background runs whose start or wake-up may have been lost on the way.
 *
 * - A run still `queued` that long: the runner that wrote its row may have died before it sent the workflow's start.
 *   The start is sent again (one execution per run id: a start already there changes nothing).
 * - A run asked to cancel, or with an approval answered, and still open that long: its workflow is resumed (a
 *   workflow not suspended is left as it is), as the answer's or the cancel's own message would have.
 * - The workflows' requests read and left unanswered that long are read again by their shard's owner: the cluster's
 *   storage otherwise reads a message once per ten minutes (`RunnersRepo.rereadStale`).
 */
export const BackgroundSweepLive = Singleton.make(
  "atrium/runs/BackgroundSweep",
  Effect.gen(function*() {
    const repo = yield* RunRecords
    const runners = yield* RunnersRepo
    const workflows = yield* WorkflowEngine
    const { backgroundSweep } = yield* RunsConfig
    const seconds = Duration.toSeconds(backgroundSweep)
    const pass = Effect.gen(function*() {
      yield* runners.rereadStale(["Workflow/BackgroundRun", "Workflow/-/DurableClock"], seconds)
      const stranded = yield* repo.stranded(seconds)
      yield* Effect.forEach(stranded, (run) =>
        run.status === "queued"
          ? BackgroundRun.execute({ runId: run.id }, { discard: true })
          : Effect.flatMap(BackgroundRun.executionId({ runId: run.id }), (executionId) => BackgroundRun.resume(executionId)), { discard: true })
      if (stranded.length > 0) yield* Effect.logInfo(`background runs: the sweep started or resumed ${stranded.length}`)
    }).pipe(Effect.provideService(WorkflowEngine, workflows))
    yield* pass.pipe(
      Effect.catchAllCause((cause) => Effect.logWarning("background runs: a sweep failed", cause)),
      Effect.repeat(Schedule.spaced(backgroundSweep))
    )
  })
).pipe(Layer.provide([RunRecords.Default, RunnersRepo.Default, RunsConfig.Default]))
