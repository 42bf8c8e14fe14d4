import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { Category } from "../agents/Agent.js"
import { CaseDemoView, ExpertConfigView } from "../agents/Api.js"
import { PlatformAuthentication, UserAuthentication } from "../identity/Domain.js"
import { Forbidden, InvalidRequest, NotFound, PayloadTooLarge, UnsupportedMediaType } from "../platform/Errors.js"
import { SubmissionId } from "../agents/Domain.js"
import { UserId } from "../platform/Ids.js"
import { AlreadyApplied, NotUsedYet } from "./Domain.js"
import { ListParams } from "../platform/http/Lists.js"

export const BillingView = Schema.Struct({
  type: Schema.Literal("FREE", "UNLOCK"),
  price: Schema.Number,
  free_trial_per_user: Schema.Int,
  allow_trial: Schema.Boolean
})

export const SkillView = Schema.Struct({
  name: Schema.String,
  title: Schema.String,
  description: Schema.String,
  tools: Schema.Array(Schema.String)
})

export const SkillList = Schema.Struct({ data: Schema.Array(SkillView), has_more: Schema.Boolean })

const CreatorRef = Schema.NullOr(Schema.Struct({ id: Schema.String, display_name: Schema.String })).annotations({
  description: "The owner when they are an approved creator (`id` opens their page, /api/market/creators/:id); null otherwise."
})

const Usage = Schema.Struct({ conversations: Schema.Int, people: Schema.Int, recent_people: Schema.Int }).annotations({
  description: "Conversations held with the expert, how many different people (or end users) held them, and how many " +
    "accounts ran it in the last 30 days (the popular sort). The creator's own use never counts."
})

const RatingView = Schema.Struct({ average: Schema.NullOr(Schema.Number), count: Schema.Int }).annotations({
  description: "The average of the reviews' ratings (1-5, two decimals; null before the first review) and how many there are."
})

const IconUrl = Schema.String.annotations({
  description: "Where the expert's icon is: the creator's upload, or one drawn from the name. The URL changes when the icon does."
})

export const MarketItem = Schema.Struct({
  identifier: Schema.String,
  name: Schema.String,
  description: Schema.String,
  category: Schema.String,
  billing: BillingView,
  creator: CreatorRef,
  usage: Usage,
  rating: RatingView,
  icon_url: IconUrl,
  featured: Schema.Boolean,
  published_at: Schema.NullOr(Schema.String)
})

export const MarketSort = Schema.Literal("new", "popular", "rating", "price").annotations({
  message: () => "sort must be one of: new, popular, rating, price"
})

export const ReviewView = Schema.Struct({
  id: Schema.String,
  rating: Schema.Int,
  text: Schema.String,
  created_at: Schema.String,
  updated_at: Schema.String
})

export const ReviewInput = Schema.Struct({
  rating: Schema.Int.pipe(Schema.between(1, 5)).annotations({ message: () => "rating must be a whole number from 1 to 5" }),
  text: Schema.optional(Schema.String.pipe(Schema.maxLength(2000)).annotations({
    message: () => "text must be at most 2000 characters"
  }))
})

const Identifier = Schema.Struct({ identifier: Schema.String })

/** What a marketplace search may carry: the keyword's length, and how far pages go (HTTP and the MCP tools). */
export const MarketKeyword = Schema.String.pipe(Schema.maxLength(100))
export const MAX_PAGE = 100_000
export const MAX_PAGE_SIZE = 100

const PageNumber = (name: string, max: number) =>
  Schema.NumberFromString.pipe(
    Schema.int({ message: () => `${name} must be a whole number` }),
    Schema.between(1, max, { message: () => `${name} must be between 1 and ${max}` })
  )

/** Public marketplace browsing (spec 4.7: `/api/market/*` needs no login). Published versions only. */
/** One side of the gate's scorecard: the eval run a version is measured by (null: none completed). */
const GateSide = Schema.NullOr(Schema.Struct({
  eval_run: Schema.String,
  pass_rate: Schema.Number,
  rows_total: Schema.Number,
  rows_passed: Schema.Number,
  credits: Schema.String,
  finished_at: Schema.NullOr(Schema.String)
}))

const GateScorecard = Schema.Struct({
  dataset: Schema.String,
  dataset_name: Schema.NullOr(Schema.String),
  /** The drop in pass rate the gate tolerates (0-1). */
  threshold: Schema.Number,
  submitted: GateSide,
  live: GateSide,
  live_version: Schema.NullOr(Schema.Number)
}).annotations({ identifier: "EvalGateScorecard" })

export class MarketApi extends HttpApiGroup.make("market")
  .add(
    HttpApiEndpoint.get("agents", "/api/market/agents")
      .setUrlParams(Schema.Struct({
        keyword: Schema.optional(MarketKeyword),
        category: Schema.optional(Category),
        sort: Schema.optional(MarketSort),
        featured: Schema.optional(Schema.Literal("true")),
        page: Schema.optional(PageNumber("page", MAX_PAGE)),
        pageSize: Schema.optional(PageNumber("pageSize", MAX_PAGE_SIZE))
      }))
      .addSuccess(Schema.Struct({
        data: Schema.Array(MarketItem),
        page: Schema.Int,
        pageSize: Schema.Int,
        total: Schema.Int
      }))
      .annotate(
        OpenApi.Description,
        "Browse published agents; `keyword` matches name or description, `category` one category, `featured=true` the " +
          "featured ones; `sort` is `new` (newest first, the default), `popular` (most accounts that ran it in the last " +
          "30 days), `rating` (best average first, unrated last) or `price` (cheapest first); `page` from 1, `pageSize` 1-100 (20)."
      )
  )
  .add(
    HttpApiEndpoint.get("front", "/api/market/front")
      .addSuccess(Schema.Struct({
        featured: Schema.Array(MarketItem),
        sections: Schema.Array(Schema.Struct({ category: Schema.String, total: Schema.Int, data: Schema.Array(MarketItem) }))
      }))
      .annotate(
        OpenApi.Description,
        "The marketplace's front page: the experts an operator featured, then each category that has published experts " +
          "(its six most popular, and its total for \"see all\")."
      )
  )
  .add(
    HttpApiEndpoint.get("agent", "/api/market/agents/:identifier")
      .setPath(Schema.Struct({ identifier: Schema.String }))
      .addSuccess(Schema.Struct({
        identifier: Schema.String,
        name: Schema.String,
        description: Schema.String,
        category: Schema.String,
        opening_message: Schema.String,
        case_demos: Schema.Array(CaseDemoView),
        billing: BillingView,
        tools: Schema.Array(Schema.String),
        version: Schema.Int,
        published_at: Schema.NullOr(Schema.String),
        creator: CreatorRef,
        skills: Schema.Array(SkillView),
        rating: RatingView,
        usage: Usage,
        icon_url: IconUrl,
        featured: Schema.Boolean
      }))
      .addError(NotFound)
      .annotate(OpenApi.Description, "The public page of a published agent (its published version).")
  )
  .add(
    HttpApiEndpoint.get("reviews", "/api/market/agents/:identifier/reviews")
      .setPath(Identifier)
      .setUrlParams(ListParams)
      .addSuccess(Schema.Struct({ data: Schema.Array(ReviewView), has_more: Schema.Boolean }))
      .addError(NotFound)
      .annotate(
        OpenApi.Description,
        "The reviews of a published expert, newest first; `limit` 1-100 (20), `after` the id of the last review of the previous page."
      )
  )
  .add(
    HttpApiEndpoint.get("icon", "/api/market/agents/:identifier/icon")
      .setPath(Identifier)
      .setUrlParams(Schema.Struct({ v: Schema.optional(Schema.String) }))
      .addSuccess(Schema.String)
      .addError(NotFound)
      .annotate(
        OpenApi.Description,
        "A published expert's icon: the PNG, JPEG or WebP its creator uploaded, or an SVG of its initials. Cached for a " +
          "day (the `v` of `icon_url` changes with the icon); `ETag` answers 304 to `If-None-Match`."
      )
  )
  .add(
    HttpApiEndpoint.get("creator", "/api/market/creators/:id")
      .setPath(Schema.Struct({ id: UserId.unchecked }))
      .addSuccess(Schema.Struct({
        id: Schema.String,
        display_name: Schema.String,
        bio: Schema.NullOr(Schema.String),
        experts: Schema.Array(MarketItem)
      }))
      .addError(NotFound)
      .annotate(OpenApi.Description, "An approved creator's public page: their name, bio and published experts (most popular first).")
  )
  .add(
    HttpApiEndpoint.get("categories", "/api/market/categories")
      .addSuccess(Schema.Struct({ data: Schema.Array(Schema.Struct({ id: Schema.String, count: Schema.Int })) }))
      .annotate(OpenApi.Description, "Every category, with how many published agents it holds.")
  )
  .add(
    HttpApiEndpoint.get("skills", "/api/market/skills")
      .setUrlParams(Schema.Struct({ ...ListParams.fields, keyword: Schema.optional(MarketKeyword) }))
      .addSuccess(SkillList)
      .addError(NotFound)
      .annotate(OpenApi.Description, "Search the skills catalogue by name, title or description.")
  )
  .addError(InvalidRequest)
  .annotate(OpenApi.Title, "Marketplace")
  .annotate(OpenApi.Description, "Browse, search and rate published experts.")
{}

/** Reviewing an expert (logged in): one review per person and expert, by someone who ran it and did not make it. */
export class MarketReviewsApi extends HttpApiGroup.make("marketReviews")
  .add(
    HttpApiEndpoint.get("mine", "/api/market/agents/:identifier/review")
      .setPath(Identifier)
      .addSuccess(Schema.Struct({ may_review: Schema.Boolean, reason: Schema.NullOr(Schema.String), review: Schema.NullOr(ReviewView) }))
      .addError(NotFound)
      .annotate(OpenApi.Description, "The caller's own review of the expert (null if none), and whether they may write one (and why not).")
  )
  .add(
    HttpApiEndpoint.put("put", "/api/market/agents/:identifier/review")
      .setPath(Identifier)
      .setPayload(ReviewInput)
      .addSuccess(ReviewView)
      .addError(NotFound)
      .addError(Forbidden)
      .addError(NotUsedYet)
      .annotate(
        OpenApi.Description,
        "Write or edit the caller's review: `rating` 1-5 and optional `text`. 403 for the expert's creator, 409 " +
          "(`not_used_yet`) before the caller ran it once."
      )
  )
  .add(
    HttpApiEndpoint.del("delete", "/api/market/agents/:identifier/review")
      .setPath(Identifier)
      .addSuccess(Schema.Struct({ deleted: Schema.Literal(true) }))
      .addError(NotFound)
      .annotate(OpenApi.Description, "Delete the caller's own review (404 if they have none).")
  )
  .middleware(UserAuthentication)
  .addError(InvalidRequest)
  .annotate(OpenApi.Title, "Marketplace reviews")
  .annotate(OpenApi.Description, "Ratings and reviews by the people who used an expert.")
{}

/** The creator's icon for an expert (the studio's upload). */
export class AgentIconsApi extends HttpApiGroup.make("agentIcons")
  .add(
    HttpApiEndpoint.get("get", "/v1/agents/:identifier/icon")
      .setPath(Identifier)
      .addSuccess(Schema.String)
      .addError(NotFound)
      .annotate(OpenApi.Description, "The expert's icon as its owner sees it (also before it is published); others get the published one.")
  )
  .add(
    HttpApiEndpoint.put("put", "/v1/agents/:identifier/icon")
      .setPath(Identifier)
      .setPayload(Schema.Struct({
        image: Schema.String.pipe(Schema.maxLength(700_000)).annotations({
          description: "The picture's bytes in base64 (a `data:` URL prefix is allowed): PNG, JPEG or WebP, at most 256 KB.",
          message: () => "image must be base64 of a picture of at most 256 KB"
        })
      }))
      .addSuccess(Schema.Struct({ identifier: Schema.String, content_type: Schema.String, bytes: Schema.Int, icon_url: Schema.String }))
      .addError(NotFound)
      .addError(Forbidden)
      .addError(PayloadTooLarge)
      .addError(UnsupportedMediaType)
      .annotate(
        OpenApi.Description,
        "Upload the expert's icon (owner only). The type is read from the bytes: PNG, JPEG or WebP; SVG and anything " +
          "else is 415, more than 256 KB 413."
      )
  )
  .add(
    HttpApiEndpoint.del("delete", "/v1/agents/:identifier/icon")
      .setPath(Identifier)
      .addSuccess(Schema.Struct({ identifier: Schema.String, deleted: Schema.Literal(true) }))
      .addError(NotFound)
      .addError(Forbidden)
      .annotate(OpenApi.Description, "Remove the uploaded icon; the expert shows the one drawn from its name again.")
  )
  .middleware(PlatformAuthentication)
  .addError(InvalidRequest)
  .annotate(OpenApi.Title, "Expert icons")
  .annotate(OpenApi.Description, "The picture an expert shows in the marketplace.")
{}

export const CreatorView = Schema.Struct({
  user_id: Schema.String,
  status: Schema.Literal("not_applied", "pending", "approved", "rejected"),
  display_name: Schema.NullOr(Schema.String),
  bio: Schema.NullOr(Schema.String),
  account_type: Schema.NullOr(Schema.String),
  email: Schema.NullOr(Schema.String),
  reason: Schema.NullOr(Schema.String),
  applied_at: Schema.NullOr(Schema.String),
  decided_at: Schema.NullOr(Schema.String)
})

export const ACCOUNT_TYPES = ["individual", "organization"] as const

const Email = Schema.String.pipe(
  Schema.maxLength(254),
  Schema.pattern(/^[^\s@]+@[^\s@]+\.[^\s@]+$/, { message: () => "email must be an email address" })
)

/** An application to become a creator (`POST /api/creator/apply`, the MCP tool `apply_creator`). */
export const CreatorApplication = Schema.Struct({
  displayName: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100)),
  bio: Schema.String.pipe(Schema.maxLength(2000)),
  accountType: Schema.Literal(...ACCOUNT_TYPES).annotations({
    message: () => `accountType must be one of: ${ACCOUNT_TYPES.join(", ")}`
  }),
  email: Email
})

/** Creators: apply for review, see where the application stands, and what their agents earned. */
export class CreatorsApi extends HttpApiGroup.make("creators")
  .add(HttpApiEndpoint.get("profile", "/api/creator/profile").addSuccess(CreatorView))
  .add(
    HttpApiEndpoint.post("apply", "/api/creator/apply")
      .setPayload(CreatorApplication)
      .addSuccess(CreatorView, { status: 201 })
      .addError(AlreadyApplied)
      .annotate(OpenApi.Description, "Apply to become a creator; the application enters human review.")
  )
  .add(
    HttpApiEndpoint.get("earnings", "/api/creator/earnings")
      .addSuccess(Schema.Struct({
        total: Schema.Number,
        agents: Schema.Array(Schema.Struct({
          identifier: Schema.String,
          unlocks: Schema.Int,
          gross: Schema.Number,
          net: Schema.Number
        }))
      }))
      .annotate(OpenApi.Description, "Unlocks per agent: `gross` is what buyers paid, `net` the creator's share; `total` sums `net`.")
  )
  .middleware(UserAuthentication)
  .addError(InvalidRequest)
  .annotate(OpenApi.Title, "Creators")
  .annotate(OpenApi.Description, "A creator's experts, sales and earnings.")
{}


/** The creator review desk (private network); `:id` is the applicant's user id. */
export class CreatorReviewsApi extends HttpApiGroup.make("creatorReviews")
  .add(
    HttpApiEndpoint.post("approve", "/internal/creators/:id/approve")
      .setPath(Schema.Struct({ id: UserId.unchecked }))
      .addSuccess(CreatorView)
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.post("reject", "/internal/creators/:id/reject")
      .setPath(Schema.Struct({ id: UserId.unchecked }))
      .setPayload(Schema.Struct({ reason: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(2000)) }))
      .addSuccess(CreatorView)
      .addError(NotFound)
  )
  .addError(InvalidRequest)
  .annotate(OpenApi.Title, "Creator review (internal)")
  .annotate(OpenApi.Description, "Operator review of creators; private network only.")
{}

/** An agent's skills (derived from its tools). */
export class AgentSkillsApi extends HttpApiGroup.make("agentSkills")
  .add(
    HttpApiEndpoint.get("list", "/v1/agents/:identifier/skills")
      .setPath(Schema.Struct({ identifier: Schema.String }))
      .setUrlParams(ListParams)
      .addSuccess(SkillList)
      .addError(NotFound)
      .annotate(
        OpenApi.Description,
        "The skills of an agent: those whose tools it has, none denied. The owner sees the draft, others the published version."
      )
  )
  .middleware(PlatformAuthentication)
  .addError(InvalidRequest)
  .annotate(OpenApi.Title, "Skills")
  .annotate(OpenApi.Description, "The skills of an expert: those whose tools it has.")
{}

/**
 * The logged-in person as the web app needs them: who they are and whether they may review (an operator of
 * `ADMIN_PHONES`), so the menu shows Review without probing the console (issue 48: a 404 in every non-operator's
 * console, on every page).
 */
export class ProfileApi extends HttpApiGroup.make("profile")
  .add(
    HttpApiEndpoint.get("me", "/api/user/me")
      .addSuccess(Schema.Struct({ id: Schema.String, phone: Schema.String, may_review: Schema.Boolean }))
      .annotate(OpenApi.Description, "The logged-in person: their id, phone, and whether they may use the review console (/admin).")
  )
  .middleware(UserAuthentication)
  .addError(InvalidRequest)
  .annotate(OpenApi.Title, "Profile")
  .annotate(OpenApi.Description, "The logged-in person.")
{}

const Reason = Schema.Struct({ reason: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(2000)) })
const Decision = Schema.Struct({ id: Schema.String, version: Schema.Int, status: Schema.String })

/**
 * The review console (issue 27 item 4): for the operators of `ADMIN_PHONES`, logged in as usual; anyone else gets
 * 404. It decides through the same services as `/internal/reviews/*` and `/internal/creators/*`.
 */
export class AdminApi extends HttpApiGroup.make("admin")
  .add(
    HttpApiEndpoint.get("queue", "/api/admin/queue")
      .addSuccess(Schema.Struct({
        submissions: Schema.Array(Schema.Struct({
          id: Schema.String,
          agent: Schema.String,
          name: Schema.String,
          version: Schema.Int,
          owner_id: Schema.String,
          published_version: Schema.NullOr(Schema.Int),
          submitted_at: Schema.String
        })),
        applications: Schema.Array(CreatorView)
      }))
      .addError(NotFound)
      .annotate(OpenApi.Description, "What waits for review: expert submissions and creator applications, oldest first.")
  )
  .add(
    HttpApiEndpoint.get("submission", "/api/admin/submissions/:id")
      .setPath(Schema.Struct({ id: SubmissionId.unchecked }))
      .addSuccess(Schema.Struct({
        id: Schema.String,
        agent: Schema.String,
        version: Schema.Int,
        status: Schema.String,
        reason: Schema.NullOr(Schema.String),
        owner_id: Schema.String,
        submitted_at: Schema.String,
        published_version: Schema.NullOr(Schema.Int),
        submitted: Schema.NullOr(ExpertConfigView),
        published: Schema.NullOr(ExpertConfigView),
        eval_gate: Schema.NullOr(GateScorecard)
      }))
      .addError(NotFound)
      .annotate(
        OpenApi.Description,
        "A submission: the submitted version and the published one it would replace (null for a first one), and the " +
          "eval gate's scorecard when the expert has a gate (docs/evals.md, \"Publish gate\"): its dataset and threshold, " +
          "and the pass rate of the submitted version and of the live one, each with the eval run it comes from and its credits."
      )
  )
  .add(
    HttpApiEndpoint.post("approveSubmission", "/api/admin/submissions/:id/approve")
      .setPath(Schema.Struct({ id: SubmissionId.unchecked }))
      .addSuccess(Decision)
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.post("rejectSubmission", "/api/admin/submissions/:id/reject")
      .setPath(Schema.Struct({ id: SubmissionId.unchecked }))
      .setPayload(Reason)
      .addSuccess(Decision)
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.post("feature", "/api/admin/agents/:identifier/feature")
      .setPath(Identifier)
      .addSuccess(Schema.Struct({ identifier: Schema.String, featured: Schema.Boolean }))
      .addError(NotFound)
      .annotate(OpenApi.Description, "Feature a published expert on the marketplace's front page (again: no change).")
  )
  .add(
    HttpApiEndpoint.post("unfeature", "/api/admin/agents/:identifier/unfeature")
      .setPath(Identifier)
      .addSuccess(Schema.Struct({ identifier: Schema.String, featured: Schema.Boolean }))
      .addError(NotFound)
      .annotate(OpenApi.Description, "Take an expert off the featured list.")
  )
  .add(
    HttpApiEndpoint.post("approveApplication", "/api/admin/applications/:id/approve")
      .setPath(Schema.Struct({ id: UserId.unchecked }))
      .addSuccess(CreatorView)
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.post("rejectApplication", "/api/admin/applications/:id/reject")
      .setPath(Schema.Struct({ id: UserId.unchecked }))
      .setPayload(Reason)
      .addSuccess(CreatorView)
      .addError(NotFound)
  )
  .middleware(UserAuthentication)
  .addError(InvalidRequest)
  .annotate(OpenApi.Title, "Review console")
  .annotate(OpenApi.Description, "Operators (ADMIN_PHONES) review expert submissions and creator applications.")
{}
