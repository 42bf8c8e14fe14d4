import { ClusterError, Sharding } from "@effect/cluster"
import { Cause, Effect, Either, Exit, Metric } from "effect"
import * as Crypto from "node:crypto"
import { makeEntityBatcher, makeEntityCaller, shardOf } from "../platform/Cluster.js"
import type { Fence } from "../platform/cluster/Fences.js"
import type { UserId } from "../platform/Ids.js"
import type { Micros } from "../platform/Money.js"
import { walletChargeMessages, walletCharges, walletRequests } from "../platform/telemetry/Metrics.js"
import type { EntryInfo } from "./Repo.js"
import { type ChargeError, type ChargeRequest, Wallet, WalletRelay } from "./WalletRpc.js"
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
  readonly userId: UserId
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
/** How long charges for other runners' wallets go directly after a relay failed as a whole. */
const RELAYS_OFF_MS = 5 * 60_000

export class Wallets extends Effect.Service<Wallets>()("atrium/billing/Wallets", {
  scoped: Effect.gen(function*() {
    const makeClient = yield* Wallet.client
    const sharding = yield* Sharding.Sharding
    /** Whether this runner holds the wallet's shard now (where its next message goes: metrics only). */
    const ownedHere = (userId: UserId) => sharding.hasShardId(shardOf(sharding, Wallet, userId))
    /**
     * How a message to a wallet is sent: again after a hand-over cut it (`resendWhenCut`: every wallet message is
     * keyed or a read), and again at once when its shard moves while it is on its way (`shard`: the runner it went to
     * may be stopped, and nothing else would cut it; issue 42 item 7).
     */
    const resendable = (userId: UserId) => ({ resendWhenCut: true, shard: shardOf(sharding, Wallet, userId) })
    const clients = new Map<string, ReturnType<typeof makeClient>>()
    /** The client of one wallet (an address and a proxy): made once per wallet, not per call. */
    const client = (userId: UserId) => {
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
    const makeRelay = yield* WalletRelay.client
    /** Where each wallet of another runner lives, as its last relay answered: what its charges travel with. */
    const runnerOf = new Map<string, string>()
    /**
     * Sends the charges of wallets of another runner as one `Relay` message (issue 45 item 4: one round trip on the
     * runner socket for many wallets), to the relay on the first wallet's shard; each wallet's charges are then one
     * `Charges` message into its own mailbox there, answered in order. A wallet the relay did not answer (not on its
     * runner, or cut there) is sent its charges directly, and where it lives is learned again.
     */
    /**
     * Until when (ms since the epoch) charges for another runner's wallets go directly: a relay failed as a whole. A
     * runner of an earlier release has no relay entity, and the cluster holds a message for an unregistered entity
     * until its deadline, so without this every batch for that runner would wait 12 s before going directly.
     */
    let relaysOffUntil = 0
    const relaying = () => Date.now() >= relaysOffUntil
    const relayCharges = (batch: ReadonlyArray<ChargeOf>) => {
      const byWallet = new Map<string, Array<number>>()
      batch.forEach((c, i) => {
        const indices = byWallet.get(c.userId)
        if (indices === undefined) byWallet.set(c.userId, [i])
        else indices.push(i)
      })
      const wallets = [...byWallet].map(([userId, indices]) => ({ userId, charges: indices.map((i) => batch[i]!.request) }))
      type Answers = Array<Exit.Exit<Movement, ChargeError | ClusterFailure>>
      /** Each group's charges (one wallet's) sent directly as its own `Charges`, their answers put in `answers`. */
      const sendDirectly = (groups: ReadonlyArray<ReadonlyArray<number>>, answers: Answers) =>
        Effect.as(
          Effect.forEach(groups, (indices) =>
            Effect.map(sendCharges(indices.map((i) => batch[i]!)), (exits) => indices.forEach((index, k) => {
              answers[index] = exits[k]!
            })), { concurrency: "unbounded", discard: true }),
          answers
        )
      return toEntity(
        Effect.suspend(() => {
          messagesAway.unsafeUpdate(1, [])
          chargesSentAway.unsafeUpdate(batch.length, [])
          return makeRelay(wallets[0]!.userId).Relay({ wallets })
        }),
        // Followed while in flight like a wallet's own message: the relay's shard is its first wallet's.
        { resendWhenCut: true, shard: shardOf(sharding, WalletRelay, wallets[0]!.userId) }
      ).pipe(
        Effect.flatMap((reply) => {
          const answers: Answers = new Array(batch.length)
          const unanswered: Array<ReadonlyArray<number>> = []
          wallets.forEach(({ userId }, w) => {
            const indices = byWallet.get(userId)!
            const answered = reply.wallets[w]
            if (answered === null || answered === undefined || answered.length !== indices.length) {
              runnerOf.delete(userId)
              unanswered.push(indices)
              return
            }
            if (runnerOf.size >= 10_000) runnerOf.clear()
            runnerOf.set(userId, reply.runner)
            indices.forEach((index, k) => {
              const answer = answered[k]!
              answers[index] = Either.isRight(answer) ? Exit.succeed(answer.right) : Exit.fail(answer.left)
            })
          })
          return sendDirectly(unanswered, answers)
        }),
        // A relay that failed (a runner of an earlier release has no relay; an outage past the resends) leaves each
        // wallet's charges to go directly, as they would have without it: keyed, so any the relay did deliver replay.
        Effect.catchAllCause((cause) =>
          Cause.isInterruptedOnly(cause)
            ? Effect.succeed(batch.map(() => Exit.failCause(cause)))
            : Effect.zipRight(
              Effect.sync(() => {
                relaysOffUntil = Date.now() + RELAYS_OFF_MS
              }),
              sendDirectly([...byWallet.values()], new Array(batch.length))
            ))
      )
    }
    /**
     * One message at a time from this process per wallet of this runner, and per runner for the wallets of another
     * (`relayCharges`); what arrives meanwhile leaves together after it.
     */
    const chargeBatched = yield* makeEntityBatcher(
      (batch: ReadonlyArray<ChargeOf>) =>
        batch.every((c) => c.userId === batch[0]!.userId) && (ownedHere(batch[0]!.userId) || !relaying()) ? sendCharges(batch) : relayCharges(batch),
      (c: ChargeOf) => ownedHere(c.userId) || !relaying() ? c.userId : `runner:${runnerOf.get(c.userId) ?? c.userId}`
    )
    const chargeByMessage = (userId: UserId, request: ChargeRequest) => chargeBatched({ userId, request })

    const noEvent = { appId: null, event: null, metadata: null, description: null }
    /**
     * A new call's origin (`EntryInfo.origin`): this process's random prefix and a counter, unique in the cluster
     * without a random draw per charge. Made once per call, so every resend of its message carries the same one.
     */
    const originPrefix = Crypto.randomBytes(9).toString("base64url")
    let calls = 0
    const newOrigin = () => `${originPrefix}.${(++calls).toString(36)}`
    const chargeWith = (userId: UserId, request: ChargeRequest) => countCharge(chargeByMessage(userId, request).pipe(orDieOnCluster))
    return {
      charge: (userId: UserId, amount: Micros, entry: ChargeEntry, dailyCap: Micros | null = null) =>
        chargeWith(userId, { amount, entry: { ...noEvent, ...entry, origin: newOrigin() }, dailyCap }).pipe(
          // Only a charge made with a caller's fence is refused as stale (`chargeFor`).
          Effect.catchTag("StaleOwner", Effect.die)
        ),
      /**
       * A charge for an entity of another shard (a session's turn), made under that entity's `fence`: the wallet's
       * commit refuses it in the same statement once the fence is stale (`StaleOwner`), so a runner that lost the
       * session bills nothing, wherever the wallet lives (issue 42 item 7).
       */
      chargeFor: (userId: UserId, amount: Micros, entry: ChargeEntry, fence: Fence | null) =>
        chargeWith(userId, { amount, entry: { ...noEvent, ...entry, origin: newOrigin() }, dailyCap: null, ...(fence === null ? {} : { fence }) }),
      credit: (userId: UserId, amount: Micros, entry: Partial<EntryInfo> & Pick<EntryInfo, "kind" | "scope" | "key">) =>
        countCredit(toEntity(client(userId).Credit({ amount, entry: { ...noEvent, ...entry, origin: newOrigin() } }), resendable(userId))).pipe(
          orDieOnCluster,
          Effect.withSpan("Wallets.credit")
        ),
      balance: (userId: UserId) =>
        countBalance(toEntity(client(userId).Balance(), resendable(userId))).pipe(
          Effect.map((reply) => reply.balance),
          orDieOnCluster
        ),
      /** The balance and what holds reserve of it (`GET /api/wallet`): available = balance - held. */
      funds: (userId: UserId) =>
        countBalance(toEntity(client(userId).Balance(), resendable(userId))).pipe(
          Effect.map((reply) => ({ balance: reply.balance, held: reply.held ?? 0n })),
          orDieOnCluster
        ),
      /**
       * Places, extends or resumes the hold `holdId` at `amount` in all, as far as the wallet's available credits
       * allow (docs/billing.md, "Holds"): the hold's amount now (0 when nothing is available) and when the wallet
       * voids it unless asked again (ms since the epoch; a wallet that did not say: never renewed). One round trip.
       */
      hold: (userId: UserId, holdId: string, amount: Micros) =>
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
      settle: (userId: UserId, holdId: string, charges: ReadonlyArray<SettledCharge>, fence: Fence | null, final = false) => {
        const origin = newOrigin()
        return countSettle(toEntity(
          client(userId).Settle({
            hold: holdId,
            ...(final ? { final } : {}),
            charges: charges.map((c): ChargeRequest => ({
              amount: c.amount,
              entry: { ...noEvent, ...c.entry, origin },
              dailyCap: null,
              ...(fence === null ? {} : { fence })
            }))
          }),
          resendable(userId)
        )).pipe(orDieOnCluster)
      }
    } as const
  })
}) {}
