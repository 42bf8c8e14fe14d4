import { Cause, Deferred, Effect, Exit, Metric } from "effect"
import { groupCommit } from "../platform/GroupCommit.js"
import { timed, walletBatchSize, walletCommitDuration } from "../platform/telemetry/Metrics.js"
import { type CommitOutcome, LedgerRepo, type WalletCommit } from "./Repo.js"

/** At most this many wallets, and about this many entries, in one shared statement. */
const MAX_WALLETS_PER_COMMIT = 512
const MAX_ENTRIES_PER_COMMIT = 4096

interface Pending {
  readonly commit: WalletCommit
  readonly done: Deferred.Deferred<CommitOutcome, unknown>
  /** Its wallet stopped waiting before the writer took it: it is not written. */
  withdrawn: boolean
}

/**
 * The statements `batch` is written in: in arrival order, each with at most one batch per wallet (a wallet waits for
 * its outcome before it sends again, so a second one is a wallet that was interrupted and started again: it goes in
 * the next statement, after the first) and about `MAX_ENTRIES_PER_COMMIT` entries.
 */
const statements = (batch: ReadonlyArray<Pending>): Array<Array<Pending>> => {
  const out: Array<Array<Pending>> = []
  let rest = batch
  while (rest.length > 0) {
    const statement: Array<Pending> = []
    const later: Array<Pending> = []
    const wallets = new Set<string>()
    let entries = 0
    for (const pending of rest) {
      const fits = statement.length < MAX_WALLETS_PER_COMMIT &&
        (statement.length === 0 || entries + pending.commit.entries.length <= MAX_ENTRIES_PER_COMMIT)
      if (fits && !wallets.has(pending.commit.userId)) {
        statement.push(pending)
        wallets.add(pending.commit.userId)
        entries += pending.commit.entries.length
      } else {
        later.push(pending)
      }
    }
    out.push(statement)
    rest = later
  }
  return out
}

/**
 * Group commit across wallets. Every wallet entity of this process hands its decided batch here; one fiber writes
 * whatever is waiting in ONE statement (`LedgerRepo.commitWallets`), one statement at a time (`groupCommit`), and
 * hands each wallet its own outcome.
 *
 * If the shared statement fails (the database refused something: a key another process took a moment earlier, a
 * balance past what a bigint holds), nothing of it was written; each wallet's batch is then tried alone, so the
 * refusal fails only the wallet it belongs to.
 */
export class WalletCommitter extends Effect.Service<WalletCommitter>()("atrium/billing/WalletCommitter", {
  scoped: Effect.gen(function*() {
    const repo = yield* LedgerRepo

    const writeStatement = (statement: ReadonlyArray<Pending>) =>
      Effect.gen(function*() {
        yield* Metric.update(walletBatchSize, statement.length)
        const shared = yield* Effect.exit(repo.commitWallets(statement.map((p) => p.commit)).pipe(timed(walletCommitDuration)))
        if (Exit.isSuccess(shared)) {
          yield* Effect.forEach(statement, (p, i) => Deferred.succeed(p.done, shared.value[i]!), { discard: true })
          return
        }
        if (statement.length === 1) {
          yield* Deferred.failCause(statement[0]!.done, shared.cause)
          return
        }
        yield* Effect.logWarning("shared wallet commit failed; committing its wallets one by one", Cause.squash(shared.cause))
        for (const pending of statement) {
          const alone = yield* Effect.exit(repo.commitWallets([pending.commit]))
          yield* Deferred.done(pending.done, Exit.map(alone, (outcomes) => outcomes[0]!))
        }
      }).pipe(
        // Whatever happens to the statement, every wallet in it gets an answer.
        Effect.catchAllCause((cause) => Effect.forEach(statement, (p) => Deferred.failCause(p.done, cause), { discard: true }))
      )

    const offer = yield* groupCommit<Pending>({
      maxBatch: MAX_WALLETS_PER_COMMIT,
      // A batch withdrawn by now is not written; one withdrawn later is (its wallet no longer waits for the outcome,
      // and a wallet started again reads the ledger first).
      write: (batch) => Effect.forEach(statements(batch.filter((p) => !p.withdrawn)), writeStatement, { discard: true })
    })

    return {
      /** Writes `commit` (with the batches of other wallets ready at the same time) and tells what became of it. */
      commit: (commit: WalletCommit): Effect.Effect<CommitOutcome, unknown> =>
        Effect.gen(function*() {
          const pending: Pending = { commit, done: yield* Deferred.make<CommitOutcome, unknown>(), withdrawn: false }
          yield* offer(pending)
          // A wallet interrupted before its batch was taken withdraws it; once taken, the outcome is the database's.
          return yield* Deferred.await(pending.done).pipe(Effect.onInterrupt(() => Effect.sync(() => pending.withdrawn = true)))
        })
    } as const
  }),
  dependencies: [LedgerRepo.Default]
}) {}
