import { Config, Effect } from "effect"
import { optionalSecret, setting } from "../platform/Config.js"
import { parseCredits } from "../platform/Money.js"

const credits = (name: string, fallback: string) =>
  setting(name, Config.string, fallback).pipe(
    Config.validate({
      message: `${name} must be a non-negative amount with at most 6 decimal places`,
      validation: (text) => parseCredits(text) !== undefined
    }),
    Config.map((text) => parseCredits(text)!)
  )

export class BillingConfig extends Effect.Service<BillingConfig>()("atrium/billing/BillingConfig", {
  effect: Config.all({
    /** Credits every new user receives once. */
    signupCredits: credits("SIGNUP_CREDITS", "100"),
    /** Verifies `POST /api/payment/notify/:provider` bodies (HMAC-SHA256 of the raw body). */
    paymentWebhookSecret: optionalSecret("PAYMENT_WEBHOOK_SECRET")
  })
}) {}
