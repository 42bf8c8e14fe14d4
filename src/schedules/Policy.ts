import { Effect, Option } from "effect"
import type { CallerIdentity } from "../identity/Domain.js"
import { type Partition, partitionOf } from "../identity/Partition.js"
import { InvalidRequest } from "../platform/Errors.js"

/**
 * Whose schedule it is and whom it runs as (issue 49: the domain's rules in one file).
 *
 * A schedule is its partition's (account and end user): `SchedulesRepo` filters every read, change and delete by it,
 * so anyone else's is `No schedule …`, as if it did not exist.
 */
export const ownedBy = (caller: CallerIdentity): Partition => partitionOf(caller)

/**
 * The partition a new schedule runs in: with an API key the `X-End-User-Id` header names the end user; a login or
 * OAuth caller (no header) may name one in the body. Both given must agree: an API key acting for one end user
 * cannot schedule runs as another.
 */
export const runsAs = (caller: CallerIdentity, named: string | undefined): Effect.Effect<Partition, InvalidRequest> =>
  named !== undefined && Option.isSome(caller.endUserId) && caller.endUserId.value !== named
    ? Effect.fail(new InvalidRequest({ message: "end_user_id: must match the X-End-User-Id header when both are given." }))
    : Effect.succeed({ accountId: caller.userId, endUserId: Option.getOrElse(caller.endUserId, () => named ?? "") })
