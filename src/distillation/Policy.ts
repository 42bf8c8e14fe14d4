import type { CallerIdentity } from "../identity/Domain.js"
import type { UserId } from "../platform/Ids.js"

/**
 * Whose distillation it is (issue 49: the domain's rules in one file): the account's that started it; the expert it
 * makes is that account's too. `DistillationsRepo` filters every read, claim and list by the account, so anyone
 * else's is `Distillation … not found`, as if it did not exist.
 */
export const ownedBy = (caller: CallerIdentity): UserId => caller.userId
