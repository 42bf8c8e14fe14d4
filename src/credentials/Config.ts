import { Config, Effect } from "effect"
import { optionalSecret } from "../platform/Config.js"

/** `SECRETS_KEY`: what stored credentials are encrypted under (docs/tools.md); set but empty stops start-up. */
export class CredentialsConfig extends Effect.Service<CredentialsConfig>()("atrium/credentials/CredentialsConfig", {
  effect: Config.all({ secretsKey: optionalSecret("SECRETS_KEY") })
}) {}
