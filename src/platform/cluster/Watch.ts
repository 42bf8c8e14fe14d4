import { RunnerAddress, Runners } from "@effect/cluster"
import { Duration, Effect, Layer, Schedule } from "effect"
import { DatabaseSessions } from "../Database.js"
import { failoverBudget } from "./Budget.js"
import { ShardFences } from "./Fences.js"
import { RunnersRepo } from "./Repo.js"

const STALL_MS = Duration.toMillis(failoverBudget.stall)
const SILENT_MS = Duration.toMillis(failoverBudget.silent)
const PING_TIMEOUT = failoverBudget.pingTimeout
const PING_SILENT_MS = Duration.toMillis(failoverBudget.pingSilent)
/**
 * A woken runner is not judged for this long after it beats again: it reconnects everything at once and may beat late
 * once. Short: it is judged by its unanswered pings too, and after a hand-over back it owns shards again, so a second
 * pause must be cut as the first was (15 s here left a runner paused again 10 s after waking holding its shards for
 * 7.5 s in the fault checker, its quietest run).
 */
const REJOIN_GRACE_MS = 3_000

/**
 * Runners watch each other (issues 26 and 33): PostgreSQL never sees a paused process's connections close (the kernel
 * keeps answering its keepalives), so a SIGSTOPped runner kept its advisory shard locks for the whole pause. Every
 * runner files its connections' `application_name` under its address, writes its own heartbeat every `beat`
 * (migration 0017) and reads the others' in the same statement, and cuts off one whose heartbeat has not moved for `silent` of its
 * own continuous watch, and that answered no ping meanwhile (a runner that runs but could not beat, after a
 * database outage, answers): it ends its database sessions (`pg_terminate_backend`: same role), so its advisory locks go,
 * and takes it out of the assignment (the cluster's `healthy` flag, set back by the health check once it answers
 * pings again), so its shards move at once instead of when its heartbeat row expires. The paused runner, when it
 * wakes, finds its connections gone and its confirmations forgotten (`ShardFences.shardConfirmed`); its writes carry the
 * generations it held, which the database refuses (`ShardFences.fenceOf`).
 *
 * Judged by what the watcher saw, not by the heartbeat's age: after a database outage every heartbeat is old, and the
 * first runner back must not end the others. A watch that fails (the database is away), a watcher that did not run
 * (paused itself) or whose own heartbeat is late starts over.
 */
export const watchRunners = (address: RunnerAddress.RunnerAddress) =>
  Layer.scopedDiscard(Effect.gen(function*() {
    const repo = yield* RunnersRepo
    const runners = yield* Runners.Runners
    const fences = yield* ShardFences
    const { applicationName } = yield* DatabaseSessions
    const self = `${address.host}:${address.port}`
    yield* Effect.acquireRelease(
      repo.register(self, applicationName).pipe(Effect.retry(Schedule.spaced("1 second")), Effect.orDie),
      () => Effect.ignore(repo.unregister(self))
    )
    // Out of the watch before the heartbeat stops: a runner stopping (SIGTERM, its turns finishing) is not silent.
    yield* Effect.addFinalizer(() => Effect.ignore(repo.unregister(self)))
    /** Each other runner's heartbeat as last seen, and since when (this process's clock) it has been that. */
    const seen = new Map<string, { beat: string; since: number; moved: boolean }>()
    /**
     * Runners this watcher cut, and when. One that beats again (it woke) is not judged for `REJOIN_GRACE_MS` after
     * that: waking, it reconnects everything on a loaded host and may beat late once.
     */
    const cutAt = new Map<string, number>()
    const rejoined = new Map<string, number>()
    /**
     * When each runner whose heartbeat stands still last answered a ping on its runner port. A runner that answers
     * pings runs: its heartbeat is late for another reason (its database connections reconnecting after an outage,
     * a slow database), and it is not cut. A paused one's kernel accepts the connection, but nobody answers.
     */
    const answered = new Map<string, number>()
    /** The ping in flight to each runner, since when: one answered late still counts (a starved runner is slow). */
    const pinging = new Map<string, number>()
    /**
     * When the first ping went unanswered since each runner fell still. Not the ping in flight: a killed runner's port
     * refuses at once, so its pings never stay out, and judging by the one in flight never cut it: its shards waited
     * for its heartbeat row to expire (12 s) whenever the cluster's own health check, a singleton, had died with it.
     */
    const unanswered = new Map<string, number>()
    const ping = (runner: string) =>
      Effect.suspend(() => {
        if (pinging.has(runner)) return Effect.void
        pinging.set(runner, Date.now())
        if (!unanswered.has(runner)) unanswered.set(runner, Date.now())
        const [host, port] = [runner.slice(0, runner.lastIndexOf(":")), Number(runner.slice(runner.lastIndexOf(":") + 1))]
        return runners.ping(RunnerAddress.make(host, port)).pipe(
          Effect.timeout(PING_TIMEOUT),
          Effect.tap(() => Effect.sync(() => { answered.set(runner, Date.now()); unanswered.delete(runner) })),
          Effect.ignore,
          Effect.ensuring(Effect.sync(() => pinging.delete(runner))),
          Effect.forkScoped,
          Effect.asVoid
        )
      })
    /**
     * Runners being cut now. A cut (ending its sessions, waiting for them to go, the assignment) runs in a fiber of its
     * own: the watch is also this runner's heartbeat, which must not stand still while another runner is cut.
     */
    const cutting = new Set<string>()
    const cutOff = (row: { readonly address: string; readonly applicationName: string }, now: number) =>
      Effect.gen(function*() {
        const ended = yield* repo.cut(row.applicationName)
        seen.delete(row.address)
        answered.delete(row.address)
        unanswered.delete(row.address)
        cutAt.set(row.address, now)
        // Its locks go when its sessions have ended (asynchronous): then it leaves the assignment, and the others
        // acquire its shards at their next assignment refresh.
        for (let i = 0; i < 10 && (yield* repo.remaining(row.applicationName)) > 0; i++) yield* Effect.sleep("100 millis")
        yield* repo.markUnhealthy(row.address)
        yield* Effect.logWarning(`runner ${row.address} silent for ${SILENT_MS / 1000} s: ended its ${ended} database sessions and took it out of the assignment`)
      }).pipe(
        Effect.catchAllCause(() => Effect.sync(() => seen.clear())),
        Effect.ensuring(Effect.sync(() => cutting.delete(row.address))),
        Effect.forkScoped,
        Effect.asVoid
      )
    let lastWatch = Date.now()
    const watch = Effect.gen(function*() {
      const now = Date.now()
      if (now - lastWatch > STALL_MS) seen.clear()
      lastWatch = now
      const rows = yield* repo.beatAndWatch(self, SILENT_MS / 2000)
      fences.noteOthers(rows.length)
      for (const row of rows) {
        if (cutting.has(row.address)) continue
        const before = seen.get(row.address)
        if (before === undefined || before.beat !== row.beat || !row.selfFresh) {
          // Judged only once it was seen to beat (not a runner still starting).
          seen.set(row.address, { beat: row.beat, since: now, moved: before !== undefined && before.beat !== row.beat })
          answered.set(row.address, now)
          unanswered.delete(row.address)
          if (before !== undefined && before.beat !== row.beat && cutAt.has(row.address)) {
            cutAt.delete(row.address)
            rejoined.set(row.address, now)
          }
          continue
        }
        if (!before.moved || now - (rejoined.get(row.address) ?? -Infinity) < REJOIN_GRACE_MS) continue
        // Still for a second: ask it whether it runs, every watch, until it beats again. Early enough that a ping has
        // been out for `pingSilent` by the time it is `silent`: a paused runner is cut at `silent`, not later.
        if (now - before.since >= SILENT_MS - PING_SILENT_MS) yield* ping(row.address)
        if (now - before.since < SILENT_MS) continue
        // It answered since it fell still, or its pings have not gone unanswered for `pingSilent` yet: not judged now.
        if ((answered.get(row.address) ?? -Infinity) > before.since) continue
        if (now - (unanswered.get(row.address) ?? now) < PING_SILENT_MS) continue
        fences.tick()
        if (fences.laggedWithin(SILENT_MS)) continue
        cutting.add(row.address)
        yield* cutOff(row, now)
      }
    }).pipe(Effect.catchAllCause(() => Effect.sync(() => seen.clear())))
    // The heartbeat and the watch in one statement every `beat` (`RunnersRepo.beatAndWatch`).
    yield* watch.pipe(Effect.delay(failoverBudget.beat), Effect.forever, Effect.forkScoped)
  }))
