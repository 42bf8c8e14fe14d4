import { Effect, Layer } from "effect"
import { InsufficientFunds, PaymentFailed, RunPayer } from "../runtime/Ports.js"
import { Wallets } from "./Wallet.js"

/** The run engine's payer: the account's wallet, charged per run step as a `usage` entry of scope `run`. */
export const RunPayerLive = Layer.effect(
  RunPayer,
  Effect.map(Wallets, (wallets) =>
    RunPayer.of({
      charge: (accountId, amount, charge) =>
        wallets.charge(accountId, amount, { kind: "usage", scope: "run", key: charge.key, description: charge.description }).pipe(
          Effect.asVoid,
          Effect.catchTag("InsufficientCredits", (error) => Effect.fail(new InsufficientFunds({ message: error.message }))),
          Effect.catchAll((error) => Effect.fail(new PaymentFailed({ message: error.message })))
        ),
      balance: (accountId) => wallets.balance(accountId)
    }))
)
