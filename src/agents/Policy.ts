/**
 * Who may use, change and delegate to an expert (issue 49: every rule of the domain in one file). Everywhere an
 * expert is named, one it may not see answers as a missing one (`No agent …`), so a draft's existence stays private.
 */

/** What the rules read of an expert. */
export interface Ownable {
  readonly ownerId: string
  readonly publishedVersion: number | null
}

/** Its creator: they see and change the draft, and run it. */
export const isCreator = (accountId: string, agent: Pick<Ownable, "ownerId">): boolean => agent.ownerId === accountId

/** Who may run or name it: its creator (their draft), anyone else once a version is published (that version). */
export const canRun = (accountId: string, agent: Ownable): boolean => isCreator(accountId, agent) || agent.publishedVersion !== null

/**
 * Who may list it as a subagent: whoever may run it. A draft of someone else's is "no agent" (not a refusal), so
 * delegating cannot probe for drafts.
 */
export const canDelegateTo = canRun

/**
 * Whose change of it is refused how: the creator changes it; anyone else is told 403 for a published expert (its
 * existence is public) and 404 for a draft, as if it did not exist.
 */
export const changeAccess = (accountId: string, agent: Ownable): "creator" | "forbidden" | "hidden" =>
  isCreator(accountId, agent) ? "creator" : agent.publishedVersion !== null ? "forbidden" : "hidden"
