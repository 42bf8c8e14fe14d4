import { Sharding } from "@effect/cluster"
import { Cause, Clock, Duration, Effect, Either, Layer, Option, Schedule } from "effect"
import { AppConfig } from "../platform/Config.js"
import { failoverBudget } from "../platform/cluster/Budget.js"
import { type Fence, ShardFences } from "../platform/cluster/Fences.js"
import { shardOf } from "../platform/Cluster.js"
import type { UserId } from "../platform/Ids.js"
import type { Micros } from "../platform/Money.js"
import { EntityDeadline, isOutage } from "../platform/Outage.js"
import { InsufficientFunds, PaymentFailed, RunPayer, type RunCharge } from "../runtime/Ports.js"
import { Wallets } from "./Wallets.js"
import { Wallet } from "./WalletRpc.js"

/**
 * A request to the wallet that met an outage (the database restarting, the wallet's shard between owners) is sent again
 * with its key: the key makes a charge that did commit answer from the ledger, so the run records what its payer was
 * charged instead of failing a step that was billed (issue 33, "billed but reported failed").
 *
 * The window counts from the first attempt's start, and every attempt is cut at its end: whatever the attempts take,
 * the run waits at most `OUTAGE_WINDOW` for the wallet, within the 15 s every request is promised. It outlasts the
 * entity's deadline (`failoverBudget.entityDeadline`, 12 s), so an attempt that got no answer within that deadline is
 * followed by one more: its wallet's shards may move just after it (13 s once after a kill -9 in the fault checker).
 * With a window counted from the first failure (`Schedule.upTo`), the try after a deadline was cut at its own deadline
 * and none followed it: a run's settle gave up, and the run recorded steps its payer was never charged.
 */
export const OUTAGE_WINDOW = Duration.seconds(15)
/**
 * A run cut short (a cancel, its runner stopping) lets go of its settle at the entity's deadline: no try after it. Its
 * next owner settles or voids the hold and counts the run from the ledger (a session's next activation, a background
 * run's resumed workflow).
 */
export const CUT_WINDOW = failoverBudget.entityDeadline

/** The pauses between attempts: 0.2 s doubling, at most 2 s. */
const OUTAGE_PAUSES = Schedule.exponential("200 millis", 2).pipe(Schedule.union(Schedule.spaced("2 seconds")), Schedule.delays)

/** An attempt begun with less of the window left than this is not worth its round trip. */
const LEAST_TRY = Duration.millis(500)

/**
 * Tries `effect` again while it meets an outage, within `window` from its first attempt's start (`OUTAGE_WINDOW`).
 * The wallet's outages are defects (`Wallets` turns the cluster's failures into them), hence the sandbox: a refusal
 * (a typed failure) is never retried.
 */
export const throughOutages = (window: Duration.Duration) => <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.flatMap(Clock.currentTimeMillis, (start) => {
    const end = start + Duration.toMillis(window)
    const overdue = () => Cause.die(new EntityDeadline({ message: `No answer from the wallet within ${Duration.format(window)}.` }))
    // Each attempt stops at the window's end: what it left undone is a replay for whoever sends it next.
    const attempt = Effect.flatMap(Clock.currentTimeMillis, (now) =>
      Effect.timeoutFailCause(effect, { duration: Duration.millis(Math.max(0, end - now)), onTimeout: overdue }))
    const withinWindow = OUTAGE_PAUSES.pipe(
      Schedule.checkEffect((_, pause) =>
        Effect.map(Clock.currentTimeMillis, (now) => now + Duration.toMillis(pause) + Duration.toMillis(LEAST_TRY) <= end)
      )
    )
    return attempt.pipe(Effect.sandbox, Effect.retry({ schedule: withinWindow, while: isOutage }), Effect.unsandbox)
  })
const throughOutagesNow = throughOutages(OUTAGE_WINDOW)

/** A wallet's outage that outlasted its window, as the run engine's failure: `outage` when it was one (not a bug). */
const unanswered = (defect: unknown) => Effect.fail(new PaymentFailed({ message: String(defect), outage: isOutage(Cause.die(defect)) }))

/** The run engine's payer: the account's wallet, charged per run step as a `usage` entry of scope `run`. */
export const RunPayerLive = Layer.effect(
  RunPayer,
  Effect.gen(function*() {
    const wallets = yield* Wallets
    /**
     * Whether nobody can answer a settle to `accountId`'s wallet now: the run's next owner settles its hold instead,
     * and this runner does not wait out the window for an owner that never comes (every SIGTERM with a turn in flight
     * took `SHUTDOWN_GRACE` and 12 s more). Embedded, the one runner lets go of every shard as its first entity stops
     * (`preemptiveShutdown`), which a cut run's settle meets. A stopping runner of a cluster refuses new requests to
     * its own entities and hands their shards over only once they have all ended (`ShardFences.unreachableWhileLeaving`),
     * which a turn ending in its grace meets too, cut or not (session 29); a wallet of another runner's shard is settled
     * as ever. Read where provided (the platform always provides them; a payer built over a bare `Wallets` has none).
     */
    const sharding = yield* Effect.serviceOption(Sharding.Sharding)
    const fences = yield* Effect.serviceOption(ShardFences)
    const embedded = Option.exists(yield* Effect.serviceOption(AppConfig), (config) => Option.isNone(config.databaseUrl))
    const noOwnerLeft = (accountId: UserId, cut: boolean) =>
      embedded
        ? (cut && Option.isSome(sharding) ? sharding.value.isShutdown : Effect.succeed(false))
        : Effect.sync(() =>
          Option.isSome(sharding) && Option.isSome(fences) &&
          fences.value.unreachableWhileLeaving(shardOf(sharding.value, Wallet, accountId))
        )
    const settleNow = (
      accountId: UserId,
      holdId: string,
      charges: ReadonlyArray<{ readonly amount: Micros; readonly charge: RunCharge }>,
      fence: Fence | null,
      cut: boolean
    ) =>
      wallets.settle(
        accountId,
        holdId,
        charges.map(({ amount, charge }) => ({
          amount,
          entry: { kind: "usage", scope: "run", key: charge.key, description: charge.description }
        })),
        fence
      ).pipe(
        throughOutages(cut ? CUT_WINDOW : OUTAGE_WINDOW),
        Effect.map((answers) => answers.map(Either.isRight)),
        Effect.catchAllDefect(unanswered)
      )
    return RunPayer.of({
      charge: (accountId, amount, charge) =>
        wallets.chargeFor(accountId, amount, { kind: "usage", scope: "run", key: charge.key, description: charge.description }, charge.fence ?? null).pipe(
          throughOutagesNow,
          Effect.asVoid,
          Effect.catchTag("InsufficientCredits", (error) => Effect.fail(new InsufficientFunds({ message: error.message }))),
          Effect.catchAll((error) => Effect.fail(new PaymentFailed({ message: error.message })))
        ),
      // Read before every step (`RunEngine.affordable`): without the same retry as the charge, a read that met a
      // database restart failed the turn with internal_error though its charge would have waited (issue 42 item 8).
      balance: (accountId) => throughOutagesNow(wallets.balance(accountId)),
      // A run's hold (docs/billing.md, "Holds"): placed when its first step is judged, extended when its cost passes
      // it, asked again past half its life (a long run), settled when it ends. Through outages too: a hold or a
      // settle met by a restart waits, as a charge did.
      hold: (accountId, holdId, amount) =>
        wallets.hold(accountId, holdId, amount).pipe(
          throughOutagesNow,
          Effect.catchAllDefect(unanswered)
        ),
      // A run that ended on its own waits out an outage for its settle (`OUTAGE_WINDOW`), one cut short does not.
      // A cut run's next owner settles its hold (a stopping runner's own wallets: any run's): when nobody can take the
      // wallet now (`noOwnerLeft`), it is not waited out.
      settle: (accountId, holdId, charges, fence, cut) =>
        Effect.if(noOwnerLeft(accountId, cut), {
          onTrue: () =>
            Effect.fail(new PaymentFailed({ message: "This runner is stopping and no runner is left to reach the wallet: the run's next owner settles its hold.", outage: true })),
          onFalse: () => settleNow(accountId, holdId, charges, fence, cut)
        }),
      voidHold: (accountId, holdId, fence) =>
        wallets.settle(accountId, holdId, [], fence, true).pipe(
          throughOutagesNow,
          Effect.asVoid,
          Effect.catchAllDefect(unanswered)
        )
    })
  })
)
