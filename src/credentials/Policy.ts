import type { CallerIdentity } from "../identity/Domain.js"
import { partitionOf } from "../identity/Partition.js"
import type { Owner } from "./Credentials.js"

/**
 * Whose credential it is (issue 49: the domain's rules in one file): the partition that stored it (account and end
 * user). `CredentialsRepo` filters every read and delete by it, so a run uses only its own partition's secrets and
 * anyone else's credential is `No credential …`, as if it did not exist.
 */
export const ownedBy = (caller: CallerIdentity): Owner => partitionOf(caller)
