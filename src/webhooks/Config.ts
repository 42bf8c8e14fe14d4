import { Config, Effect } from "effect"
import { duration } from "../platform/Config.js"

/** Webhooks' settings (docs/webhooks.md, README settings), read once. */
export class WebhooksConfig extends Effect.Service<WebhooksConfig>()("atrium/webhooks/WebhooksConfig", {
  effect: Config.all({
    /** How long one attempt may take, connection to the answer's first bytes; past it the attempt failed. */
    timeout: duration("WEBHOOK_TIMEOUT", "10 seconds"),
    /** How long a delivery is retried after it was made (Standard Webhooks' and OpenAI's 72 hours). */
    retryWindow: duration("WEBHOOK_RETRY_WINDOW", "72 hours"),
    /** The first retry's delay; each later one doubles it (with jitter), up to `retryMaxDelay`. */
    retryBase: duration("WEBHOOK_RETRY_BASE", "5 seconds"),
    retryMaxDelay: duration("WEBHOOK_RETRY_MAX_DELAY", "6 hours"),
    /** An endpoint whose every attempt has failed for this long is disabled, and its owner told. */
    disableAfter: duration("WEBHOOK_DISABLE_AFTER", "5 days"),
    /** How often each process looks for due deliveries (an event emitted in the process wakes it at once). */
    poll: duration("WEBHOOK_POLL", "2 seconds")
  })
}) {}
