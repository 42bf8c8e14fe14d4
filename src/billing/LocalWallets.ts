import { Effect, type Either, type Option } from "effect"
import type { ChargeError, ChargeRequest } from "./WalletRpc.js"
import type { Movement, WalletFailure } from "./Domain.js"

/** A wallet entity active on this runner, as the client reaches it without a cluster message. */
export interface LocalWallet {
  /**
   * Decides `charges` in this runner's entity, in order with the wallet's other requests, and answers after the
   * commit, exactly as a `Charges` message would be answered. `None` when this instance does not take them: it is
   * stopping, its shard's fence is no longer current, or it stopped before they were answered (then whether they
   * were committed is unknown, as after a message cut by a hand-over: the caller sends them again with their keys).
   * Like a message it is answered within `ENTITY_DEADLINE`, or dies with `EntityDeadline` (a 503).
   */
  readonly charge: (
    charges: ReadonlyArray<ChargeRequest>
  ) => Effect.Effect<Option.Option<ReadonlyArray<Either.Either<Movement, ChargeError>>>>
  /**
   * The balance after every request this instance took before it, as a `Balance` message would answer it (a run
   * reads it before each step); `None` as for `charge`, and then it is asked by message.
   */
  readonly balance: Effect.Effect<Option.Option<Either.Either<bigint, WalletFailure>>>
}

/**
 * The wallet entities active on this runner, by user id (issue 28 item 4). A charge for a wallet this runner owns
 * goes straight into its entity (`Wallets.charge`): no cluster message, no message storage, no fiber of the client's
 * own. An entity adds itself when it starts and removes itself when it stops; one per runner, shared by the entity
 * layer and the client through the layer's memoization.
 */
export class LocalWallets extends Effect.Service<LocalWallets>()("atrium/billing/LocalWallets", {
  sync: () => ({ byUser: new Map<string, LocalWallet>() })
}) {}
