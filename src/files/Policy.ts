import type { CallerIdentity } from "../identity/Domain.js"
import { type Partition, partitionOf } from "../identity/Partition.js"

/**
 * Who reaches a file (issue 49: the domain's rules in one file). A file is its partition's (account and end user):
 * `FilesRepo` filters every read by it, and anyone else's is `No file …`, as if it did not exist.
 */
export const ownedBy = (caller: CallerIdentity): Partition => partitionOf(caller)

/** An upload URL is registered only by the partition it was handed to; anyone else's is "no pending upload". */
export const canRegister = (partition: Partition, pending: { readonly ownerId: string; readonly endUserId: string }): boolean =>
  pending.ownerId === partition.accountId && pending.endUserId === partition.endUserId
