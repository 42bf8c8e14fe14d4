/**
 * The wallet, as the rest of the platform imports it: its contract (`WalletRpc.ts`), its entity (`WalletEntity.ts`,
 * deciding with the pure `Decide.ts` and writing through `Committer.ts`) and the client that charges it (`Wallets.ts`).
 */
export { Wallet } from "./WalletRpc.js"
export { WalletLive } from "./WalletEntity.js"
export { Wallets } from "./Wallets.js"
