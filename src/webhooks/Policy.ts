import type { CallerIdentity } from "../identity/Domain.js"
import type { UserId } from "../platform/Ids.js"

/**
 * Whose webhook endpoint it is (issue 49: the domain's rules in one file): the account's. An API key's end user does
 * not partition webhooks: the account hears of all its runs. `WebhooksRepo` filters every read by the account, so
 * anyone else's endpoint (and its deliveries) is `No webhook endpoint …`, as if it did not exist.
 */
export const ownedBy = (caller: CallerIdentity): UserId => caller.userId
