import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { PlatformAuthentication } from "../identity/Domain.js"
import { Forbidden, InvalidRequest, NotFound } from "../platform/Errors.js"
import { Change, SuggestionId } from "./Domain.js"
import { ListParams } from "../platform/http/Lists.js"

export const SuggestionView = Schema.Struct({
  id: SuggestionId,
  agent: Schema.String,
  kind: Schema.String,
  subject: Schema.String,
  title: Schema.String,
  rationale: Schema.String,
  change: Change,
  evidence: Schema.Record({ key: Schema.String, value: Schema.Number }),
  drafted_by: Schema.String,
  status: Schema.Literal("pending", "accepted", "dismissed"),
  applied_version: Schema.NullOr(Schema.Int),
  created_at: Schema.String,
  updated_at: Schema.String,
  accepted_at: Schema.NullOr(Schema.String),
  dismissed_at: Schema.NullOr(Schema.String)
})

const OutcomesView = Schema.Struct({
  runs: Schema.Int,
  completed: Schema.Int,
  failed: Schema.Int,
  cancelled: Schema.Int,
  failure_rate: Schema.Number,
  failures: Schema.Record({ key: Schema.String, value: Schema.Int }),
  runs_with_denied_tools: Schema.Int,
  denied_tool_calls: Schema.Int,
  /** Denied calls by tool name; runs recorded before tools were named count in `denied_tool_calls` only. */
  denied_tools: Schema.Record({ key: Schema.String, value: Schema.Int }),
  unanswered: Schema.Int
})

export const AcceptedView = Schema.Struct({
  suggestion: SuggestionView,
  agent: Schema.Struct({
    identifier: Schema.String,
    published_version: Schema.NullOr(Schema.Int),
    applied_version: Schema.NullOr(Schema.Int),
    resubmitted_version: Schema.NullOr(Schema.Int)
  }),
  already_accepted: Schema.Boolean,
  message: Schema.String
})

export const StatsView = Schema.Struct({
  identifier: Schema.String,
  suggestions: Schema.Struct({ made: Schema.Int, pending: Schema.Int, accepted: Schema.Int, dismissed: Schema.Int }),
  last_accepted_at: Schema.NullOr(Schema.String),
  published_version: Schema.NullOr(Schema.Int),
  runs: Schema.Struct({
    all: OutcomesView,
    before_last_accepted: Schema.NullOr(OutcomesView),
    after_last_accepted: Schema.NullOr(OutcomesView)
  }),
  failure_rate_change: Schema.NullOr(Schema.Number)
})

const AgentPath = Schema.Struct({ identifier: Schema.String })
// Unchecked: an id of another kind in the path is a suggestion that is not there (404), as it was.
const SuggestionPath = Schema.Struct({ id: SuggestionId.unchecked })

/** Self-evolution (docs/evolution.md): the agent's owner only. */
export class EvolutionApi extends HttpApiGroup.make("evolution")
  .add(
    HttpApiEndpoint.get("suggestions", "/v1/agents/:identifier/evolution/suggestions")
      .setPath(AgentPath)
      .setUrlParams(ListParams)
      .addSuccess(Schema.Struct({ identifier: Schema.String, data: Schema.Array(SuggestionView), has_more: Schema.Boolean }))
      .addError(NotFound)
      .addError(Forbidden)
      .annotate(
        OpenApi.Description,
        "Improvement suggestions for one of your agents, derived afresh from its recorded runs: open ones first."
      )
  )
  .add(
    HttpApiEndpoint.post("accept", "/v1/evolution/suggestions/:id/accept")
      .setPath(SuggestionPath)
      .addSuccess(AcceptedView)
      .addError(NotFound)
      .addError(Forbidden)
      .annotate(
        OpenApi.Description,
        "Apply a suggestion at once, without review: to the draft, and as a new published version when one is published."
      )
  )
  .add(
    HttpApiEndpoint.post("dismiss", "/v1/evolution/suggestions/:id/dismiss")
      .setPath(SuggestionPath)
      .addSuccess(SuggestionView)
      .addError(NotFound)
      .annotate(OpenApi.Description, "Set a suggestion aside; it is not made again from the same runs.")
  )
  .add(
    HttpApiEndpoint.get("stats", "/v1/agents/:identifier/evolution/stats")
      .setPath(AgentPath)
      .addSuccess(StatsView)
      .addError(NotFound)
      .addError(Forbidden)
      .annotate(
        OpenApi.Description,
        "Suggestions made and accepted, and the agent's run outcomes before and after the last accepted suggestion."
      )
  )
  .middleware(PlatformAuthentication)
  .addError(InvalidRequest)
  .annotate(OpenApi.Title, "Self-evolution")
  .annotate(OpenApi.Description, "Evidence from runs and the suggestions an expert's owner may apply.")
{}
