import { changeAccess, type Ownable } from "../agents/Policy.js"
import type { UserId } from "../platform/Ids.js"

/**
 * Who sees and acts on an expert's evolution (issue 49: the domain's rules in one file): its creator only. Anyone
 * else is told as agents tell a change (agents' `changeAccess`): 403 for a published expert, `No agent …` for a draft;
 * a suggestion of another's expert is `No suggestion …`, as if it did not exist.
 */
export const evolutionAccess = (userId: UserId, agent: Ownable): "creator" | "forbidden" | "hidden" => changeAccess(userId, agent)

/** A suggestion is its expert's creator's. */
export const isSuggestionOf = (userId: UserId, suggestion: { readonly ownerId: UserId }): boolean => suggestion.ownerId === userId
