import type { CallerIdentity } from "../identity/Domain.js"
import { type Partition, partitionOf } from "../identity/Partition.js"

/**
 * Who reaches an environment (issue 49: the domain's rules in one file): the partition that made it (account and end
 * user, spec 4.4). `EnvironmentsRepo` filters every read and write by it (account and end user), so anyone
 * else's is `No environment …`, as if it did not exist.
 */
export const ownedBy = (caller: CallerIdentity): Partition => partitionOf(caller)
