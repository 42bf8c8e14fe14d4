import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import { Clock, Effect, Layer, Option } from "effect"
import { AtriumApi } from "../Api.js"
import { AuthenticationLive } from "../identity/Authentication.js"
import { type OAuthApp, OAuthApps } from "../identity/oauth/Apps.js"
import { InvalidRequest, NotFound } from "../platform/Errors.js"
import type { AppId } from "../platform/Ids.js"
import { toNumber } from "../platform/Money.js"
import { ModelCatalog } from "../runtime/models/Catalog.js"
import { AppDirectory } from "./AppDirectory.js"
import { Meters } from "./Meters.js"
import { Payments } from "./Payments.js"
import { LedgerReads } from "./LedgerReads.js"
import { type MeterRow, MetersRepo } from "./MetersRepo.js"
import { LedgerRepo } from "./Repo.js"
import { pageOf } from "../platform/http/Lists.js"
import { AppCaller, Caller, CurrentUser } from "../identity/Domain.js"
import { MeterId, type Movement } from "./Domain.js"
import { Wallets } from "./Wallets.js"
import { canUpdateApp } from "../identity/Policy.js"
import { policyUse } from "../platform/Policy.js"

const DAY_MS = 86_400_000

/** The wire form of a charge: `idempotent_replay` appears only on a replay (spec 2.3). */
const chargeResult = (movement: Movement) => ({
  charged: toNumber(movement.amount),
  balance_remaining: toNumber(movement.balance),
  ...(movement.replay ? { idempotent_replay: true as const } : {})
})

export const MetersHttp = HttpApiBuilder.group(AtriumApi, "meters", (handlers) =>
  Effect.gen(function*() {
    const catalog = yield* ModelCatalog
    return handlers.handle("list", ({ urlParams }) =>
      Effect.flatMap(catalog.list, (models) =>
        pageOf(
          models.map((model) => ({
            id: `model.${model.id}`,
            kind: "model_usage" as const,
            model: model.id,
            unit: "1k_tokens" as const,
            input_credits: Number(model.inputPer1k),
            output_credits: Number(model.outputPer1k)
          })),
          urlParams,
          (meter) => meter.id
        )))
  })).pipe(Layer.provide(ModelCatalog.Default))

export const EventsHttp = HttpApiBuilder.group(AtriumApi, "events", (handlers) =>
  Effect.gen(function*() {
    const meters = yield* Meters
    return handlers.handle("report", ({ payload }) =>
      Effect.map(Effect.flatMap(AppCaller, (caller) => meters.report(caller, payload)), chargeResult))
  })).pipe(Layer.provide([Meters.Default, AuthenticationLive]))

export const CreditsHttp = HttpApiBuilder.group(AtriumApi, "credits", (handlers) =>
  Effect.gen(function*() {
    const wallets = yield* Wallets
    return handlers
      .handle("balance", () =>
        Effect.flatMap(Caller, (caller) =>
          Effect.map(wallets.balance(caller.userId), (balance) => ({ balance: toNumber(balance) }))))
      .handle("preCheck", ({ payload }) =>
        Effect.flatMap(Caller, (caller) =>
          // Judged against what a consume may take, balance - held: credits runs in progress hold are not the
          // caller's to spend (docs/billing.md, "Holds"), so a "sufficient" would be followed by a 402.
          Effect.map(wallets.funds(caller.userId), ({ balance, held }) => ({
            sufficient: balance - held >= payload.amount,
            balance: toNumber(balance)
          }))))
      .handle("consume", ({ payload }) =>
        Effect.gen(function*() {
          const caller = yield* Caller
          const movement = yield* wallets.charge(caller.userId, payload.amount, {
            kind: "consume",
            scope: `credit:${caller.userId}`,
            key: payload.idempotency_key,
            description: payload.description ?? null
          }).pipe(Effect.catchTag("DailyCapExceeded", Effect.die)) // no cap without an app
          return chargeResult(movement)
        }))
  })).pipe(Layer.provide(AuthenticationLive))

export const WalletHttp = HttpApiBuilder.group(AtriumApi, "wallet", (handlers) =>
  Effect.gen(function*() {
    const wallets = yield* Wallets
    const reads = yield* LedgerReads
    const payments = yield* Payments
    return handlers
      .handle("wallet", () =>
        Effect.gen(function*() {
          const user = yield* CurrentUser
          const { balance, held } = yield* wallets.funds(user.userId)
          const now = yield* Clock.currentTimeMillis
          const spent = yield* reads.spentSince(user.userId, new Date(Math.floor(now / DAY_MS) * DAY_MS))
          return { balance: toNumber(balance), held: toNumber(held), available: toNumber(balance - held), today_spent: toNumber(spent) }
        }))
      .handle("ledger", ({ urlParams }) =>
        Effect.gen(function*() {
          const user = yield* CurrentUser
          yield* wallets.balance(user.userId) // a first look creates the wallet (and its welcome credits)
          const limit = urlParams.limit ?? 50
          const page = yield* reads.page(user.userId, limit, urlParams.before === undefined ? null : BigInt(urlParams.before))
          return {
            has_more: page.hasMore,
            next_before: page.hasMore ? Number(page.lines[page.lines.length - 1]!.seq) : null,
            data: page.lines.map((line) => ({
              seq: Number(line.seq),
              amount: toNumber(line.amount),
              kind: line.kind,
              app: line.appId,
              event: line.event,
              metadata: line.metadata,
              description: line.description,
              balance_after: toNumber(line.balanceAfter),
              created_at: line.createdAt.toISOString()
            }))
          }
        }))
      .handle("createOrder", ({ payload }) =>
        Effect.flatMap(CurrentUser, (user) => payments.createOrder(user.userId, payload.amount)))
      .handle("order", ({ path }) => Effect.flatMap(CurrentUser, (user) => payments.orderOf(user.userId, path.id)))
      .handle("testCheckout", ({ path, payload }) =>
        Effect.flatMap(CurrentUser, (user) => payments.testCheckout(user.userId, path.id, payload.decision)))
  })).pipe(Layer.provide([LedgerReads.Default, Payments.Default, AuthenticationLive]))

/** The provider's callback: the raw body, because its signature is over those bytes (`Payments.notify`). */
export const PaymentNotifyHttp = HttpApiBuilder.group(AtriumApi, "paymentNotify", (handlers) =>
  Effect.gen(function*() {
    const payments = yield* Payments
    return handlers.handleRaw("notify", ({ path }) =>
      Effect.gen(function*() {
        const request = yield* HttpServerRequest.HttpServerRequest
        const raw = yield* Effect.orDie(request.text)
        return yield* payments.notify(path.provider, raw, request.headers["x-signature"] ?? "")
      }))
  })).pipe(Layer.provide(Payments.Default))

/** What the API shows of an app: never the secret's hash. */
const appView = (app: OAuthApp) => ({
  id: app.id,
  name: app.name,
  client_id: app.clientId,
  redirect_uris: app.redirectUris,
  daily_cap_per_user: app.dailyCapPerUser === null ? null : toNumber(app.dailyCapPerUser),
  created_at: app.createdAt.toISOString()
})

const meterView = (meter: MeterRow) => ({
  id: meter.id,
  event_name: meter.eventName,
  credits_per_use: toNumber(meter.creditsPerUse),
  type: "PER_USE" as const,
  disabled: meter.disabled
})

export const AppsHttp = HttpApiBuilder.group(AtriumApi, "apps", (handlers) =>
  Effect.gen(function*() {
    const apps = yield* OAuthApps
    const meters = yield* MetersRepo
    const directory = yield* AppDirectory
    const ownApp = (id: AppId) => Effect.flatMap(CurrentUser, (user) => apps.owned(user.userId, id))
    return handlers
      .handle("create", ({ payload }) =>
        Effect.gen(function*() {
          const user = yield* CurrentUser
          const { app, clientSecret } = yield* apps.create(user.userId, { name: payload.name, redirectUris: payload.redirect_uris })
          return { ...appView(app), client_secret: clientSecret }
        }))
      .handle("list", ({ urlParams }) =>
        Effect.flatMap(CurrentUser, (user) =>
          Effect.flatMap(apps.list(user.userId), (rows) => pageOf(rows.map(appView), urlParams, (app) => app.id))))
      .handle("update", ({ path, payload }) =>
        Effect.gen(function*() {
          const user = yield* CurrentUser
          const updated = yield* apps.update(path.id, {
            name: payload.name,
            redirectUris: payload.redirect_uris,
            dailyCapPerUser: payload.daily_cap_per_user
          }).pipe(policyUse(canUpdateApp(user.userId, path.id, yield* apps.find(path.id))))
          yield* directory.invalidate(updated.id)
          return appView(updated)
        }))
      .handle("createMeter", ({ path, payload }) =>
        Effect.gen(function*() {
          const app = yield* ownApp(path.id)
          const meter = yield* meters.insertMeter({
            id: MeterId.random(),
            appId: app.id,
            eventName: payload.event_name,
            creditsPerUse: payload.credits_per_use
          })
          yield* directory.invalidate(app.id)
          if (Option.isNone(meter)) {
            return yield* new InvalidRequest({ message: `event_name: this app already has a meter "${payload.event_name}"` })
          }
          return meterView(meter.value)
        }))
      .handle("listMeters", ({ path, urlParams }) =>
        Effect.gen(function*() {
          const app = yield* ownApp(path.id)
          return yield* pageOf((yield* meters.listMeters(app.id)).map(meterView), urlParams, (meter) => meter.id)
        }))
      .handle("updateMeter", ({ path, payload }) =>
        Effect.gen(function*() {
          const app = yield* ownApp(path.id)
          const meter = yield* meters.updateMeter(app.id, path.meterId, {
            creditsPerUse: payload.credits_per_use,
            disabled: payload.disabled
          })
          yield* directory.invalidate(app.id)
          if (Option.isNone(meter)) return yield* new NotFound({ message: `No meter ${path.meterId}.` })
          return meterView(meter.value)
        }))
  })).pipe(Layer.provide([OAuthApps.Default, MetersRepo.Default, AppDirectory.Default, AuthenticationLive]))

export const InternalBillingHttp = HttpApiBuilder.group(AtriumApi, "internalBilling", (handlers) =>
  Effect.gen(function*() {
    const wallets = yield* Wallets
    const ledger = yield* LedgerRepo
    return handlers.handle("grant", ({ path, payload }) =>
      Effect.gen(function*() {
        if (Option.isNone(yield* ledger.findUser(path.userId))) {
          return yield* new NotFound({ message: `No user ${path.userId}.` })
        }
        const movement = yield* wallets.credit(path.userId, payload.amount, {
          kind: "grant",
          scope: "grant",
          key: payload.idempotency_key,
          description: payload.reason
        })
        return { balance: toNumber(movement.balance), ...(movement.replay ? { idempotent_replay: true as const } : {}) }
      }))
  })).pipe(Layer.provide(LedgerRepo.Default))

/** Every billing route's handlers, needing the wallet client. */
export const BillingHttp = Layer.mergeAll(
  MetersHttp,
  EventsHttp,
  CreditsHttp,
  WalletHttp,
  PaymentNotifyHttp,
  AppsHttp,
  InternalBillingHttp
)
