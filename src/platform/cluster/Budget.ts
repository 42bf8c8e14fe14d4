import { Duration } from "effect"

/**
 * The failover budget (issues 26 and 33; docs/operations.md "Fault model"): every timing of shard ownership, of the
 * runners' watch over each other, and of the HTTP side's resends of a message to a moved entity derives from here.
 *
 * - A killed runner's locks go when PostgreSQL sees its connections close; a paused one's when the others, having
 *   seen its heartbeat (`beat`, every 0.5 s) stand still for `silent`, end its database sessions and take it out of
 *   the assignment. Its shards are then acquired within `assignments` + one acquisition: well within `failover`.
 * - A runner that did not run for `stall` (its own timer) holds nothing verified until a lock refresh confirms it;
 *   `stall` < `silent`, so a runner the others cut always knows it was away when it wakes.
 * - A message cut by a hand-over is sent again every `resendPause` until `entityDeadline`, which outlasts a failover
 *   and a lock expiry, and is answered within the 15 s every request is promised.
 */
export const failoverBudget = {
  /** What the cluster promises: a dead or paused runner's wallets and sessions answer on another runner within. */
  failover: Duration.seconds(5),
  /** Each runner's own heartbeat for the others' watch (apart from the lock refresh). */
  beat: Duration.millis(500),
  /** A runner whose heartbeat stood still this long (by the watcher's continuous watch) is silent: cut off. */
  silent: Duration.millis(2_500),
  /**
   * And it answered no ping (each given `pingTimeout`) for `pingSilent`: pings start once its heartbeat stood still
   * for half of `silent`, so a paused runner is cut at `silent`, and one that runs but could not beat (its database
   * connections reconnecting after an outage) is not cut.
   */
  pingTimeout: Duration.millis(5_000),
  pingSilent: Duration.millis(1_500),
  /**
   * A watcher whose own timer lagged this much (a stall of its own) within the last `silent` judges nobody: on a starved host every
   * runner beats and answers late, and cutting a live runner moves all its shards for nothing (at load 30 on two
   * cores, false cuts and the hand-overs they caused kept the cluster from recovering after a PostgreSQL restart).
   */
  watcherLag: Duration.millis(1_500),
  /** A gap this long in the process's own 250 ms timer: it did not run, what it holds is unverified. */
  stall: Duration.millis(1_500),
  /**
   * Shard locks are refreshed every 4 s and must answer within that (with 2 s, two busy workers on two cores missed
   * it now and then and gave up every shard at once; at 3 s it still happened every ~10 s at load 30); a heartbeat
   * row counts for 12 s. Neither bounds failover any more: the watch and the advisory locks do.
   */
  lockRefresh: Duration.seconds(4),
  lockExpiration: Duration.seconds(12),
  /** How often each runner reads the runners' table and recomputes the assignment. */
  assignments: Duration.millis(500),
  /** How often a shard that could not be acquired (its lock still held) is tried again; also the message poll. */
  acquireRetry: Duration.seconds(1),
  healthCheck: Duration.seconds(2),
  resendPause: Duration.millis(250),
  entityDeadline: Duration.seconds(12)
} as const

export const clusterTimings = {
  shardLockRefreshInterval: failoverBudget.lockRefresh,
  shardLockExpiration: failoverBudget.lockExpiration,
  refreshAssignmentsInterval: failoverBudget.assignments,
  runnerHealthCheckInterval: failoverBudget.healthCheck,
  sendRetryInterval: "100 millis",
  entityMessagePollInterval: failoverBudget.acquireRetry
} as const
