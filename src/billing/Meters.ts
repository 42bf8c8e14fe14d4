import { Effect, Option } from "effect"
import { Unauthorized } from "../platform/Errors.js"
import { type BillingEvent, InsufficientScope, MeterDisabled, UnknownEvent } from "./Api.js"
import { AppDirectory } from "./AppDirectory.js"
import { entryKey, LedgerRepo } from "./Repo.js"
import type { AppCallerIdentity as AppCaller } from "../identity/Domain.js"
import type { Movement } from "./Domain.js"
import { Wallets } from "./Wallets.js"

/**
 * Billing events of third-party apps (spec 2.6, `POST /v1/events`): the app's meter names the price, and the
 * user's wallet charges it once per idempotency key, within the app's daily cap per user.
 */
export class Meters extends Effect.Service<Meters>()("atrium/billing/Meters", {
  effect: Effect.gen(function*() {
    const directory = yield* AppDirectory
    const ledger = yield* LedgerRepo
    const wallets = yield* Wallets

    const report = Effect.fn("Meters.report")(function*(caller: AppCaller, event: typeof BillingEvent.Type) {
      if (!caller.scopes.includes("events")) {
        return yield* new InsufficientScope({ message: "This access token lacks the `events` scope." })
      }
      const { app, meter } = yield* directory.priced(caller.appId, event.event)
      if (Option.isNone(app)) return yield* new Unauthorized({ message: "The app of this access token no longer exists." })
      if (Option.isNone(meter) || meter.value.disabled) {
        // A retry of an event charged before its meter went away still gets its original answer.
        const prior = (yield* ledger.findByKeys([{ scope: app.value.id, key: event.idempotency_key }]))
          .get(entryKey(app.value.id, event.idempotency_key))
        if (prior !== undefined && prior.userId === caller.userId) {
          return { amount: -prior.amount, balance: prior.balanceAfter, replay: true } satisfies Movement
        }
        return yield* Option.isNone(meter)
          ? new UnknownEvent({ message: `No meter of this app is named "${event.event}".` })
          : new MeterDisabled({ message: `The meter "${event.event}" is disabled.` })
      }
      return yield* wallets.charge(caller.userId, meter.value.creditsPerUse, {
        kind: "event",
        scope: app.value.id,
        key: event.idempotency_key,
        appId: app.value.id,
        event: event.event,
        metadata: event.metadata ?? null
      }, app.value.dailyCapPerUser)
    })

    return { report } as const
  }),
  dependencies: [AppDirectory.Default, LedgerRepo.Default]
}) {}
