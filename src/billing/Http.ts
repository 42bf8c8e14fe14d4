import { HttpApiBuilder, HttpServerRequest } from "@effect/platform"
import { SqlClient } from "@effect/sql"
import { Clock, Effect, Layer, Option, Redacted } from "effect"
import * as Crypto from "node:crypto"
import { AtriumApi } from "../Api.js"
import { AppCaller, AuthenticationLive, Caller, CurrentUser } from "../identity/Authentication.js"
import { sha256 } from "../identity/Tokens.js"
import { InvalidRequest, NotFound, Unauthorized } from "../platform/Errors.js"
import { randomBase62 } from "../platform/Ids.js"
import { type Micros, parseCredits, toNumber } from "../platform/Money.js"
import { ModelCatalog } from "../runtime/models/Catalog.js"
import { InsufficientScope, MeterDisabled, UnknownEvent } from "./Api.js"
import { AppDirectory } from "./AppDirectory.js"
import { BillingConfig } from "./Config.js"
import { type AppRow, AppsRepo, entryKey, LedgerReads, LedgerRepo, type MeterRow } from "./Repo.js"
import { type Movement, Wallets } from "./Wallet.js"

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
    return handlers.handle("list", () =>
      Effect.map(catalog.list, (models) => ({
        has_more: false,
        data: models.map((model) => ({
          id: `model.${model.id}`,
          kind: "model_usage" as const,
          model: model.id,
          unit: "1k_tokens" as const,
          input_credits: Number(model.inputPer1k),
          output_credits: Number(model.outputPer1k)
        }))
      })))
  })).pipe(Layer.provide(ModelCatalog.Default))

export const EventsHttp = HttpApiBuilder.group(AtriumApi, "events", (handlers) =>
  Effect.gen(function*() {
    const directory = yield* AppDirectory
    const ledger = yield* LedgerRepo
    const wallets = yield* Wallets
    return handlers.handle("report", ({ payload }) =>
      Effect.gen(function*() {
        const caller = yield* AppCaller
        if (!caller.scopes.includes("events")) {
          return yield* new InsufficientScope({ message: "This access token lacks the `events` scope." })
        }
        const app = yield* directory.app(caller.appId)
        if (Option.isNone(app)) return yield* new Unauthorized({ message: "The app of this access token no longer exists." })
        const meter = yield* directory.meter(app.value.id, payload.event)
        if (Option.isNone(meter) || meter.value.disabled) {
          // A retry of an event charged before its meter went away still gets its original answer.
          const prior = (yield* ledger.findByKeys([{ scope: app.value.id, key: payload.idempotency_key }]))
            .get(entryKey(app.value.id, payload.idempotency_key))
          if (prior !== undefined && prior.userId === caller.userId) {
            return chargeResult({ amount: -prior.amount, balance: prior.balanceAfter, replay: true })
          }
          return yield* Option.isNone(meter)
            ? new UnknownEvent({ message: `No meter of this app is named "${payload.event}".` })
            : new MeterDisabled({ message: `The meter "${payload.event}" is disabled.` })
        }
        const movement = yield* wallets.charge(caller.userId, meter.value.creditsPerUse, {
          kind: "event",
          scope: app.value.id,
          key: payload.idempotency_key,
          appId: app.value.id,
          event: payload.event,
          metadata: payload.metadata ?? null
        }, app.value.dailyCapPerUser)
        return chargeResult(movement)
      }))
  })).pipe(Layer.provide([AppDirectory.Default, LedgerRepo.Default, AuthenticationLive]))

export const CreditsHttp = HttpApiBuilder.group(AtriumApi, "credits", (handlers) =>
  Effect.gen(function*() {
    const wallets = yield* Wallets
    return handlers
      .handle("balance", () =>
        Effect.flatMap(Caller, (caller) =>
          Effect.map(wallets.balance(caller.userId), (balance) => ({ balance: toNumber(balance) }))))
      .handle("preCheck", ({ payload }) =>
        Effect.flatMap(Caller, (caller) =>
          Effect.map(wallets.balance(caller.userId), (balance) => ({
            sufficient: balance >= payload.amount,
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
    const sql = yield* SqlClient.SqlClient
    return handlers
      .handle("wallet", () =>
        Effect.gen(function*() {
          const user = yield* CurrentUser
          const balance = yield* wallets.balance(user.userId)
          const now = yield* Clock.currentTimeMillis
          const spent = yield* reads.spentSince(user.userId, new Date(Math.floor(now / DAY_MS) * DAY_MS))
          return { balance: toNumber(balance), today_spent: toNumber(spent) }
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
        Effect.gen(function*() {
          const user = yield* CurrentUser
          const id = `ord_${randomBase62(20)}`
          const rows = yield* sql<{ createdAt: Date }>`
            INSERT INTO payment_orders (id, user_id, amount, status)
            VALUES (${id}, ${user.userId}, ${String(payload.amount)}, 'pending') RETURNING created_at`.pipe(Effect.orDie)
          return { id, amount: toNumber(payload.amount), status: "pending" as const, created_at: rows[0]!.createdAt.toISOString() }
        }))
  })).pipe(Layer.provide([LedgerReads.Default, AuthenticationLive]))

/**
 * The provider's callback. The HMAC-SHA256 of the raw body under `PAYMENT_WEBHOOK_SECRET` is the only proof that
 * the provider sent it; the order's top-up goes through the wallet with the order id as its key, so however often
 * the callback repeats, the order credits the wallet once.
 */
export const PaymentNotifyHttp = HttpApiBuilder.group(AtriumApi, "paymentNotify", (handlers) =>
  Effect.gen(function*() {
    const config = yield* BillingConfig
    const wallets = yield* Wallets
    const sql = yield* SqlClient.SqlClient
    const refused = new Unauthorized({ message: "The payment notification's signature does not verify." })
    return handlers.handleRaw("notify", ({ path }) =>
      Effect.gen(function*() {
        const secret = yield* Option.match(config.paymentWebhookSecret, {
          onNone: () => refused,
          onSome: (secret) => Effect.succeed(Redacted.value(secret))
        })
        const request = yield* HttpServerRequest.HttpServerRequest
        const raw = yield* Effect.orDie(request.text)
        const signature = Buffer.from((request.headers["x-signature"] ?? "").replace(/^sha256=/, ""))
        const expected = Buffer.from(Crypto.createHmac("sha256", secret).update(raw).digest("hex"))
        // Lengths in bytes: a header of as many characters but wider ones would make timingSafeEqual throw.
        if (signature.length !== expected.length || !Crypto.timingSafeEqual(signature, expected)) {
          return yield* refused
        }
        let body: { order_id?: unknown; status?: unknown; amount?: unknown }
        try {
          body = JSON.parse(raw)
        } catch {
          return yield* new InvalidRequest({ message: "The notification body is not JSON." })
        }
        if (typeof body.order_id !== "string") return yield* new InvalidRequest({ message: "order_id: is missing" })
        // No order id holds NUL or a lone surrogate (and PostgreSQL would refuse or alter such text).
        if (/[\u0000\uD800-\uDFFF]/u.test(body.order_id)) {
          return yield* new NotFound({ message: "No such order." })
        }
        const orders = yield* sql<{ userId: string; amount: string; status: string }>`
          SELECT user_id, amount::text, status FROM payment_orders WHERE id = ${body.order_id}`.pipe(Effect.orDie)
        const order = orders[0]
        if (order === undefined) return yield* new NotFound({ message: `No order ${body.order_id}.` })
        if (body.status !== "paid") return { received: true as const, order_id: body.order_id, status: order.status }
        const amount: Micros = BigInt(order.amount)
        if (body.amount !== undefined) {
          // Compared as exact decimals, read like every amount of a request: 15, "15" and "15.0" are one amount.
          const stated = typeof body.amount === "number" || typeof body.amount === "string"
            ? parseCredits(String(body.amount).trim())
            : undefined
          if (stated !== amount) return yield* new InvalidRequest({ message: "amount does not match the order." })
        }
        yield* wallets.credit(order.userId, amount, {
          kind: "topup",
          scope: "order",
          key: body.order_id,
          description: `Top-up via ${path.provider}`
        }).pipe(Effect.orDie)
        yield* sql`UPDATE payment_orders SET status = 'paid', provider = ${path.provider}, paid_at = now()
          WHERE id = ${body.order_id} AND status = 'pending'`.pipe(Effect.orDie)
        return { received: true as const, order_id: body.order_id, status: "paid" }
      }))
  })).pipe(Layer.provide(BillingConfig.Default))

/** What the API shows of an app: never the secret's hash. */
const appView = (app: AppRow) => ({
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
    const apps = yield* AppsRepo
    const directory = yield* AppDirectory
    /** The caller's own app; someone else's answers exactly like one that does not exist. */
    const ownApp = (id: string) =>
      Effect.gen(function*() {
        const user = yield* CurrentUser
        const app = yield* apps.findApp(id)
        if (Option.isNone(app) || app.value.ownerId !== user.userId) {
          return yield* new NotFound({ message: `No app ${id}.` })
        }
        return app.value
      })
    return handlers
      .handle("create", ({ payload }) =>
        Effect.gen(function*() {
          const user = yield* CurrentUser
          const clientSecret = `cs_${randomBase62(40)}`
          const app = yield* apps.insertApp({
            id: `app_${randomBase62(20)}`,
            ownerId: user.userId,
            name: payload.name,
            clientId: `cid_${randomBase62(24)}`,
            clientSecretHash: sha256(clientSecret),
            redirectUris: payload.redirect_uris
          })
          return { ...appView(app), client_secret: clientSecret }
        }))
      .handle("list", () =>
        Effect.flatMap(CurrentUser, (user) =>
          Effect.map(apps.listApps(user.userId), (rows) => ({ data: rows.map(appView) }))))
      .handle("update", ({ path, payload }) =>
        Effect.gen(function*() {
          const app = yield* ownApp(path.id)
          const updated = yield* apps.updateApp(app.id, {
            name: payload.name,
            redirectUris: payload.redirect_uris,
            dailyCapPerUser: payload.daily_cap_per_user
          })
          yield* directory.invalidate(app.id)
          return appView(Option.getOrThrow(updated))
        }))
      .handle("createMeter", ({ path, payload }) =>
        Effect.gen(function*() {
          const app = yield* ownApp(path.id)
          const meter = yield* apps.insertMeter({
            id: `mtr_${randomBase62(20)}`,
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
      .handle("listMeters", ({ path }) =>
        Effect.gen(function*() {
          const app = yield* ownApp(path.id)
          return { data: (yield* apps.listMeters(app.id)).map(meterView) }
        }))
      .handle("updateMeter", ({ path, payload }) =>
        Effect.gen(function*() {
          const app = yield* ownApp(path.id)
          const meter = yield* apps.updateMeter(app.id, path.meterId, {
            creditsPerUse: payload.credits_per_use,
            disabled: payload.disabled
          })
          yield* directory.invalidate(app.id)
          if (Option.isNone(meter)) return yield* new NotFound({ message: `No meter ${path.meterId}.` })
          return meterView(meter.value)
        }))
  })).pipe(Layer.provide([AppsRepo.Default, AppDirectory.Default, AuthenticationLive]))

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
