import { HttpApi, OpenApi } from "@effect/platform"
import { AgentsApi, PurchasesApi, ReviewsApi } from "./agents/Api.js"
import { RunsApi } from "./runs/Api.js"
import { EvolutionApi } from "./evolution/Api.js"
import { DistillationsApi } from "./distillation/Api.js"
import { SessionsApi } from "./sessions/Api.js"
import { AppsApi, CreditsApi, EventsApi, InternalBillingApi, MetersApi, PaymentNotifyApi, WalletApi } from "./billing/Api.js"
import { EnvironmentsApi } from "./environments/Api.js"
import { FilesApi } from "./files/Api.js"
import { AccountApi, AuthApi } from "./identity/Api.js"
import { AgentSkillsApi, CreatorReviewsApi, CreatorsApi, MarketApi, NotificationsApi } from "./market/Api.js"
import { HealthApi } from "./platform/Health.js"
import { ModelsApi } from "./runtime/models/Api.js"

/**
 * HttpApi documents an error as it encodes it (`{_tag, ...}`); the wire carries the envelope that `Server.ts` writes.
 * This makes the document say what a client really receives.
 */
const documentErrorEnvelope = (spec: Record<string, any>): Record<string, any> => {
  const envelope = {
    type: "object",
    required: ["error"],
    properties: {
      error: {
        type: "object",
        required: ["type", "message"],
        properties: {
          type: { type: "string", description: "snake_case error type, e.g. invalid_request" },
          message: { type: "string" }
        }
      }
    }
  }
  for (const operations of Object.values<Record<string, any>>(spec.paths ?? {})) {
    for (const operation of Object.values<any>(operations)) {
      for (const [status, response] of Object.entries<any>(operation?.responses ?? {})) {
        if (Number(status) >= 400 && response?.content?.["application/json"]) {
          response.content["application/json"].schema = { $ref: "#/components/schemas/Error" }
        }
      }
    }
  }
  spec.components = { ...spec.components, schemas: { ...spec.components?.schemas, Error: envelope } }
  return spec
}

/** The whole HTTP API: one group per domain. Handlers live in each domain's `Http.ts`. */
export class AtriumApi extends HttpApi.make("atrium")
  .add(HealthApi)
  .add(AuthApi)
  .add(AccountApi)
  .add(ModelsApi)
  .add(MetersApi)
  .add(EventsApi)
  .add(CreditsApi)
  .add(WalletApi)
  .add(PaymentNotifyApi)
  .add(AppsApi)
  .add(InternalBillingApi)
  .add(AgentsApi)
  .add(RunsApi)
  .add(SessionsApi)
  .add(PurchasesApi)
  .add(ReviewsApi)
  .add(FilesApi)
  .add(EnvironmentsApi)
  .add(MarketApi)
  .add(CreatorsApi)
  .add(NotificationsApi)
  .add(CreatorReviewsApi)
  .add(AgentSkillsApi)
  .add(EvolutionApi)
  .add(DistillationsApi)
  .annotate(OpenApi.Title, "Atrium platform API")
  .annotate(OpenApi.Version, "1.0.0")
  .annotate(OpenApi.Transform, documentErrorEnvelope)
  .annotate(
    OpenApi.Description,
    "Run and publish AI experts, paid with credits. Errors are {\"error\":{\"type\",\"message\"}}."
  )
{}
