import { Effect, Option } from "effect"
import { Agents } from "../agents/Agents.js"
import { InvalidRequest, NotFound } from "../platform/Errors.js"
import type { UserId } from "../platform/Ids.js"
import { toNumber } from "../platform/Money.js"
import { Notifications } from "../notifications/Notifications.js"
import { type CreatorRow, MarketRepo } from "./Repo.js"
import { AlreadyApplied } from "./Domain.js"

export const creatorView = (userId: UserId, creator: Option.Option<CreatorRow>) =>
  Option.match(creator, {
    onNone: () => ({
      user_id: userId,
      status: "not_applied" as const,
      display_name: null,
      bio: null,
      account_type: null,
      email: null,
      reason: null,
      applied_at: null,
      decided_at: null
    }),
    onSome: (c) => ({
      user_id: c.userId,
      status: c.status,
      display_name: c.displayName,
      bio: c.bio,
      account_type: c.accountType,
      email: c.email,
      reason: c.reason,
      applied_at: c.appliedAt.toISOString(),
      decided_at: c.decidedAt === null ? null : c.decidedAt.toISOString()
    })
  })

/**
 * Creators (spec 4.10 rule 1): an application goes to human review (`/internal/creators/:id/approve|reject`), and the
 * outcome reaches the applicant as an in-app notification. Earnings are the creator's share of their agents' unlocks.
 */
export class Creators extends Effect.Service<Creators>()("atrium/market/Creators", {
  effect: Effect.gen(function*() {
    const repo = yield* MarketRepo
    const agents = yield* Agents
    const notifications = yield* Notifications

    const profile = (userId: UserId) => Effect.map(repo.creator(userId), (creator) => creatorView(userId, creator))

    const apply = Effect.fn("Creators.apply")(function*(application: {
      readonly userId: UserId
      readonly displayName: string
      readonly bio: string
      readonly accountType: string
      readonly email: string
    }) {
      const filed = yield* repo.apply(application)
      if (Option.isNone(filed)) {
        const current = yield* repo.creator(application.userId)
        const status = Option.match(current, { onNone: () => "pending", onSome: (c) => c.status })
        return yield* new AlreadyApplied({
          message: status === "approved"
            ? "You are already an approved creator."
            : "Your application is under review; you will be notified of the outcome."
        })
      }
      return creatorView(application.userId, filed)
    })

    const decide = Effect.fn("Creators.decide")(function*(
      userId: UserId,
      decision: "approved" | "rejected",
      reason: string | null
    ) {
      const decided = yield* repo.decide(userId, decision, reason)
      if (Option.isNone(decided)) {
        const current = yield* repo.creator(userId)
        if (Option.isNone(current)) return yield* new NotFound({ message: `No creator application from ${userId}.` })
        return yield* new InvalidRequest({
          message: `The application of ${userId} is ${current.value.status}, not pending.`
        })
      }
      yield* notifications.notify(
        userId,
        decision === "approved" ? "creator_approved" : "creator_rejected",
        decision === "approved" ? "You are now a creator" : "Your creator application was not approved",
        decision === "approved"
          ? "Your creator application passed review. Your name now appears beside your published agents."
          : `Reason: ${(reason ?? "not given").trim().replace(/[.!?]+$/, "")}. You may correct your application and apply again.`,
        { status: decision, ...(reason === null ? {} : { reason }) }
      )
      return creatorView(userId, decided)
    })

    /** Per agent: unlocks, what buyers paid (gross) and the creator's part of it (net); `total` is the sum of net. */
    const earnings = Effect.fn("Creators.earnings")(function*(userId: UserId) {
      const rows = yield* agents.earnings(userId)
      const total = rows.reduce((sum, row) => sum + row.net, 0n)
      return {
        total: toNumber(total),
        agents: rows.map((row) => ({
          identifier: row.identifier,
          unlocks: row.unlocks,
          gross: toNumber(row.gross),
          net: toNumber(row.net)
        }))
      }
    })

    return { profile, apply, decide, earnings } as const
  }),
  dependencies: [MarketRepo.Default, Agents.Default, Notifications.Default]
}) {}
