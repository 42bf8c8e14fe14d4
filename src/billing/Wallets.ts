import { RequestResolver as BatchWindow } from "@effect/experimental"
import { ClusterError, Sharding } from "@effect/cluster"
import { Effect, Either, Exit, Metric, Option, Request, RequestResolver } from "effect"
import { localFirst, makeEntityCaller, shardOf } from "../platform/Cluster.js"
import type { Fence } from "../platform/cluster/Fences.js"
import type { Micros } from "../platform/Money.js"
import { walletChargeMessages, walletCharges, walletRequests } from "../platform/telemetry/Metrics.js"
import { type Movement, WalletFailure } from "./Decide.js"
import type { EntryInfo } from "./Repo.js"
import { WalletLocal } from "./WalletEntity.js"
import { type ChargeError, type ChargeRequest, Wallet } from "./WalletRpc.js"

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

/** The series `Wallets` counts into, tagged once here. */
const chargesSentHere = walletCharges.pipe(Metric.tagged("via", "message"), Metric.tagged("to", "this_runner"))
const chargesLocal = walletCharges.pipe(Metric.tagged("via", "local"), Metric.tagged("to", "this_runner"))
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

/** One charge for a wallet another runner owns, waiting to leave with the others of its window. */
interface RemoteCharge extends Request.Request<Movement, ChargeError | ClusterFailure> {
  readonly _tag: "RemoteCharge"
  readonly userId: string
  readonly charge: ChargeRequest
}
const RemoteCharge = Request.tagged<RemoteCharge>("RemoteCharge")

/**
 * How long the charges for wallets on other runners gather before they leave, one `Charges` message per wallet: the
 * round trip on the runner socket costs several times this, and a hot wallet's charges then cost one trip per
 * window, not one each (issue 28 item 4, issue 45 item 4).
 */
const REMOTE_WINDOW = "2 millis"

/**
 * What the rest of the platform calls: the wallet of a user, wherever in the cluster it lives, through the cluster's
 * entity client (issue 45 item 1): a charge or a balance read for a wallet whose entity is active on this runner
 * takes the cluster's local road first (`localFirst` in `platform/Cluster.ts`: into the entity's queue, no message);
 * when that answers `None` (no instance here, stopping, fence moved, cut mid-way) it goes as a message to the user's
 * `Wallet` entity, sent from this service's fibers (`makeEntityCaller`, with its deadline and its resend of a
 * message cut by a hand-over): each charge carries its key, so one the wallet did commit is answered from the ledger,
 * not charged twice. Credits always go as messages.
 *
 * A charge by message for a wallet this runner owns is a message of one: the entity decides together every request
 * that arrived while its previous batch committed, so batching here would only add a wait. Charges for a
 * wallet another runner owns gather for `REMOTE_WINDOW` (`RequestResolver.makeBatched`, over `@effect/experimental`'s
 * window) and leave as one `Charges` message per wallet: one round trip on the runner socket per window. The entity
 * decides a message's charges in order exactly as if each had been sent alone, and each caller gets its own answer,
 * after the commit.
 */
export class Wallets extends Effect.Service<Wallets>()("atrium/billing/Wallets", {
  scoped: Effect.gen(function*() {
    const makeClient = yield* Wallet.client
    const sharding = yield* Sharding.Sharding
    /** Whether this runner holds the wallet's shard now (where its next message goes). */
    const ownedHere = (userId: string) => sharding.hasShardId(shardOf(sharding, Wallet, userId))
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
    const toEntity = yield* makeEntityCaller
    const local = yield* localFirst(WalletLocal)

    /** One `Charges` message with `charges`, counted as it leaves (each resend again). */
    const sendCharges = (userId: string, charges: ReadonlyArray<ChargeRequest>) =>
      toEntity(
        Effect.suspend(() => {
          const [messages, sent] = ownedHere(userId) ? [messagesHere, chargesSentHere] : [messagesAway, chargesSentAway]
          messages.unsafeUpdate(1, [])
          sent.unsafeUpdate(charges.length, [])
          return client(userId).Charges({ charges })
        }),
        { resendWhenCut: true }
      )

    const answerOf = (result: Either.Either<Movement, ChargeError> | undefined): Effect.Effect<Movement, ChargeError> =>
      result === undefined
        ? Effect.dieMessage("the wallet answered fewer charges than it was sent")
        : Either.isRight(result)
        ? Effect.succeed(result.right)
        : Effect.fail(result.left)

    /** The charges of a window, one message per wallet; each caller is answered with its own charge's answer. */
    const remote = yield* BatchWindow.dataLoader(
      RequestResolver.makeBatched((calls: ReadonlyArray<RemoteCharge>) => {
        const byUser = new Map<string, Array<RemoteCharge>>()
        for (const call of calls) {
          const list = byUser.get(call.userId)
          if (list === undefined) byUser.set(call.userId, [call])
          else list.push(call)
        }
        return Effect.forEach(byUser, ([userId, list]) =>
          Effect.onExit(sendCharges(userId, list.map((call) => call.charge)), (exit) =>
            Effect.forEach(list, (call, i) =>
              Request.completeEffect(call, Exit.isSuccess(exit) ? answerOf(exit.value[i]) : Effect.failCause(exit.cause)), { discard: true })
          ).pipe(Effect.ignore), { concurrency: "unbounded", discard: true })
      }),
      { window: REMOTE_WINDOW }
    )

    const byMessage = (userId: string, charge: ChargeRequest) =>
      ownedHere(userId)
        ? Effect.flatMap(sendCharges(userId, [charge]), (answers) => answerOf(answers[0]))
        : Effect.request(RemoteCharge({ userId, charge }), remote)

    const chargeWith = (userId: string, charge: ChargeRequest) =>
      countCharge(orDieOnCluster(Effect.flatMap(local(userId, { charges: [charge] }), (answer) => {
        if (Option.isNone(answer)) return byMessage(userId, charge)
        chargesLocal.unsafeUpdate(1, [])
        return answerOf((answer.value as ReadonlyArray<Either.Either<Movement, ChargeError>>)[0])
      })))

    const noEvent = { appId: null, event: null, metadata: null, description: null }
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
      /** The balance after every request the wallet took before this one, in order with them. */
      balance: (userId: string) =>
        countBalance(Effect.flatMap(local(userId, undefined), (answer) =>
          Option.isSome(answer)
            ? answer.value as Either.Either<bigint, WalletFailure>
            : toEntity(client(userId).Balance(), { resendWhenCut: true }).pipe(Effect.map((reply) => reply.balance)))).pipe(orDieOnCluster),
      /** The balance and what holds reserve of it (`GET /api/wallet`): available = balance - held. */
      funds: (userId: string) =>
        countBalance(toEntity(client(userId).Balance(), { resendWhenCut: true })).pipe(
          Effect.map((reply) => ({ balance: reply.balance, held: reply.held ?? 0n })),
          orDieOnCluster
        ),
      /**
       * Places, extends or resumes the hold `holdId` at `amount` in all, as far as the wallet's available credits
       * allow (docs/billing.md, "Holds"): the hold's amount now, 0 when nothing is available. One round trip.
       */
      hold: (userId: string, holdId: string, amount: Micros) =>
        countHold(toEntity(client(userId).Hold({ hold: holdId, amount }), { resendWhenCut: true })).pipe(
          Effect.map((reply) => reply.hold),
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
  })
}) {}
