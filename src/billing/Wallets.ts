import { ClusterError, Sharding } from "@effect/cluster"
import { Effect, Either, Exit, FiberSet, Metric, Option } from "effect"
import { makeEntityCaller, shardOf } from "../platform/Cluster.js"
import type { Fence } from "../platform/cluster/Fences.js"
import type { Micros } from "../platform/Money.js"
import { walletChargeMessages, walletCharges, walletRequests } from "../platform/telemetry/Metrics.js"
import { type LocalWallet, LocalWallets } from "./LocalWallets.js"
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

/** The series `Wallets` counts into, tagged once here (updated without an effect, from the lanes' callbacks). */
const chargesDirect = walletCharges.pipe(Metric.tagged("via", "direct"), Metric.tagged("to", "this_runner"))
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

/** A charge waiting in its wallet's lane for the next `Charges` message. */
interface Waiting {
  readonly request: ChargeRequest
  readonly resume: (effect: Effect.Effect<Movement, ChargeError | ClusterFailure>) => void
  cancelled: boolean
}

/** The charges this process has for one wallet: at most one `Charges` message on its way, the rest waiting. */
interface Lane {
  inFlight: boolean
  waiting: Array<Waiting>
}

/**
 * What the rest of the platform calls: the wallet of a user, wherever in the cluster it lives.
 *
 * Charges go out as `Charges` messages, one at a time per wallet from this process: a charge for a wallet with no
 * message on its way leaves at once (alone), and the charges that arrive meanwhile leave together when the answer
 * comes back. The entity decides them in order, as if each had been sent alone; each caller gets its own answer, and
 * only after the commit. A hot wallet thus costs one cluster message per batch instead of one per charge.
 *
 * A charge for a wallet whose entity is active on this runner skips the message: it goes into the entity directly
 * (`LocalWallets`), where it joins the requests being decided together. Credits and balances always go as messages.
 */
export class Wallets extends Effect.Service<Wallets>()("atrium/billing/Wallets", {
  scoped: Effect.gen(function*() {
    const makeClient = yield* Wallet.client
    const sharding = yield* Sharding.Sharding
    /** Whether this runner holds the wallet's shard now (where its next message goes: metrics only). */
    const ownedHere = (userId: string) => sharding.hasShardId(shardOf(sharding, Wallet, userId))
    const localWallets = yield* LocalWallets
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
    // Every message goes through `toEntity` (charges from a lane's own fiber, `runFork`): never from the caller's
    // fiber, so an active wallet does not keep the request that woke it alive (see makeEntityCaller).
    const runFork = yield* FiberSet.makeRuntime<never>()
    const toEntity = yield* makeEntityCaller
    const lanes = new Map<string, Lane>()

    /**
     * Sends what waits in `lane` as one message; when it is answered, sends what arrived meanwhile. A message cut by
     * a hand-over (the wallet's shard moved, or its runner lost its shard locks) is sent again with the same charges
     * (`resendWhenCut`): each carries its key, so one the wallet did commit is answered from the ledger, not charged
     * twice.
     */
    const send = (userId: string, lane: Lane) => {
      const batch = lane.waiting.filter((w) => !w.cancelled)
      lane.waiting = []
      if (batch.length === 0) {
        lanes.delete(userId)
        return
      }
      lane.inFlight = true
      const charges = batch.map((w) => w.request)
      // Counted as it leaves, each resend again: what went to another runner crossed the runner socket.
      const message = Effect.suspend(() => {
        const here = ownedHere(userId)
        const [messages, sent] = here ? [messagesHere, chargesSentHere] : [messagesAway, chargesSentAway]
        messages.unsafeUpdate(1, [])
        sent.unsafeUpdate(charges.length, [])
        return client(userId).Charges({ charges })
      })
      runFork(
        toEntity(message, { resendWhenCut: true }).pipe(
          // On any exit, interruption included: every charge of the batch gets an answer and the lane moves on.
          Effect.onExit((exit) =>
            Effect.sync(() => {
              if (Exit.isSuccess(exit)) {
                batch.forEach((w, i) => {
                  const result = exit.value[i]
                  w.resume(
                    result === undefined
                      ? Effect.dieMessage("the wallet answered fewer charges than it was sent")
                      : Either.isRight(result)
                      ? Effect.succeed(result.right)
                      : Effect.fail(result.left)
                  )
                })
              } else {
                for (const w of batch) w.resume(Effect.failCause(exit.cause))
              }
              lane.inFlight = false
              send(userId, lane)
            })
          )
        )
      )
    }

    /** Sends `request` in its wallet's next `Charges` message. */
    const chargeByMessage = (userId: string, request: ChargeRequest) =>
      Effect.async<Movement, ChargeError | ClusterFailure>((resume) => {
        const waiting: Waiting = { request, resume, cancelled: false }
        let lane = lanes.get(userId)
        if (lane === undefined) {
          lane = { inFlight: false, waiting: [] }
          lanes.set(userId, lane)
        }
        lane.waiting.push(waiting)
        if (!lane.inFlight) send(userId, lane)
        // A caller that gives up before its charge left takes it back; once sent, the wallet decides it.
        return Effect.sync(() => {
          waiting.cancelled = true
        })
      })

    /**
     * Charges a wallet active on this runner in its entity, in the caller's fiber (issue 28 item 4): the entity
     * decides it with its other requests and commits it with the same fence and keys as a message's, and answers
     * after the commit; nothing crosses the cluster and nothing is stored as a message. `None` (the entity stopped,
     * or its shard moved) sends it as a message instead: a charge the entity did commit carries its key and replays.
     */
    const chargeHere = (wallet: LocalWallet, userId: string, request: ChargeRequest) =>
      Effect.flatMap(wallet.charge([request]), Option.match({
        onNone: () => chargeByMessage(userId, request),
        onSome: (answers) => {
          chargesDirect.unsafeUpdate(1, [])
          return answers[0]!
        }
      }))

    const noEvent = { appId: null, event: null, metadata: null, description: null }
    const chargeWith = (userId: string, request: ChargeRequest) => {
      const here = localWallets.byUser.get(userId)
      return countCharge((here === undefined ? chargeByMessage(userId, request) : chargeHere(here, userId, request)).pipe(orDieOnCluster))
    }
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
        countCredit(toEntity(client(userId).Credit({ amount, entry: { ...noEvent, ...entry } }), { resendWhenCut: true })).pipe(
          orDieOnCluster,
          Effect.withSpan("Wallets.credit")
        ),
      balance: (userId: string) => {
        const byMessage = toEntity(client(userId).Balance(), { resendWhenCut: true }).pipe(Effect.map((reply) => reply.balance))
        const here = localWallets.byUser.get(userId)
        // A wallet active on this runner is read in its entity, in order with its other requests: no message.
        return countBalance((here === undefined ? byMessage : Effect.flatMap(here.balance, Option.getOrElse(() => byMessage))).pipe(orDieOnCluster))
      },
      /** The balance and what holds reserve of it (`GET /api/wallet`): available = balance - held. */
      funds: (userId: string) =>
        countBalance(toEntity(client(userId).Balance(), { resendWhenCut: true })).pipe(
          Effect.map((reply) => ({ balance: reply.balance, held: reply.held ?? 0n })),
          orDieOnCluster
        ),
      /**
       * Places, extends or resumes the hold `holdId` at `amount` in all, as far as the wallet's available credits
       * allow (docs/billing.md, "Holds"): the hold's amount now (0 when nothing is available) and when the wallet
       * voids it unless asked again (ms since the epoch; a wallet that did not say: never renewed). One round trip.
       */
      hold: (userId: string, holdId: string, amount: Micros) =>
        countHold(toEntity(client(userId).Hold({ hold: holdId, amount }), { resendWhenCut: true })).pipe(
          Effect.map((reply) => ({ amount: reply.hold, expiresAt: reply.expiresAt ?? Number.MAX_SAFE_INTEGER })),
          orDieOnCluster
        ),
      /**
       * Ends the hold `holdId`: voids what is left of it and posts `charges` in order, each a ledger entry under its
       * own key (a settle sent again replays them), made under the caller's `fence` as `chargeFor`'s. One answer per
       * charge: its movement, or why it was refused. One round trip.
       */
      settle: (userId: string, holdId: string, charges: ReadonlyArray<SettledCharge>, fence: Fence | null) =>
        countSettle(toEntity(
          client(userId).Settle({
            hold: holdId,
            charges: charges.map((c): ChargeRequest => ({
              amount: c.amount,
              entry: { ...noEvent, ...c.entry },
              dailyCap: null,
              ...(fence === null ? {} : { fence })
            }))
          }),
          { resendWhenCut: true }
        )).pipe(orDieOnCluster)
    } as const
  }),
  dependencies: [LocalWallets.Default]
}) {}
