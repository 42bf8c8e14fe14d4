import { Option } from "effect"
import { isCreator, type Ownable } from "../agents/Policy.js"
import type { CallerIdentity } from "../identity/Domain.js"
import type { UserId } from "../platform/Ids.js"

/**
 * Who evaluates what (issue 49: the domain's rules in one file). Evals are a creator's tool for their own experts:
 * anything else (another's expert, dataset, eval run or run) is "not found", as if it did not exist.
 */

/**
 * The creator a caller acts as: their account, only when acting as the account itself. An end user of theirs (an API
 * key's `X-End-User-Id`) is not the creator, and reaches no dataset and no eval run.
 */
export const creatorOf = (caller: CallerIdentity): UserId | null => (Option.isSome(caller.endUserId) ? null : caller.userId)

/**
 * Datasets, their rows and eval runs are their creator's: `EvalsRepo` filters every read by the owner the caller acts
 * as (`creatorOf`). An expert is evaluated only by its creator (agents' `isCreator`), and an eval run runs only its
 * owner's expert: one that changed hands or is gone fails its rows as `agent_unavailable`.
 */
export const canEvaluate = (ownerId: UserId, agent: Pick<Ownable, "ownerId">): boolean => isCreator(ownerId, agent)

/** A dataset's row from a run: a run of that dataset's expert (the creator's view of its traces, buyers' included). */
export const isRunOf = (
  dataset: { readonly ownerId: string; readonly agent: string },
  trace: { readonly ownerId: string; readonly agent: string }
): boolean => trace.ownerId === dataset.ownerId && trace.agent === dataset.agent

/**
 * Whether the run was the creator's own (as their account): only then is its stored request read; a buyer's run
 * gives only what its trace captured.
 */
export const isCreatorsOwnRun = (ownerId: UserId, trace: { readonly payerId: string; readonly endUserId: string }): boolean =>
  trace.payerId === ownerId && trace.endUserId === ""
