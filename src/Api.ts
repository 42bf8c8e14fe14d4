import { HttpApi, OpenApi } from "@effect/platform"
import { MetersApi } from "./billing/Api.js"
import { AccountApi, AuthApi } from "./identity/Api.js"
import { HealthApi } from "./platform/Health.js"
import { ModelsApi } from "./runtime/models/Api.js"

/** The whole HTTP API: one group per domain. Handlers live in each domain's `Http.ts`. */
export class AtriumApi extends HttpApi.make("atrium")
  .add(HealthApi)
  .add(AuthApi)
  .add(AccountApi)
  .add(ModelsApi)
  .add(MetersApi)
  .annotate(OpenApi.Title, "Atrium platform API")
  .annotate(OpenApi.Version, "1.0.0")
  .annotate(
    OpenApi.Description,
    "Run and publish AI experts, paid with credits. Errors are {\"error\":{\"type\",\"message\"}}."
  )
{}
