import { ClusterError, Sharding } from "@effect/cluster"
import { Effect, Either, Exit, Metric } from "effect"
import { makeEntityBatcher, makeEntityCaller, shardOf } from "../platform/Cluster.js"
import type { Fence } from "../platform/cluster/Fences.js"
import type { Micros } from "../platform/Money.js"
import { walletChargeMessages, walletCharges, walletRequests } from "../platform/telemetry/Metrics.js"
import type { EntryInfo } from "./Repo.js"
import { type ChargeError, type ChargeRequest, Wallet } from "./WalletRpc.js"
import type { Movement } from "./Domain.js"
import { WalletFailure } from "./Domain.js"

type ClusterFailure =
  | ClusterError.MailboxFull
  | ClusterError.AlreadyProcessingMessage
  | ClusterError.PersistenceError
  | WalletFailure

const isClusterFailure = (error: unknown): error is ClusterFailure =>
  error instanceof ClusterError.MailboxFull || error instanceof ClusterError.AlreadyProcessingMessage ||
  error instanceof ClusterError.PersistenceError || error instanceof WalletFailure

/** The cluster's own failures (a full mailbox, storage) and a commit that failed are not the caller's: defects, a 500. */
const orDieOnCluster = <A, E, R>(effect: Effect.Effect<A, E | ClusterFailure, R>): Effect.Effect<A, Exclude<E, ClusterFailure>, R> =>
  Effect.catchIf(effect, isClusterFailure, Effect.die)

/** The series `Wallets` counts into, tagged once here (updated without an effect, as a message leaves). */
const chargesSentHere = walletCharges.pipe(Metric.tagged("via", "message"), Metric.tagged("to", "this_runner"))
const chargesSentAway = walletCharges.pipe(Metric.tagged("via", "message"), Metric.tagged("to", "another_runner"))
const messagesHere = walletChargeMessages.pipe(Metric.tagged("to", "this_runner"))
const messagesAway = walletChargeMessages.pipe(Metric.tagged("to", "another_runner"))

type ChargeEntry = Partial<EntryInfo> & Pick<EntryInfo, "kind" | "scope" | "key">

/** Counts one request of `kind` made of a wallet (`wallet_requests_total`) as it is made: one round trip each. */
const requestsOf = (kind: string) => {
  const series = walletRequests.pipe(Metric.tagged("kind", kind))
  return <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    Effect.suspend(() => {
      series.unsafeUpdate(1, [])
      return effect
    })
}
const countCharge = requestsOf("charge")
const countBalance = requestsOf("balance")
const countCredit = requestsOf("credit")
const countHold = requestsOf("hold")
const countSettle = requestsOf("settle")

/** A charge a settle posts: one step of a run, under its own key. */
export interface SettledCharge {
  readonly amount: Micros
  readonly entry: ChargeEntry
}

/** One charge of one wallet, as the caller-side batcher carries it. */
interface ChargeOf {
  readonly userId: string
  readonly request: ChargeRequest
}

/**
 * What the rest of the platform calls: the wallet of a user, wherever in the cluster it lives.
 *
 * Every request is a cluster message (issue 45 item 1: one road into the actor), sent from this service's fibers
 * (`makeEntityCaller`, with its deadline and its resends after a hand-over). A message to a wallet of this runner is
 * delivered into its mailbox without being encoded (`platform/Cluster.ts`); the entity takes all that waits in its
 * mailbox at once and decides and commits it together, so a hot wallet still pays one commit per batch. A run's or
 * turn's several charges travel in one message (`settle`).
 */
export class Wallets extends Effect.Service<Wallets>()("atrium/billing/Wallets", {
  scoped: Effect.gen(function*() {
    const makeClient = yield* Wallet.client
    const sharding = yield* Sharding.Sharding
    /** Whether this runner holds the wallet's shard now (where its next message goes: metrics only). */
    const ownedHere = (userId: string) => sharding.hasShardId(shardOf(sharding, Wallet, userId))
    /**
     * How a message to a wallet is sent: again after a hand-over cut it (`resendWhenCut`: every wallet message is
     * keyed or a read), and again at once when its shard moves while it is on its way (`shard`: the runner it went to
     * may be stopped, and nothing else would cut it; issue 42 item 7).
     */
    const resendable = (userId: string) => ({ resendWhenCut: true, shard: shardOf(sharding, Wallet, userId) })
    const clients = new Map<string, ReturnType<typeof makeClient>>()
    /** The client of one wallet (an address and a proxy): made once per wallet, not per call. */
    const client = (userId: string) => {
      let c = clients.get(userId)
      if (c === undefined) {
        if (clients.size >= 10_000) clients.clear()
        c = makeClient(userId)
        clients.set(userId, c)
      }
      return c
    }
    // Every message goes through `toEntity`: never from the caller's fiber, so an active wallet does not keep the
    // request that woke it alive (see makeEntityCaller).
    const toEntity = yield* makeEntityCaller

    /**
     * Sends the charges of one wallet as one `Charges` message, each answered on its own, in order. A message cut by a
     * hand-over (the wallet's shard moved, or its runner lost its shard locks) is sent again (`resendWhenCut`): each
     * charge carries its key, so one the wallet did commit is answered from the ledger, not charged twice.
     */
    const sendCharges = (batch: ReadonlyArray<ChargeOf>) => {
      const userId = batch[0]!.userId
      const charges = batch.map((c) => c.request)
      return toEntity(
        Effect.suspend(() => {
          // Counted as it leaves, each resend again: what went to another runner crossed the runner socket.
          const [messages, sent] = ownedHere(userId) ? [messagesHere, chargesSentHere] : [messagesAway, chargesSentAway]
          messages.unsafeUpdate(1, [])
          sent.unsafeUpdate(charges.length, [])
          return client(userId).Charges({ charges })
        }),
        resendable(userId)
      ).pipe(
        Effect.map((answers) =>
          answers.map((answer): Exit.Exit<Movement, ChargeError | ClusterFailure> =>
            Either.isRight(answer) ? Exit.succeed(answer.right) : Exit.fail(answer.left)
          )
        ),
        // A message that failed as a whole fails each of its charges the same way.
        Effect.catchAllCause((cause) => Effect.succeed(batch.map(() => Exit.failCause(cause))))
      )
    }
    /** One message per wallet at a time from this process; what arrives meanwhile leaves together after it. */
    const chargeBatched = yield* makeEntityBatcher(sendCharges, (c: ChargeOf) => c.userId)
    const chargeByMessage = (userId: string, request: ChargeRequest) => chargeBatched({ userId, request })

    const noEvent = { appId: null, event: null, metadata: null, description: null }
    const chargeWith = (userId: string, request: ChargeRequest) => countCharge(chargeByMessage(userId, request).pipe(orDieOnCluster))
    return {
      charge: (userId: string, amount: Micros, entry: ChargeEntry, dailyCap: Micros | null = null) =>
        chargeWith(userId, { amount, entry: { ...noEvent, ...entry }, dailyCap }).pipe(
          // Only a charge made with a caller's fence is refused as stale (`chargeFor`).
          Effect.catchTag("StaleOwner", Effect.die)
        ),
      /**
       * A charge for an entity of another shard (a session's turn), made under that entity's `fence`: the wallet's
       * commit refuses it in the same statement once the fence is stale (`StaleOwner`), so a runner that lost the
       * session bills nothing, wherever the wallet lives (issue 42 item 7).
       */
      chargeFor: (userId: string, amount: Micros, entry: ChargeEntry, fence: Fence | null) =>
        chargeWith(userId, { amount, entry: { ...noEvent, ...entry }, dailyCap: null, ...(fence === null ? {} : { fence }) }),
      credit: (userId: string, amount: Micros, entry: Partial<EntryInfo> & Pick<EntryInfo, "kind" | "scope" | "key">) =>
        countCredit(toEntity(client(userId).Credit({ amount, entry: { ...noEvent, ...entry } }), resendable(userId))).pipe(
          orDieOnCluster,
          Effect.withSpan("Wallets.credit")
        ),
      balance: (userId: string) =>
        countBalance(toEntity(client(userId).Balance(), resendable(userId))).pipe(
          Effect.map((reply) => reply.balance),
          orDieOnCluster
        ),
      /** The balance and what holds reserve of it (`GET /api/wallet`): available = balance - held. */
      funds: (userId: string) =>
        countBalance(toEntity(client(userId).Balance(), resendable(userId))).pipe(
          Effect.map((reply) => ({ balance: reply.balance, held: reply.held ?? 0n })),
          orDieOnCluster
        ),
      /**
       * Places, extends or resumes the hold `holdId` at `amount` in all, as far as the wallet's available credits
       * allow (docs/billing.md, "Holds"): the hold's amount now (0 when nothing is available) and when the wallet
       * voids it unless asked again (ms since the epoch; a wallet that did not say: never renewed). One round trip.
       */
      hold: (userId: string, holdId: string, amount: Micros) =>
        countHold(toEntity(client(userId).Hold({ hold: holdId, amount }), resendable(userId))).pipe(
          Effect.map((reply) => ({ amount: reply.hold, expiresAt: reply.expiresAt ?? Number.MAX_SAFE_INTEGER })),
          orDieOnCluster
        ),
      /**
       * Ends the hold `holdId`: voids what is left of it and posts `charges` in order, each a ledger entry under its
       * own key (a settle sent again replays them), made under the caller's `fence` as `chargeFor`'s. One answer per
       * charge: its movement, or why it was refused. One round trip. `final`: the next owner of a cut run voids its
       * hold, and the run's own late settles post nothing more (`WalletRpc`'s `Settle`).
       */
      settle: (userId: string, holdId: string, charges: ReadonlyArray<SettledCharge>, fence: Fence | null, final = false) =>
        countSettle(toEntity(
          client(userId).Settle({
            hold: holdId,
            ...(final ? { final } : {}),
            charges: charges.map((c): ChargeRequest => ({
              amount: c.amount,
              entry: { ...noEvent, ...c.entry },
              dailyCap: null,
              ...(fence === null ? {} : { fence })
            }))
          }),
          resendable(userId)
        )).pipe(orDieOnCluster)
    } as const
  })
}) {}
