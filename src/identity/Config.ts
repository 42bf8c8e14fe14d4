import { Config, Effect } from "effect"
import { duration, optionalSecret, setting } from "../platform/Config.js"

/**
 * The login page's proof of work (Challenge.ts, docs/identity.md). The other login and SMS settings are the
 * platform's (`AppConfig.sms`, `AppConfig.login`).
 */
export class ChallengeConfig extends Effect.Service<ChallengeConfig>()("atrium/identity/ChallengeConfig", {
  effect: Config.all({
    /** HMAC key of the challenges; unset, one derived from the JWT key. Set but empty stops start-up. */
    hmacKey: optionalSecret("SMS_CHALLENGE_KEY"),
    /** Upper bound of the number the client searches for: the work a solver does is half of it on average. */
    maxNumber: setting("SMS_CHALLENGE_MAX_NUMBER", Config.integer, 100_000),
    lifetime: duration("SMS_CHALLENGE_TTL", "10 minutes")
  })
}) {}
