import { Option } from "effect"
import type { UserId } from "../platform/Ids.js"
import type { CallerIdentity } from "./Domain.js"

/**
 * Whose data a request reaches: the account (who pays and owns it), and inside it the end user the caller acts
 * for (`X-End-User-Id`, '' when none is named). Runs, sessions, files, environments and memories are all looked up
 * within one partition; another one's rows are simply not found (spec 2.7).
 */
export interface Partition {
  readonly accountId: UserId
  readonly endUserId: string
}

export const partitionOf = (caller: CallerIdentity): Partition => ({
  accountId: caller.userId,
  endUserId: Option.getOrElse(caller.endUserId, () => "")
})
