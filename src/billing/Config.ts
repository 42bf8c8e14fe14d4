import { Config, ConfigError, Effect, Either } from "effect"
import { optional, optionalSecret, setting } from "../platform/Config.js"
import { parseCredits } from "../platform/Money.js"

const credits = (name: string, fallback: string) =>
  setting(name, Config.string, fallback).pipe(
    Config.validate({
      message: `${name} must be a non-negative amount with at most 6 decimal places`,
      validation: (text) => parseCredits(text) !== undefined
    }),
    Config.map((text) => parseCredits(text)!)
  )

/**
 * The payment provider that takes top-ups. `test` is a checkout page of the platform's own (`/checkout`) that
 * completes or declines an order, so a fresh install can top up; it is the default except in production
 * (`NODE_ENV=production`, as the Dockerfile sets it), where it cannot be turned on, since it credits without money.
 * `none`: orders wait for a real provider's signed callback (`docs/payments.md`).
 */
const paymentsProvider = Config.all({
  chosen: optional("PAYMENTS_PROVIDER", (name) => Config.literal("test", "none")(name)),
  production: Config.map(setting("NODE_ENV", Config.string, "development"), (env) => env.trim() === "production")
}).pipe(
  Config.mapOrFail(({ chosen, production }) => {
    const provider = chosen._tag === "Some" ? chosen.value : production ? "none" : "test"
    return production && provider === "test"
      ? Either.left(ConfigError.InvalidData(["PAYMENTS_PROVIDER"], "PAYMENTS_PROVIDER=test credits wallets without payment: it cannot be used with NODE_ENV=production"))
      : Either.right(provider)
  })
)

export class BillingConfig extends Effect.Service<BillingConfig>()("atrium/billing/BillingConfig", {
  effect: Config.all({
    /** Credits every new user receives once. */
    signupCredits: credits("SIGNUP_CREDITS", "100"),
    /** Verifies `POST /api/payment/notify/:provider` bodies (HMAC-SHA256 of the raw body). */
    paymentWebhookSecret: optionalSecret("PAYMENT_WEBHOOK_SECRET"),
    paymentsProvider,
    /**
     * How long a hold (docs/billing.md, "Holds") lives unless its run asks for it again: a run killed with its runner
     * leaves its hold behind, and the wallet voids it once this has passed (seconds).
     */
    holdTtlSeconds: setting("HOLD_TTL_SECONDS", Config.integer, 900).pipe(
      Config.validate({ message: "HOLD_TTL_SECONDS must be at least 1", validation: (n) => n >= 1 })
    )
  })
}) {}
