import type { UserId } from "../platform/Ids.js"
/**
 * Whose money it is (issue 49: the domain's rules in one file).
 *
 * - A wallet, its ledger and its holds are their person's: `Wallets` is keyed by the person, and every route reads
 *   the caller's own account's (no route names another person's wallet).
 * - A payment order is its person's: anyone else's is `No such order.`, as if it did not exist.
 * - An app's meters and usage are its creator's (identity's `isAppCreator`, through `OAuthApps.owned`).
 */
export const isOrderOf = (userId: UserId, order: { readonly userId: UserId }): boolean => order.userId === userId
