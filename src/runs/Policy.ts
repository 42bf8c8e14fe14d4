import { canRun, isCreator, type Ownable } from "../agents/Policy.js"
import type { CallerIdentity } from "../identity/Domain.js"
import { type Partition, partitionOf } from "../identity/Partition.js"

/**
 * Who reaches a run and what a run may run (issue 49: the domain's rules in one file).
 *
 * A run is its payer's partition's (account and end user): `RunRecords` and the background runs filter every read
 * and cancel by it, so anyone else's run is `No run …`, as if it did not exist.
 */
export const ownedBy = (caller: CallerIdentity): Partition => partitionOf(caller)

/**
 * What an account runs when it names an expert: its own draft (the creator), anyone else's published version; an
 * expert it may not run is "no agent" (agents' `canRun`).
 */
export const runsDraft = (accountId: string, agent: Ownable): boolean => isCreator(accountId, agent)
export const mayRun = (accountId: string, agent: Ownable): boolean => canRun(accountId, agent)

/** A given published version (an eval run of it) only its creator runs; for anyone else there is none. */
export const mayRunVersion = (accountId: string, agent: Ownable): boolean => isCreator(accountId, agent)
