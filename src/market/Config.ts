import { Config, Effect } from "effect"

const E164 = /^\+[1-9]\d{6,14}$/

/**
 * `ADMIN_PHONES`: who operates the review console (`/admin`, `/api/admin/*`): a comma-separated list of E.164
 * phone numbers, matched against the logged-in user's phone. Unset or empty, nobody is an operator and reviews
 * are decided only through `/internal/*` with `INTERNAL_TOKEN`.
 */
export class MarketConfig extends Effect.Service<MarketConfig>()("atrium/market/MarketConfig", {
  effect: Config.all({
    adminPhones: Config.string("ADMIN_PHONES").pipe(
      Config.withDefault(""),
      Config.map((text) => text.split(",").map((phone) => phone.trim()).filter((phone) => phone.length > 0)),
      Config.validate({
        message: "ADMIN_PHONES must be a comma-separated list of E.164 phone numbers such as +8613800000000",
        validation: (phones) => phones.every((phone) => E164.test(phone))
      }),
      Config.map((phones): ReadonlySet<string> => new Set(phones))
    )
  })
}) {}
