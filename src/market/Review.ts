import { Effect, Option } from "effect"
import { Agents } from "../agents/Agents.js"
import type { AgentConfig } from "../agents/Agent.js"
import type { SubmissionId } from "../agents/Domain.js"
import { NotFound } from "../platform/Errors.js"
import { formatCredits } from "../platform/Money.js"
import { MarketConfig } from "./Config.js"
import { Creators, creatorView } from "./Creators.js"
import { MarketRepo } from "./Repo.js"

/** What a reviewer reads of a version: the configuration as its creator wrote it, the price as a number. */
const configView = (config: AgentConfig) => ({ ...config, billing: { ...config.billing, price: Number(config.billing.price) } })

/**
 * The review console (issue 27 item 4): the operators named by `ADMIN_PHONES` see what waits for review (expert
 * submissions and creator applications) and decide it. Deciding goes through the very services `/internal/*`
 * calls (`Agents.decide`, `Creators.decide`), so both doors give the same outcome and the same notification to
 * the creator. Anyone else is told there is nothing here (404), as if the console did not exist.
 */
export class Review extends Effect.Service<Review>()("atrium/market/Review", {
  effect: Effect.gen(function*() {
    const { adminPhones } = yield* MarketConfig
    const agents = yield* Agents
    const creators = yield* Creators
    const repo = yield* MarketRepo

    /** Whether this phone operates the console: the profile says it, so the app need not probe a 404. */
    const mayReview = (phone: string) => adminPhones.has(phone)

    const operator = (phone: string) =>
      mayReview(phone) ? Effect.void : Effect.fail(new NotFound({ message: "There is nothing here." }))

    const queue = Effect.fn("Review.queue")(function*() {
      const submissions = yield* agents.pendingSubmissions
      const applications = yield* repo.pendingCreators
      return {
        submissions: submissions.map((s) => ({
          id: s.id,
          agent: s.identifier,
          name: s.config.name,
          version: s.version,
          owner_id: s.ownerId,
          published_version: s.publishedVersion,
          submitted_at: s.submittedAt.toISOString()
        })),
        applications: applications.map((c) => creatorView(c.userId, Option.some(c)))
      }
    })

    /** A submission with the version it would replace (none for a first publication): the console diffs them. */
    const submission = Effect.fn("Review.submission")(function*(id: SubmissionId) {
      const found = yield* agents.submission(id)
      if (Option.isNone(found)) return yield* new NotFound({ message: `No submission ${id}.` })
      const s = found.value
      const agent = yield* agents.byIdentifier(s.identifier)
      const publishedVersion = Option.match(agent, { onNone: () => null, onSome: (a) => a.publishedVersion })
      const submitted = yield* agents.version(s.agentId, s.version)
      const previous = publishedVersion === null || publishedVersion === s.version
        ? Option.none<AgentConfig>()
        : yield* agents.version(s.agentId, publishedVersion)
      const card = Option.isNone(agent) ? null : yield* agents.scorecard(agent.value, s.version)
      const side = (m: NonNullable<NonNullable<typeof card>["submitted"]>) => ({ ...m, credits: formatCredits(m.credits) })
      return {
        id: s.id,
        agent: s.identifier,
        version: s.version,
        eval_gate: card === null ? null : {
          ...card,
          submitted: card.submitted === null ? null : side(card.submitted),
          live: card.live === null ? null : side(card.live)
        },
        status: s.status,
        reason: s.reason,
        owner_id: s.ownerId,
        submitted_at: s.submittedAt.toISOString(),
        published_version: publishedVersion,
        submitted: Option.match(submitted, { onNone: () => null, onSome: configView }),
        published: Option.match(previous, { onNone: () => null, onSome: configView })
      }
    })

    return {
      mayReview,
      operator,
      queue,
      submission,
      decideSubmission: agents.decide,
      decideApplication: creators.decide
    } as const
  }),
  dependencies: [MarketConfig.Default, Agents.Default, Creators.Default, MarketRepo.Default]
}) {}
