import { Effect, Option } from "effect"
import { type AgentConfig, CATEGORIES, publicView } from "../agents/Agent.js"
import { Agents } from "../agents/Agents.js"
import { Forbidden, InvalidRequest, NotFound, PayloadTooLarge, UnsupportedMediaType } from "../platform/Errors.js"
import { newId, type UserId } from "../platform/Ids.js"
import { NotUsedYet } from "./Domain.js"
import { generatedIcon, iconUrl, iconVersion, MAX_ICON_BYTES, sniffIcon } from "./Icons.js"
import { type CreatorRow, type ListingRow, MarketRepo, type ReviewRow, type Skill, type Sort } from "./Repo.js"
import { canSee, isOwnExpert, seesDraft } from "./Policy.js"

/**
 * The skills an agent has: a skill is listed when the agent has every one of its tools and none of them is denied
 * (a denied tool never runs, so the skill would not work). "ask" counts: the tool runs once a person approves it.
 */
export const skillsOf = (config: AgentConfig, catalogue: ReadonlyArray<Skill>): ReadonlyArray<Skill> => {
  const usable = new Set(config.tools.filter((tool) => tool.permission !== "deny").map((tool) => tool.name as string))
  return catalogue.filter((skill) => skill.tools.every((tool) => usable.has(tool)))
}

export const skillView = (skill: Skill) => ({
  name: skill.name,
  title: skill.title,
  description: skill.description,
  tools: skill.tools
})

/** Only an approved creator's name is shown beside their agents. */
const creatorView = (creator: Option.Option<CreatorRow>) =>
  Option.match(Option.filter(creator, (c) => c.status === "approved"), {
    onNone: () => null,
    onSome: (c) => ({ display_name: c.displayName })
  })

/** A marketplace card: the published profile and what the store adds (usage, rating, icon, featured). */
export const cardView = (row: ListingRow) => {
  const view = publicView(row.identifier, row.config)
  return {
    identifier: row.identifier,
    name: view.name,
    description: view.description,
    category: view.category,
    billing: view.billing,
    creator: row.creatorName === null ? null : { id: row.ownerId, display_name: row.creatorName },
    usage: { conversations: row.conversations, people: row.people, recent_people: row.recentPeople },
    rating: { average: row.ratingCount === 0 ? null : row.ratingAverage, count: row.ratingCount },
    icon_url: iconUrl(row.identifier, view.name, row.iconAt),
    featured: row.featured,
    published_at: row.publishedAt === null ? null : row.publishedAt.toISOString()
  }
}

export const reviewView = (row: ReviewRow) => ({
  id: row.id,
  rating: row.rating,
  text: row.text,
  created_at: row.createdAt.toISOString(),
  updated_at: row.updatedAt.toISOString()
})

/** How many experts each front-page section shows before "see all". */
const SECTION_SIZE = 6
const FEATURED_SIZE = 12

/**
 * Public browsing (`/api/market/*`, no login): everything here reads the published version of an agent and nothing
 * else, so a draft, or a version still waiting for review, never shows.
 */
export class Market extends Effect.Service<Market>()("atrium/market/Market", {
  effect: Effect.gen(function*() {
    const agents = yield* Agents
    const repo = yield* MarketRepo

    const browse = Effect.fn("Market.browse")(function*(filter: {
      readonly keyword?: string | undefined
      readonly category?: string | undefined
      readonly featured?: boolean | undefined
      readonly sort?: Sort | undefined
      readonly page: number
      readonly pageSize: number
    }) {
      const { rows, total } = yield* repo.listing({
        keyword: filter.keyword?.trim(),
        category: filter.category,
        featured: filter.featured,
        sort: filter.sort ?? "new",
        offset: (filter.page - 1) * filter.pageSize,
        limit: filter.pageSize
      })
      return { data: rows.map(cardView), page: filter.page, pageSize: filter.pageSize, total }
    })

    /** The front page: the featured experts, then each category with at least one, its most popular first. */
    const front = Effect.fn("Market.front")(function*() {
      const featured = yield* repo.listing({ featured: true, sort: "popular", offset: 0, limit: FEATURED_SIZE })
      const counts = yield* agents.marketCategories
      const sections = yield* Effect.forEach(
        CATEGORIES.filter((id) => (counts.get(id) ?? 0) > 0),
        (category) =>
          Effect.map(
            repo.listing({ category, sort: "popular", offset: 0, limit: SECTION_SIZE }),
            ({ rows, total }) => ({ category, total, data: rows.map(cardView) })
          )
      )
      return { featured: featured.rows.map(cardView), sections }
    })

    /** The listing row of one published expert (404 when nothing is published). */
    const card = (identifier: string) =>
      Effect.flatMap(repo.listing({ identifier, sort: "new", offset: 0, limit: 1 }), ({ rows }) =>
        rows.length === 0 ? Effect.fail(new NotFound({ message: `No agent ${identifier}.` })) : Effect.succeed(rows[0]!))

    const page = Effect.fn("Market.page")(function*(identifier: string) {
      const { agent, config, version } = yield* agents.published(identifier)
      const catalogue = yield* repo.skills(undefined)
      const row = yield* card(identifier)
      const creator = creatorView(yield* repo.creator(agent.ownerId))
      return {
        ...publicView(identifier, config),
        version,
        published_at: agent.publishedAt === null ? null : agent.publishedAt.toISOString(),
        creator: creator === null ? null : { id: agent.ownerId as string, ...creator },
        skills: skillsOf(config, catalogue).map(skillView),
        rating: cardView(row).rating,
        usage: cardView(row).usage,
        icon_url: cardView(row).icon_url,
        featured: row.featured
      }
    })

    /** A creator's public page: only an approved creator has one; their published experts, most popular first. */
    const creatorPage = Effect.fn("Market.creatorPage")(function*(userId: UserId) {
      const found = Option.filter(yield* repo.creator(userId), (c) => c.status === "approved")
      if (Option.isNone(found)) return yield* new NotFound({ message: "There is no creator with this id." })
      const { rows } = yield* repo.listing({ owner: userId, sort: "popular", offset: 0, limit: 100 })
      return {
        id: userId,
        display_name: found.value.displayName,
        bio: found.value.bio.trim() === "" ? null : found.value.bio,
        experts: rows.map(cardView)
      }
    })

    /** An expert anyone may look at: published, with its owner. */
    const publishedAgent = (identifier: string) =>
      Effect.flatMap(agents.byIdentifier(identifier), (agent) =>
        Option.isSome(agent) && agent.value.publishedVersion !== null
          ? Effect.succeed(agent.value)
          : Effect.fail(new NotFound({ message: `No agent ${identifier}.` })))

    /**
     * Whether `userId` may review the expert: not its creator (403, never), and only after running it at least once
     * (409 until then).
     */
    const reviewRight = Effect.fn("Market.reviewRight")(function*(identifier: string, userId: UserId) {
      const agent = yield* publishedAgent(identifier)
      if (isOwnExpert(userId, agent)) {
        return { agent, refusal: Option.some<Forbidden | NotUsedYet>(new Forbidden({ message: "You cannot review your own expert." })) }
      }
      if (!(yield* repo.hasRun(agent.id, userId))) {
        return {
          agent,
          refusal: Option.some<Forbidden | NotUsedYet>(
            new NotUsedYet({ message: "Use the expert at least once before you review it." })
          )
        }
      }
      return { agent, refusal: Option.none<Forbidden | NotUsedYet>() }
    })

    /** The viewer's own review and whether they may write one (the expert page's form). */
    const myReview = Effect.fn("Market.myReview")(function*(identifier: string, userId: UserId) {
      const { agent, refusal } = yield* reviewRight(identifier, userId)
      const mine = yield* repo.reviewOf(agent.id, userId)
      return {
        may_review: Option.isNone(refusal),
        reason: Option.match(refusal, { onNone: () => null, onSome: (e) => e.message }),
        review: Option.match(mine, { onNone: () => null, onSome: reviewView })
      }
    })

    const putReview = Effect.fn("Market.putReview")(function*(
      identifier: string,
      userId: UserId,
      input: { readonly rating: number; readonly text?: string | undefined }
    ) {
      const { agent, refusal } = yield* reviewRight(identifier, userId)
      if (Option.isSome(refusal)) return yield* refusal.value
      const row = yield* repo.putReview({
        id: newId("rev"),
        agentId: agent.id,
        userId,
        rating: input.rating,
        text: (input.text ?? "").trim()
      })
      return reviewView(row)
    })

    /** Deletes the caller's own review; there is no way to name anyone else's. 404 when they have none. */
    const deleteReview = Effect.fn("Market.deleteReview")(function*(identifier: string, userId: UserId) {
      const agent = yield* publishedAgent(identifier)
      if (!(yield* repo.deleteReview(agent.id, userId))) {
        return yield* new NotFound({ message: "You have not reviewed this expert." })
      }
      return { deleted: true as const }
    })

    const reviews = Effect.fn("Market.reviews")(function*(identifier: string, params: { limit?: number | undefined; after?: string | undefined }) {
      const agent = yield* publishedAgent(identifier)
      const limit = params.limit ?? 20
      const rows = yield* repo.reviews(agent.id, agent.ownerId, params.after, limit)
      if (Option.isNone(rows)) return yield* new NotFound({ message: `after: ${params.after} is not in this list.` })
      return { data: rows.value.slice(0, limit).map(reviewView), has_more: rows.value.length > limit }
    })

    /** The icon to serve: the upload as stored (its sniffed type), else the one drawn from the published name. */
    const icon = Effect.fn("Market.icon")(function*(identifier: string, viewerId?: UserId) {
      const agent = yield* agents.byIdentifier(identifier)
      const visible = Option.filter(agent, (a) => canSee(viewerId, a))
      if (Option.isNone(visible)) return yield* new NotFound({ message: `No agent ${identifier}.` })
      const owner = seesDraft(viewerId, visible.value)
      const name = owner || visible.value.publishedVersion === null
        ? visible.value.draft.name
        : (yield* agents.published(identifier)).config.name
      const uploaded = yield* repo.icon(visible.value.id)
      return Option.match(uploaded, {
        onNone: () => ({
          contentType: "image/svg+xml",
          bytes: new TextEncoder().encode(generatedIcon(name)),
          version: iconVersion(name, null),
          uploaded: false
        }),
        onSome: (icon) => ({
          contentType: icon.contentType,
          bytes: Uint8Array.from(Buffer.from(icon.data, "base64")),
          version: iconVersion(name, icon.updatedAt),
          uploaded: true
        })
      })
    })

    /** The owner sets the icon: base64 of a PNG, JPEG or WebP of at most 256 KB, its type read from its bytes. */
    const putIcon = Effect.fn("Market.putIcon")(function*(identifier: string, ownerId: UserId, base64: string) {
      const agent = yield* agents.owned(identifier, ownerId)
      const text = base64.replace(/^data:[^,]*,/, "").replace(/\s+/g, "")
      if (!/^[A-Za-z0-9+/]*={0,2}$/.test(text) || text.length % 4 !== 0) {
        return yield* new InvalidRequest({ message: "image must be the picture's bytes in base64." })
      }
      const bytes = Buffer.from(text, "base64")
      if (bytes.length === 0) return yield* new InvalidRequest({ message: "image is empty." })
      if (bytes.length > MAX_ICON_BYTES) {
        return yield* new PayloadTooLarge({ message: `An icon may be at most 256 KB; this one is ${Math.ceil(bytes.length / 1024)} KB.` })
      }
      const type = sniffIcon(bytes)
      if (type === undefined) {
        return yield* new UnsupportedMediaType({ message: "An icon must be a PNG, JPEG or WebP picture (SVG is not accepted)." })
      }
      yield* repo.putIcon(agent.id, type, bytes.toString("base64"))
      return { identifier, content_type: type, bytes: bytes.length, icon_url: iconUrl(identifier, agent.draft.name, new Date()) }
    })

    const removeIcon = Effect.fn("Market.removeIcon")(function*(identifier: string, ownerId: UserId) {
      const agent = yield* agents.owned(identifier, ownerId)
      yield* repo.removeIcon(agent.id)
      return { identifier, deleted: true as const }
    })

    const setFeatured = Effect.fn("Market.setFeatured")(function*(identifier: string, featured: boolean) {
      const agent = yield* publishedAgent(identifier)
      yield* featured ? repo.feature(agent.id) : repo.unfeature(agent.id)
      return { identifier, featured }
    })

    const categories = Effect.map(agents.marketCategories, (counts) => ({
      data: CATEGORIES.map((id) => ({ id, count: counts.get(id) ?? 0 }))
    }))

    const skills = (keyword: string | undefined) =>
      Effect.map(repo.skills(keyword), (rows) => ({ data: rows.map(skillView), has_more: false }))

    /** The owner sees the skills of the draft; anyone else those of the published version (404 if none). */
    const agentSkills = Effect.fn("Market.agentSkills")(function*(identifier: string, viewerId: UserId) {
      const agent = yield* agents.byIdentifier(identifier)
      const config = Option.isSome(agent) && seesDraft(viewerId, agent.value)
        ? agent.value.draft
        : (yield* agents.published(identifier)).config
      return { data: skillsOf(config, yield* repo.skills(undefined)).map(skillView), has_more: false }
    })

    return {
      browse,
      front,
      page,
      creatorPage,
      categories,
      skills,
      agentSkills,
      myReview,
      putReview,
      deleteReview,
      reviews,
      icon,
      putIcon,
      removeIcon,
      setFeatured
    } as const
  }),
  dependencies: [Agents.Default, MarketRepo.Default]
}) {}
