import { canRun, isCreator, type Ownable } from "../agents/Policy.js"
import type { Partition } from "../identity/Partition.js"

/**
 * Whose memory it is (issue 49: the domain's rules in one file). An expert's memory is kept per partition (account
 * and end user): `MemoryRepo` filters every block and fact by the expert and the partition, so one buyer never reads
 * another's, nor the creator a buyer's.
 *
 * Which expert's memory a partition reaches: one it may run (agents' `canRun`: its own draft, anyone else's published
 * version); any other is `No agent …`, as everywhere an expert is named. Its settings are those of what it runs.
 */
export const canUseMemoryOf = (partition: Partition, agent: Ownable): boolean => canRun(partition.accountId, agent)

/** Whether the settings are the draft's (its creator) or the published version's (anyone else). */
export const readsDraft = (partition: Partition, agent: Ownable): boolean => isCreator(partition.accountId, agent)
