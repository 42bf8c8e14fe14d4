import * as Entity from "@effect/cluster/Entity"
import { Sharding } from "@effect/cluster"
import { Effect } from "effect"
import { shardOf } from "../platform/Cluster.js"
import { Wallet, WalletRelay } from "./WalletRpc.js"

/**
 * The relay's behaviour (its contract, `Relay`, is `WalletRpc.ts`): on the runner that holds the shards of the wallets
 * a message carries (as the sender saw it), it sends each wallet its own charges as one `Charges` message, all at once,
 * and answers their answers together. A wallet of this runner gets its message in its mailbox without encoding
 * (`platform/Cluster.ts`); one that is not here, or whose message was cut, is answered `null` and never sent on from
 * here: the sender sends it directly, so a relayed charge crosses the runner socket once.
 */
export const WalletRelayLive = WalletRelay.toLayer(
  Effect.gen(function*() {
    const sharding = yield* Sharding.Sharding
    const address = yield* Entity.CurrentRunnerAddress
    const runner = `${address.host}:${address.port}`
    const makeClient = yield* Wallet.client
    return {
      Relay: ({ payload }) =>
        Effect.forEach(payload.wallets, ({ charges, userId }) =>
          sharding.hasShardId(shardOf(sharding, Wallet, userId))
            ? makeClient(userId).Charges({ charges }).pipe(Effect.catchAllCause(() => Effect.succeed(null)))
            : Effect.succeed(null), { concurrency: "unbounded" }).pipe(Effect.map((wallets) => ({ runner, wallets })))
    }
  }),
  // Stateless: its messages are relayed side by side, never one after another.
  { concurrency: "unbounded", maxIdleTime: "1 minute" }
)
