import type { CallerIdentity } from "../identity/Domain.js"
import { type Partition, partitionOf } from "../identity/Partition.js"

/**
 * Whose session it is (issue 49: the domain's rules in one file): the partition that opened it (account and end
 * user). Its turns, feedback, files and history follow it. Anyone else's is `No session …`, as if it did not exist.
 */
export const ownedBy = (caller: CallerIdentity): Partition => partitionOf(caller)

/** Whether `partition` owns `session` (a session read by id alone, as a turn's entity reads it, is judged here). */
export const isOwner = (partition: Partition, session: { readonly accountId: string; readonly endUserId: string }): boolean =>
  session.accountId === partition.accountId && session.endUserId === partition.endUserId
