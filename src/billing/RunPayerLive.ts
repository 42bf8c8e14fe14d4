import { Effect, Either, Layer, Schedule } from "effect"
import { isOutage } from "../platform/Outage.js"
import { InsufficientFunds, PaymentFailed, RunPayer } from "../runtime/Ports.js"
import { Wallets } from "./Wallets.js"

/**
 * A step's charge that met an outage (the database restarting, the wallet's shard between owners) is sent again with
 * its key for up to 12 s: the key makes a charge that did commit answer from the ledger, so the run records what its
 * payer was charged instead of failing a step that was billed (issue 33, "billed but reported failed").
 */
const OUTAGE_RETRY = Schedule.exponential("200 millis", 2).pipe(
  Schedule.union(Schedule.spaced("2 seconds")),
  Schedule.upTo("12 seconds")
)

/**
 * Tries `effect` again while it meets an outage (on `OUTAGE_RETRY`). The wallet's outages are defects (`Wallets`
 * turns the cluster's failures into them), hence the sandbox: a refusal (a typed failure) is never retried.
 */
const throughOutages = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  effect.pipe(Effect.sandbox, Effect.retry({ schedule: OUTAGE_RETRY, while: isOutage }), Effect.unsandbox)

/** The run engine's payer: the account's wallet, charged per run step as a `usage` entry of scope `run`. */
export const RunPayerLive = Layer.effect(
  RunPayer,
  Effect.map(Wallets, (wallets) =>
    RunPayer.of({
      charge: (accountId, amount, charge) =>
        wallets.chargeFor(accountId, amount, { kind: "usage", scope: "run", key: charge.key, description: charge.description }, charge.fence ?? null).pipe(
          throughOutages,
          Effect.asVoid,
          Effect.catchTag("InsufficientCredits", (error) => Effect.fail(new InsufficientFunds({ message: error.message }))),
          Effect.catchAll((error) => Effect.fail(new PaymentFailed({ message: error.message })))
        ),
      // Read before every step (`RunEngine.affordable`): without the same retry as the charge, a read that met a
      // database restart failed the turn with internal_error though its charge would have waited (issue 42 item 8).
      balance: (accountId) => throughOutages(wallets.balance(accountId)),
      // A run's hold (docs/billing.md, "Holds"): placed when its first step is judged, extended when its cost passes
      // it, asked again past half its life (a long run), settled when it ends. Through outages too: a hold or a
      // settle met by a restart waits, as a charge did.
      hold: (accountId, holdId, amount) =>
        wallets.hold(accountId, holdId, amount).pipe(
          throughOutages,
          Effect.catchAllDefect((defect) => Effect.fail(new PaymentFailed({ message: String(defect) })))
        ),
      settle: (accountId, holdId, charges, fence) =>
        wallets.settle(
          accountId,
          holdId,
          charges.map(({ amount, charge }) => ({
            amount,
            entry: { kind: "usage", scope: "run", key: charge.key, description: charge.description }
          })),
          fence
        ).pipe(
          throughOutages,
          Effect.map((answers) => answers.map(Either.isRight)),
          Effect.catchAllDefect((defect) => Effect.fail(new PaymentFailed({ message: String(defect) })))
        ),
      voidHold: (accountId, holdId, fence) =>
        wallets.settle(accountId, holdId, [], fence, true).pipe(
          throughOutages,
          Effect.asVoid,
          Effect.catchAllDefect((defect) => Effect.fail(new PaymentFailed({ message: String(defect) })))
        )
    }))
)
