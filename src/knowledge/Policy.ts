import type { CallerIdentity } from "../identity/Domain.js"
import { type Partition, partitionOf } from "../identity/Partition.js"

/**
 * Who reaches a vector store and its files (issue 49): the partition that made it. `KnowledgeRepo` filters every
 * read and write by it (account and end user); an expert searches only the stores its run's partition owns,
 * so anyone else's is `No vector store …`, as if it did not exist.
 */
export const ownedBy = (caller: CallerIdentity): Partition => partitionOf(caller)
