import type { CallerIdentity } from "../identity/Domain.js"
import { type Partition, partitionOf } from "../identity/Partition.js"

/**
 * Who reaches a stored response (issue 49): the partition that made it, as every run (`ResponsesRepo` filters by
 * account and end user; a background response is read and cancelled through its run, in that partition).
 * Anyone else's is `No response …`, as if it did not exist.
 */
export const ownedBy = (caller: CallerIdentity): Partition => partitionOf(caller)
