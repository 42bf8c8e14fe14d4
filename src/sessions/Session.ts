import { SessionId } from "../platform/Ids.js"
import type * as Prompt from "@effect/ai/Prompt"
import { Entity, type Sharding } from "@effect/cluster"
import { Cause, Deferred, Duration, Effect, Exit, Fiber, FiberHandle, FiberSet, Layer, Metric, Option, Schedule, Scope } from "effect"
import { ShardFences } from "../platform/cluster/Fences.js"
import { Stopping } from "../platform/Stopping.js"
import { activeSessions, inFlight, queuedTurns, runningTurns } from "../platform/telemetry/Metrics.js"
import { type InternalEvent, isTerminal } from "../runtime/Events.js"
import { MAX_STEPS } from "../runtime/Run.js"
import { RunId } from "../runtime/Domain.js"
import { RunPayer } from "../runtime/Ports.js"
import { RunEngine } from "../runtime/RunEngine.js"
import { unsafeMakeSandboxHolder } from "../runtime/sandbox/Holder.js"
import { RunRecords } from "../runs/Repo.js"
import { Runs } from "../runs/Runs.js"
import { SessionsConfig } from "./Config.js"
import { SessionHub } from "./Hub.js"
import type { RunOutcome, RunRecord } from "../runtime/Repo.js"
import { SessionLog } from "./Log.js"
import { SessionsRepo } from "./Repo.js"
import { Session, SessionGone } from "./SessionRpc.js"
import { turnRunId, type LoggedEvent, type LogWrite, type QueuedTurn, type SessionRow, type SessionStatus, type TurnRow } from "./Rows.js"
import { SessionBusy } from "./Domain.js"
import { KeepAlive, RunnerTurns, UnfinishedTurns } from "./Activation.js"
import { KeptHistory } from "./History.js"


/** How a turn's end that could not be written is tried again: 0.2 s doubling to 2 s apart, until it is written. */
const END_RETRY = Schedule.exponential("200 millis", 2).pipe(Schedule.union(Schedule.spaced("2 seconds")))

/** What a turn reads of the session's row. */
const turnPartOf = (found: Option.Option<SessionRow>) =>
  Option.map(found, ({ accountId, agentIdentifier, endUserId, environmentId }) => ({ accountId, agentIdentifier, endUserId, environmentId }))

/**
 * The behaviour runs once per activation, in the fiber that sent the message that woke the session. That is never an
 * HTTP request's fiber: every client sends from a fiber of its service (`makeEntityCaller`), so what the worker
 * inherits from it holds no request. The worker and the engine run in the entity's scope (a `FiberHandle` of the
 * entity, issue 45 item 1): they end with it, after the sent turns had their grace.
 */
/**
 * How long a stopping runner waits for cut turns' voids and recounts under way (apart from `SHUTDOWN_GRACE`, which is
 * the sent turns'): a void is one wallet round trip, answered within the failover budget once the wallet's owner is up.
 */
const CLOSING_GRACE = Duration.seconds(5)

export const SessionLive = Layer.unwrapScoped(Effect.gen(function*() {
  const stopping = yield* Stopping
  const { turns: runnerTurns } = yield* RunnerTurns
  /** What a session's load starts that must outlive its activation: the void of a cut turn's hold and its recount. */
  const closing = yield* FiberSet.make<void, never>()
  // At shutdown (this finalizer runs before the set's own, which interrupts) a void and recount still under way get up
  // to `CLOSING_GRACE` to end: cut, they would not be done again, as the next activation finds the turn closed.
  yield* Effect.addFinalizer(() => Effect.timeoutOption(FiberSet.awaitEmpty(closing), CLOSING_GRACE))
  const { contextChars } = yield* SessionsConfig
  return Session.toLayer(Effect.gen(function*() {
    const address = yield* Entity.CurrentAddress
    const sessionId = SessionId.unchecked.make(address.entityId)
    /**
     * The generation under which this runner holds the session's shard as the session starts (fencing, migration
     * 0017): every write of the session carries it, and the database refuses it once another runner acquired the
     * shard. `owner`: the shard is still held under that fence, so the session may start, bill and write; after a
     * stall of the process it waits for a lock refresh to say so (a slow runner goes on, a paused one that was cut
     * off does not). An owner whose fence is no longer current (lost, even if re-acquired since) starts nothing more.
     */
    const fences = yield* ShardFences
    const fence = yield* fences.takeFence(address.shardId)
    const owner = Effect.suspend(() =>
      fences.shardConfirmed(address.shardId)
        ? Effect.succeed(fences.fenceCurrent(fence))
        : Effect.map(fences.awaitShard(address.shardId), (held) => held && fences.fenceCurrent(fence))
    )
    const repo = yield* SessionsRepo
    const log = yield* SessionLog
    const hub = yield* SessionHub
    const engine = yield* RunEngine
    const runPayer = yield* RunPayer
    const runs = yield* Runs
    const runRecords = yield* RunRecords

    // A write refused before this activation (the previous one's) no longer holds the log back: this one starts
    // from the position the database has.
    yield* log.resume(sessionId)
    yield* log.expectFollowers(sessionId)
    const positions = yield* repo.positions(sessionId)
    // What a turn reads of the row, kept while active: none of it changes except by `Reload` (adopt) or `Stop`
    // (delete). Only those fields, not the row (its title, metadata and dates): every active session holds this.
    let row = turnPartOf(yield* repo.byId(sessionId))
    let seq = positions.seq
    let lastTurn = positions.turn
    /** The session's current leaf (issue 44): a turn sent without a parent continues it; written with each turn's end. */
    let leaf = positions.leaf
    let deleted = false
    let status: SessionStatus = "idle"
    /** The status changed and the next write carries it. */
    let statusChanged = false
    /** The running turn's run, as the engine's ledger tells it; the first write after its start carries its row. */
    let run: { record: RunRecord; outcome: Option.Option<RunOutcome>; written: boolean } | undefined
    /** The history as the next turn's prompt needs it, kept while the session is active (`KeptHistory`). */
    const history = new KeptHistory((to) => repo.path(sessionId, to), contextChars)
    /** The running turn; `rollback`: a message sent with `multitask_strategy: rollback` cancelled it. */
    let current: Option.Option<{
      readonly turn: number
      readonly fiber: Fiber.RuntimeFiber<unknown, unknown>
      rollback: boolean
      /** Done when the runner gives the session up without a hand-over (the finalizer below): the run's settle lets go. */
      readonly givenUp: Deferred.Deferred<void>
    }> = Option.none()
    /** Why the running turn was stopped from inside (its log broke, or its shard was lost), if it was. */
    let stoppedBy: Option.Option<{ readonly code: string; readonly message: string }> = Option.none()
    /**
     * Turns sent and not yet run, in order. A plain array, and a worker fiber only while there are turns (`work`): an
     * idle session holds no queue, no fiber and no latch, since every active session holds them, idle or not (issue
     * 28, heap per session).
     */
    const queued: Array<QueuedTurn> = []
    /** Queued turns sent with `interrupt` or `rollback`: they run before the others, in the order sent. */
    const urgent = new Set<number>()
    /**
     * Queued turns whose run was cancelled (`CancelTurn`, or a cancel written in their run's row before this load):
     * each ends, cancelled, when its place comes, so the log still tells turns one after another.
     */
    const cancelledTurns = new Set<number>()
    /** Set once the behaviour is built: turns owed on reload wait for it before a worker starts. */
    let started = false
    /** Turns sent and not yet ended: what a runner giving the session up waits for. */
    const unfinished = new UnfinishedTurns(runnerTurns)
    /** Hands a turn to the worker (it is durable already: `Send` wrote it first, or it was owed on reload). */
    const enqueue = (turn: QueuedTurn, first = false) =>
      Effect.gen(function*() {
        yield* unfinished.add(1)
        if (first) {
          const at = queued.findIndex((waiting) => !urgent.has(waiting.turn))
          urgent.add(turn.turn)
          queued.splice(at < 0 ? queued.length : at, 0, turn)
        } else {
          queued.push(turn)
        }
        yield* Metric.increment(queuedTurns)
        if (started) yield* startWorker
      })

    // The session's sandbox (`run_code`): kept while the session is active, so variables persist between turns;
    // released when it passivates (the entity's scope closes) or is deleted (`Stop`).
    const sandbox = unsafeMakeSandboxHolder()

    /** The event as the log holds it, with the session's next `seq`. */
    const nextLogged = (turn: number, event: InternalEvent) => {
      seq += 1
      // A turn's `run.created` names the session's turn (issue 44): a client places the turn in the session's tree.
      return { seq, turn, payload: event.type === "preparing" ? { ...event, seq, session_turn: turn } : { ...event, seq } }
    }

    // A turn that was in flight when the process stopped never finished: its log says so, and the session is free.
    const stale = yield* repo.inFlight(sessionId)
    if (Option.isSome(stale)) {
      // Committed before the queue is cleaned up below: a turn whose end is logged is no longer owed.
      yield* log.commit({
        sessionId,
        fence,
        events: [nextLogged(stale.value.turn, { type: "error", code: "interrupted", message: "The server restarted during this turn." })]
      })
    }
    // Its run, too (a runner killed mid-turn, whose shard this runner now owns, left it `running`), with the credits
    // the ledger holds for its steps now.
    yield* repo.interruptRuns(sessionId, Option.map(stale, (t) => t.turn), MAX_STEPS)
    // Its hold is voided (docs/billing.md, "Holds"): the turn is not run again, so what it reserved goes back to the
    // payer now rather than when the hold expires. For good (`voidHold`): the cut turn's own settle may still be on
    // its way to the wallet (its runner stopped mid-call, or this runner restarted the session under the same fence,
    // which the wallet's fence check cannot tell apart), and once the void is answered none can post any more; the
    // turn's credits are then counted again, so one that posted between the count above and the void is in its run.
    // Beside the load, not in it: the payer's wallet may be on the runner that just stopped, and waiting for it (up to
    // the entity deadline, 12 s) held the session's next turns back (the fault checker's "long turn did not start").
    // In this runner's set, not the entity's scope: a session that restarts meanwhile does not cut it short.
    if (Option.isSome(stale) && Option.isSome(row)) {
      const turn = stale.value.turn
      yield* FiberSet.run(closing, runPayer.voidHold(row.value.accountId, `session:${sessionId}:${turn}`, fence).pipe(
        // Tried again as a turn's end is (the database may be restarting), for about 15 s.
        Effect.zipRight(repo.recountRun(sessionId, turnRunId(sessionId, turn), turn, MAX_STEPS).pipe(
          Effect.sandbox,
          Effect.retry({ schedule: END_RETRY, times: 10 }),
          Effect.unsandbox
        )),
        Effect.catchAllCause((cause) =>
          Effect.logWarning(`turn ${turn} of session ${sessionId}: its hold could not be voided (it expires) or its credits counted again`, cause)
        )
      ))
    }
    yield* repo.setStatus(sessionId, "idle")
    // Turns sent but not started when the runner that held them stopped: they run here, in the order sent.
    yield* repo.dequeueEnded(sessionId)
    const owed = yield* repo.queuedTurns(sessionId)
    // A cancel of a queued turn's run is in its row (runs.cancel_requested_at) as well: it holds across runners.
    const cancelledRuns = new Set(yield* runRecords.cancelled(owed.map((turn) => turnRunId(sessionId, turn.turn))))
    for (const turn of owed) {
      if (cancelledRuns.has(turnRunId(sessionId, turn.turn))) cancelledTurns.add(turn.turn)
      yield* enqueue(turn)
    }

    /**
     * What only a running turn uses, made per turn: an idle session (every active one, most of the time) does not
     * keep these closures (issue 28, heap per session).
     */
    const turnTools = () => {
      /** What the next write says besides its events: the status, if it changed, and the run's row, if just started. */
      const pendingParts = (): Partial<LogWrite> => {
        const parts: { status?: SessionStatus; run?: LogWrite["run"] } = {}
        if (statusChanged) {
          parts.status = status
          statusChanged = false
        }
        if (run !== undefined && !run.written) {
          parts.run = { record: run.record, outcome: Option.none() }
          run.written = true
        }
        return parts
      }

      const setStatus = (next: SessionStatus) => {
        if (next !== status) {
          status = next
          statusChanged = true
        }
      }

      /**
       * Logs an event (and what changed with it) through the group-committing writer: live subscribers see it once it
       * is committed. Returns once it is queued, in order with the session's other writes; never cut in half.
       */
      const record = (turn: number, event: InternalEvent) =>
        Effect.uninterruptible(Effect.gen(function*() {
          if (deleted || Option.isSome(stoppedBy)) return
          // A write of this session failed: `seq` cannot go on past it (a hole), so the turn stops here and its end
          // is written once the session read its position again. Nor does a runner that lost the shard write on.
          const stop = log.refused(sessionId)
            ? { code: "owner_lost", message: "This runner lost the session during the turn; the turn was stopped." }
            : log.failed(sessionId)
            ? { code: "storage_unavailable", message: "The session's log could not be written; the turn was stopped." }
            : !(yield* owner)
            ? { code: "owner_lost", message: "This runner lost the session during the turn; the turn was stopped." }
            : undefined
          if (stop !== undefined) {
            stoppedBy = Option.some(stop)
            const running = current
            // Not awaited: this runs in the turn's own fiber, which ends once this (uninterruptible) write returns.
            if (Option.isSome(running)) yield* Fiber.interruptFork(running.value.fiber)
            return
          }
          setStatus(event.type === "Ask" ? "waiting_approval" : status === "waiting_approval" ? "running" : status)
          yield* log.append({ sessionId, fence, events: [nextLogged(turn, event)], ...pendingParts() })
        }))

      /**
       * Writes a turn's end until it is written, as the same run (issue 33: an end lost in a database restart left the
       * turn queued, and the next load ran it again under a new run id and charged it twice). A failed attempt may have
       * committed all the same (its answer was lost): the log is asked first whether the turn ended. Otherwise the
       * session reads its position again (what was not written is gone; `seq` goes on from what was) and tries again.
       * A turn another runner closed meanwhile (it took the shard) is ended already: one end per turn, by the database.
       */
      const writeEnd = (turnNumber: number, terminal: Option.Option<InternalEvent>, parts: Omit<LogWrite, "sessionId" | "events">) =>
        Effect.gen(function*() {
          const retries = yield* Schedule.driver(END_RETRY)
          /** The run's `run.created`, when the write that failed took it (see below). */
          let start = Option.none<InternalEvent>()
          while (true) {
            const events: Array<LoggedEvent> = [
              ...Option.toArray(Option.map(start, (event) => nextLogged(turnNumber, event))),
              ...Option.toArray(Option.map(terminal, (event) => nextLogged(turnNumber, event)))
            ]
            const exit = yield* Effect.exit(log.commit({ sessionId, fence, ...parts, events }))
            if (Exit.isSuccess(exit)) return
            if (log.refused(sessionId) || !fences.fenceCurrent(fence)) {
              // Refused by its fence: the session has another owner, who closes this turn (as interrupted, with the
              // credits the ledger holds for it). Nothing of it is written from here.
              yield* Effect.logWarning(`the end of turn ${turnNumber} of session ${sessionId} was refused: this runner no longer owns the session`)
              return
            }
            yield* Effect.logWarning(`the end of turn ${turnNumber} of session ${sessionId} could not be written; trying again`, Cause.squash(exit.cause))
            yield* Effect.ignore(retries.next(undefined))
            const again = yield* Effect.exit(Effect.gen(function*() {
              if (yield* repo.turnEnded(sessionId, turnNumber)) return false
              seq = (yield* repo.positions(sessionId)).seq
              // A run's row is never in the log without its `run.created` (the event naming it, and its turn): when
              // the failed write took it, it is logged again, with the end (docs/sessions.md "Faults").
              const record = parts.run?.record
              start = record === undefined || (yield* repo.runStarted(sessionId, turnNumber, RunId.unchecked.make(record.id)))
                ? Option.none()
                : Option.some<InternalEvent>({
                  type: "preparing",
                  run_id: record.id,
                  agent: record.agent ?? record.agentId ?? "",
                  session_id: sessionId
                })
              yield* log.resume(sessionId)
              return true
            }))
            if (Exit.isSuccess(again) && !again.value) {
              seq = (yield* Effect.orElseSucceed(Effect.map(repo.positions(sessionId), (p) => p.seq), () => seq))
              yield* log.resume(sessionId)
              return
            }
          }
        })

      return { pendingParts, setStatus, record, writeEnd }
    }

    const runTurn = (turn: QueuedTurn) =>
      Effect.gen(function*() {
        if (Option.isNone(row) || deleted) return
        const { pendingParts, record, setStatus, writeEnd } = turnTools()
        const { accountId, agentIdentifier, endUserId, environmentId } = row.value
        const partition = { accountId, endUserId }
        if (cancelledTurns.delete(turn.turn)) {
          // Cancelled before it started: it ends here, in its place, having run nothing and cost nothing.
          const failure = { code: "interrupted", message: "The turn was cancelled before it started." }
          yield* writeEnd(turn.turn, Option.some({ type: "error", ...failure }), {
            dequeue: turn.turn,
            run: {
              record: { id: turnRunId(sessionId, turn.turn), agentId: null, agentVersion: null, payerId: accountId, endUserId, sessionId, parentRunId: null, agent: agentIdentifier },
              outcome: Option.some({ status: "cancelled", failureCode: failure.code, failureMessage: failure.message, inputTokens: 0, outputTokens: 0, creditsCharged: 0n, answerChars: 0, deniedTools: [] })
            }
          })
          return
        }
        const agent = yield* runs.runnable(agentIdentifier, accountId)
        if (Option.isNone(agent)) {
          // Its run ends too (a background message answered its id before the turn ran, and its row says `queued`).
          const failure = { code: "agent_unavailable", message: `The agent ${agentIdentifier} is not available.` }
          yield* writeEnd(turn.turn, Option.some({ type: "error", ...failure }), {
            dequeue: turn.turn,
            run: {
              record: { id: turnRunId(sessionId, turn.turn), agentId: null, agentVersion: null, payerId: accountId, endUserId, sessionId, parentRunId: null, agent: agentIdentifier },
              outcome: Option.some({ status: "failed", failureCode: failure.code, failureMessage: failure.message, inputTokens: 0, outputTokens: 0, creditsCharged: 0n, answerChars: 0, deniedTools: [] })
            }
          })
          return
        }
        setStatus("running")
        stoppedBy = Option.none()
        const runId = RunId.make(turnRunId(sessionId, turn.turn))
        let partial = ""
        // The turn's last event waits until the turn is in the history and the session is idle again: a client
        // that reads the end of its stream and asks at once sees the conversation as it now is.
        let terminal = Option.none<InternalEvent>()
        const emit = (event: InternalEvent) => {
          if (event.type === "text") partial += event.delta
          if (isTerminal(event)) return Effect.sync(() => void (terminal = Option.some(event)))
          // The turn's message rides on its `run.created`: a page reloaded mid-turn, or a second tab, shows the
          // user's side of each turn from the log, without guessing from what it sent (issue 48).
          return record(turn.turn, event.type === "preparing" ? { ...event, input: turn.message } : event)
        }
        // The run's row rides with the turn's writes: started with the next event, finished with the turn's end.
        const ledger = {
          start: (record: RunRecord) => Effect.sync(() => void (run = { record, outcome: Option.none(), written: false })),
          finish: (_: string, outcome: RunOutcome) =>
            Effect.sync(() => {
              if (run !== undefined) run.outcome = Option.some(outcome)
            })
        }
        // The turn it continues: the one it was sent under (a branch), or the leaf as it is now.
        const parent = Option.getOrElse(turn.parent ?? Option.none(), () => leaf)
        const prompt = yield* history.prompt(parent)
        const givenUp = yield* Deferred.make<void>()
        const fiber = yield* Effect.fork(engine.execute({
          runId,
          agent: agent.value,
          payer: partition,
          history: prompt,
          message: turn.message,
          budget: turn.budget,
          sessionId: Option.some(sessionId),
          workspace: sessionId,
          parentRunId: Option.none(),
          depth: 0,
          environmentId,
          sandbox,
          ledger,
          // The turn's identity, not the run's: whatever happens to the run, a step of this turn is charged once.
          chargeKey: `session:${sessionId}:${turn.turn}`,
          fence: owner,
          chargeFence: fence,
          givenUp: Deferred.await(givenUp)
        }, emit, runs.resolveSubagent))
        const running = { turn: turn.turn, fiber, rollback: false, givenUp }
        current = Option.some(running)
        const exit = yield* Fiber.await(fiber)
        current = Option.none()
        urgent.delete(turn.turn)
        if (deleted) return
        let messages: ReadonlyArray<Prompt.MessageEncoded>
        let outcome: string
        if (Exit.isSuccess(exit)) {
          messages = exit.value.messages
          outcome = exit.value.status
        } else {
          // Interrupted: the stream ends with run.failed, and what was said so far stays in the history.
          terminal = Option.some(Option.match(stoppedBy, {
            onNone: (): InternalEvent =>
              running.rollback
                ? { type: "error", code: "rolled_back", message: "The turn was cancelled by a newer message (multitask_strategy: rollback)." }
                : { type: "error", code: "interrupted", message: "The turn was interrupted." },
            onSome: (stop): InternalEvent => ({ type: "error", ...stop })
          }))
          messages = [
            { role: "user", content: [{ type: "text", text: turn.message }] },
            ...(partial.length > 0 ? [{ role: "assistant" as const, content: [{ type: "text" as const, text: partial }] }] : [])
          ]
          outcome = "interrupted"
        }
        // A rolled-back turn stays in the tree (its run, events and charges are its own) but off the leaf's path.
        if (running.rollback) outcome = "rolled_back"
        const json = JSON.stringify(messages)
        const saved: TurnRow = {
          turn: turn.turn,
          parentTurn: parent,
          runId,
          messages,
          chars: json.length,
          status: outcome,
          createdAt: new Date()
        }
        // The turn's end is one write: its run's row, the history, the session idle again, the last event, and the
        // turn off the queue. Waited for: the next turn starts from a history that holds this one.
        setStatus("idle")
        const finished = run === undefined ? undefined : { record: run.record, outcome: run.outcome }
        run = undefined
        const onPath = !running.rollback
        yield* writeEnd(turn.turn, terminal, {
          ...pendingParts(),
          run: finished,
          turn: saved,
          dequeue: turn.turn,
          ...(onPath ? { leaf: { turn: turn.turn } } : {})
        })
        stoppedBy = Option.none()
        if (onPath) {
          leaf = turn.turn
          history.remember({ chars: saved.chars, json }, turn.turn, parent)
        }
      })

    const entityContext = yield* Effect.context<Sharding.Sharding | Entity.CurrentAddress>()
    const entityScope = yield* Effect.scope
    /**
     * The worker's fiber, in the entity's scope. Made before the finalizer below, so that it closes after it: the
     * finalizer lets the sent turns end within their grace first, then interrupts the worker itself.
     */
    const worker = yield* FiberHandle.make<void, never>()
    /** Which worker runs (a count of the workers started), 0 when none does. */
    let working = 0
    let workers = 0

    // While the worker has work the entity must stay active (no passivation mid-turn).
    const keepAlive = new KeepAlive()

    /**
     * The worker: one turn at a time, in order, while there are turns; it ends when none is left (the next `enqueue`
     * starts another). The one finalizer below interrupts it, after the sent turns had their grace.
     */
    const work = (): Effect.Effect<void, never, Sharding.Sharding | Entity.CurrentAddress> => Effect.gen(function*() {
      for (;;) {
        const turn = queued.shift()
        if (turn === undefined) {
          yield* keepAlive.idle()
          // Checked again after `keepAlive.idle()` (it may wait): a turn sent meanwhile found this worker still running.
          if (queued.length > 0) continue
          // Said in the same step as the check: a turn sent from now on starts the next worker.
          working = 0
          return
        }
        yield* Metric.incrementBy(queuedTurns, -1)
        yield* keepAlive.busy()
        // A runner that cannot confirm it still holds the session starts nothing: it waits until its next shard-lock
        // refresh confirms it, or the shard moves and this entity ends (and the next owner runs the turn).
        while (!(yield* owner)) yield* Effect.sleep("250 millis")
        // The turn leaves the queue with its end's write. Not when interrupted: a turn cut by a shutdown is closed,
        // or run, by the next owner.
        yield* runTurn(turn).pipe(
          inFlight(runningTurns),
          Effect.catchAllCause((cause) => Effect.logError("session turn failed", cause)),
          Effect.ensuring(unfinished.add(-1))
        )
      }
    })
    /**
     * Starts the worker unless it runs. A worker that ended however (a defect outside a turn included) no longer
     * counts as running, so the next `Send` starts another.
     */
    const startWorker = Effect.suspend(() => {
      if (working !== 0) return Effect.void
      const id = working = ++workers
      // Replaces a worker that is only finishing (it said it was done); one that died does not block the next.
      return Effect.asVoid(FiberHandle.run(
        worker,
        Effect.provide(work(), entityContext).pipe(Effect.onExit(() => Effect.sync(() => {
          if (working === id) working = 0
        })))
      ))
    })

    // One finalizer for the whole session, added to the scope directly (`Effect.addFinalizer` keeps a copy of the
    // fiber's refs per finalizer, for every active session). In order: a runner giving the session up (SIGTERM, or
    // its shard moving to a runner that joined) lets the sent turns end within SHUTDOWN_GRACE rather than cutting
    // them (the next owner could only close them as interrupted), and the shard is not released until this returns;
    // then the worker stops; turns still queued no longer wait anywhere; the sandbox goes.
    yield* Effect.uninterruptible(Effect.zipRight(
      Metric.increment(activeSessions),
      Scope.addFinalizer(
        entityScope,
        Effect.gen(function*() {
          // Only a shard this runner holds, verified, is handed over. One it lost (its locks gone, or it was paused
          // past them) is someone else's already, and a turn running on would bill and write as a second owner. One
          // unverified (a lock refresh failed, or this process stalled past `failoverBudget.stall`) is mostly being
          // given up because the lock storage failed (a database restart: the cluster releases every shard and
          // acquires them again; a hand-over right after a stall loses its grace too, not money: the next activation
          // settles): the running turn is cut at once, and its settle lets go of a wallet
          // that may be this runner's, whose shard waits behind this very release (the fault checker: wallets
          // unanswered for 25 s after an 8 s PostgreSQL stop, a turn's settle and this wait holding the release).
          // The next activation voids the turn's hold and counts it from the ledger.
          if (fences.shardState(address.shardId) === "held") {
            // Finalizers are uninterruptible: without this the timeout could not stop the wait.
            // A stop's grace is shared with the steps before (`Stopping`): what is left of it; a hand-over's is whole.
            yield* Effect.timeoutOption(Effect.interruptible(unfinished.drained()), yield* stopping.left)
          } else if (Option.isSome(current)) {
            yield* Deferred.succeed(current.value.givenUp, undefined)
          }
          yield* FiberHandle.clear(worker)
          yield* unfinished.release()
          yield* log.forget(sessionId)
          yield* Metric.incrementBy(queuedTurns, -queued.length)
          yield* Metric.incrementBy(activeSessions, -1)
          yield* sandbox.release
        })
      )
    ))
    started = true
    if (queued.length > 0) yield* startWorker

    /** A stream on another runner follows the session (one on this runner is told here, without a `NOTIFY`). */
    const followedBy = (follower: string | undefined) =>
      follower === undefined || follower === hub.self ? Effect.void : log.follow(sessionId)

    return {
      Send: ({ payload }) =>
        Effect.gen(function*() {
          if (deleted || Option.isNone(row)) {
            return yield* new SessionGone({ message: `No session ${sessionId}.` })
          }
          // Double-texting (docs/sessions.md): what a message does while a turn runs or waits.
          const strategy = payload.strategy ?? "enqueue"
          const busy = Option.isSome(current) || queued.length > 0
          if (busy && strategy === "reject") {
            return yield* new SessionBusy({ message: "A turn is running in this session (multitask_strategy: reject)." })
          }
          yield* followedBy(payload.follower)
          lastTurn += 1
          const turn: QueuedTurn = {
            turn: lastTurn,
            message: payload.message,
            budget: Option.fromNullable(payload.budget),
            parent: payload.parent === undefined ? Option.none() : Option.some(payload.parent)
          }
          yield* log.commit({ sessionId, fence, enqueue: turn })
          const first = busy && (strategy === "interrupt" || strategy === "rollback")
          yield* enqueue(turn, first)
          const running = current
          if (first && Option.isSome(running)) {
            if (strategy === "rollback") running.value.rollback = true
            yield* Fiber.interrupt(running.value.fiber)
          }
          return { turn: turn.turn }
        }),
      SetLeaf: ({ payload }) =>
        Effect.gen(function*() {
          if (deleted || Option.isNone(row)) {
            return yield* new SessionGone({ message: `No session ${sessionId}.` })
          }
          if (Option.isSome(current) || queued.length > 0) return false
          yield* log.commit({ sessionId, fence, leaf: { turn: payload.leaf } })
          leaf = payload.leaf
          return true
        }),
      Wake: ({ payload }) => Effect.as(followedBy(payload.follower), Option.isSome(current)),
      Reload: () =>
        Effect.gen(function*() {
          row = turnPartOf(yield* repo.byId(sessionId))
          return Option.isSome(row)
        }),
      Interrupt: () =>
        Effect.gen(function*() {
          if (Option.isNone(current)) return false
          yield* Fiber.interrupt(current.value.fiber)
          return true
        }),
      CancelTurn: ({ payload }) =>
        Effect.gen(function*() {
          const running = current
          if (Option.isSome(running) && turnRunId(sessionId, running.value.turn) === payload.runId) {
            yield* Fiber.interrupt(running.value.fiber)
            return true
          }
          const waiting = queued.find((turn) => turnRunId(sessionId, turn.turn) === payload.runId)
          if (waiting === undefined) return false
          cancelledTurns.add(waiting.turn)
          return true
        }),
      Stop: () =>
        Effect.gen(function*() {
          deleted = true
          unfinished.abandon()
          const waiting = queued.splice(0)
          yield* unfinished.add(-waiting.length)
          yield* Metric.incrementBy(queuedTurns, -waiting.length)
          const running = current
          if (Option.isSome(running)) yield* Fiber.interrupt(running.value.fiber)
          const ended = [...(Option.isSome(running) ? [running.value.turn] : []), ...Array.from(waiting, (turn) => turn.turn)]
          for (const turn of ended) {
            yield* hub.publish(sessionId, {
              _tag: "dropped",
              turn,
              event: { type: "error", code: "session_deleted", message: "The session was deleted." }
            })
          }
          yield* hub.publish(sessionId, { _tag: "closed" })
          yield* sandbox.release
          return Option.isSome(running) || ended.length > 0
        })
    }
  }),
  { maxIdleTime: "5 minutes" }
)
})).pipe(Layer.provide([SessionsConfig.Default, SessionsRepo.Default, SessionLog.Default, SessionHub.Default, Runs.Default, RunEngine.Default, RunRecords.Default]))

