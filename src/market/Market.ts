import { Effect, Option } from "effect"
import { type AgentConfig, CATEGORIES, publicView } from "../agents/Agent.js"
import { Agents } from "../agents/Agents.js"
import { type CreatorRow, MarketRepo, type Skill } from "./Repo.js"

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
      readonly page: number
      readonly pageSize: number
    }) {
      const { agents: rows, total } = yield* agents.market({
        keyword: filter.keyword?.trim(),
        category: filter.category,
        offset: (filter.page - 1) * filter.pageSize,
        limit: filter.pageSize
      })
      const facts = yield* repo.cardFacts(rows.map((row) => row.identifier))
      return {
        data: rows.map(({ config, identifier }) => {
          const view = publicView(identifier, config)
          const fact = facts.get(identifier)
          return {
            identifier,
            name: view.name,
            description: view.description,
            category: view.category,
            billing: view.billing,
            creator: fact?.creatorName ? { display_name: fact.creatorName } : null,
            usage: { conversations: fact?.conversations ?? 0, people: fact?.people ?? 0 }
          }
        }),
        page: filter.page,
        pageSize: filter.pageSize,
        total
      }
    })

    const page = Effect.fn("Market.page")(function*(identifier: string) {
      const { agent, config, version } = yield* agents.published(identifier)
      const catalogue = yield* repo.skills(undefined)
      return {
        ...publicView(identifier, config),
        version,
        published_at: agent.publishedAt === null ? null : agent.publishedAt.toISOString(),
        creator: creatorView(yield* repo.creator(agent.ownerId)),
        skills: skillsOf(config, catalogue).map(skillView)
      }
    })

    const categories = Effect.map(agents.marketCategories, (counts) => ({
      data: CATEGORIES.map((id) => ({ id, count: counts.get(id) ?? 0 }))
    }))

    const skills = (keyword: string | undefined) =>
      Effect.map(repo.skills(keyword), (rows) => ({ data: rows.map(skillView), has_more: false }))

    /** The owner sees the skills of the draft; anyone else those of the published version (404 if none). */
    const agentSkills = Effect.fn("Market.agentSkills")(function*(identifier: string, viewerId: string) {
      const agent = yield* agents.byIdentifier(identifier)
      const config = Option.isSome(agent) && agent.value.ownerId === viewerId
        ? agent.value.draft
        : (yield* agents.published(identifier)).config
      return { data: skillsOf(config, yield* repo.skills(undefined)).map(skillView), has_more: false }
    })

    return { browse, page, categories, skills, agentSkills } as const
  }),
  dependencies: [Agents.Default, MarketRepo.Default]
}) {}
