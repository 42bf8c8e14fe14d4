import { canRun, isCreator, type Ownable } from "../agents/Policy.js"

/**
 * Who sees and reviews what in the marketplace (issue 49: the domain's rules in one file).
 *
 * - A listing is public once a version is published; before that only its creator sees it (its icon, its skills),
 *   and anyone else gets `No agent …`, as if it did not exist.
 * - The creator sees their draft's name and skills; anyone else the published version's.
 * - A review is a buyer's: its creator may not review their own expert (403), and a buyer only once they ran it (409).
 * - A creator application and its page are the person's own; only an approved creator has a public page.
 */
export const canSee = (viewerId: string | undefined, agent: Ownable): boolean =>
  viewerId === undefined ? agent.publishedVersion !== null : canRun(viewerId, agent)

/** Whether the viewer sees the draft (its creator) rather than the published version. */
export const seesDraft = (viewerId: string | undefined, agent: Pick<Ownable, "ownerId">): boolean =>
  viewerId !== undefined && isCreator(viewerId, agent)

/** A creator may not review their own expert. */
export const isOwnExpert = (userId: string, agent: Pick<Ownable, "ownerId">): boolean => isCreator(userId, agent)
