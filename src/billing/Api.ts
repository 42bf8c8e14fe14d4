import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { ApiKeyAuthentication, AppAuthentication, UserAuthentication } from "../identity/Domain.js"
import { InvalidRequest, NotFound, Unauthorized, WireError } from "../platform/Errors.js"
import { CreditAmount, CreditPrice } from "../platform/Money.js"
import { DailyCapExceeded, IdempotencyConflict, InsufficientCredits, MeterId, OrderId } from "./Domain.js"
import { ListParams } from "../platform/http/Lists.js"
import { AppId, UserId } from "../platform/Ids.js"

/** One metering unit of the platform: model usage per 1k tokens (later also per-use prices). */
export const PlatformMeter = Schema.Struct({
  id: Schema.String,
  kind: Schema.Literal("model_usage"),
  model: Schema.String,
  unit: Schema.Literal("1k_tokens"),
  input_credits: Schema.Number,
  output_credits: Schema.Number
})

/** Spec 4.6: the only unauthenticated /v1 endpoint. */
export class MetersApi extends HttpApiGroup.make("meters")
  .add(
    HttpApiEndpoint.get("list", "/v1/meters")
      .setUrlParams(ListParams)
      .addError(NotFound)
      .addSuccess(Schema.Struct({ data: Schema.Array(PlatformMeter), has_more: Schema.Boolean }))
      .annotate(OpenApi.Description, "Metering units and rates: what a run costs in credits.")
  )
  .annotate(OpenApi.Title, "Meters")
  .annotate(OpenApi.Description, "Metering units and rates: what a run costs in credits.")
{}

export class UnknownEvent extends WireError<UnknownEvent>()(
  "UnknownEvent",
  { message: Schema.String },
  { status: 400 }
) {}

export class MeterDisabled extends WireError<MeterDisabled>()(
  "MeterDisabled",
  { message: Schema.String },
  { status: 400 }
) {}

export class InsufficientScope extends WireError<InsufficientScope>()(
  "InsufficientScope",
  { message: Schema.String },
  { status: 403 }
) {}

/**
 * Text the database stores as given. PostgreSQL text cannot hold NUL, and a lone UTF-16 surrogate is sent to it as
 * U+FFFD, so two different idempotency keys ("x\ud800", "x\udfff") would become one stored key. Both are bad input
 * here (a 400) rather than a failure at the database (a 500).
 */
const NoNul = Schema.String.pipe(
  Schema.filter((text) =>
    text.includes("\u0000")
      ? "must not contain NUL characters"
      : /[\uD800-\uDFFF]/u.test(text)
      ? "must be valid Unicode (no lone surrogates)"
      : true
  )
)

const IdempotencyKey = NoNul.pipe(
  Schema.minLength(1, { message: () => "idempotency_key must not be empty" }),
  Schema.maxLength(128, { message: () => "idempotency_key must be at most 128 characters" })
)

/** Spec 2.2 / 2.3. */
export const BillingEvent = Schema.Struct({
  event: NoNul.pipe(
    Schema.minLength(1, { message: () => "event must not be empty" }),
    Schema.maxLength(100, { message: () => "event must be at most 100 characters" })
  ),
  idempotency_key: IdempotencyKey,
  // A refused key schema would drop the entry silently; every key is checked instead, so a bad one is a 400.
  metadata: Schema.optional(
    Schema.Record({ key: Schema.String, value: NoNul }).pipe(
      Schema.filter((metadata) =>
        Object.keys(metadata).every((key) => Schema.is(NoNul)(key)) ||
        "metadata keys must be valid Unicode without NUL characters"
      )
    )
  )
})

export const ChargeResult = Schema.Struct({
  charged: Schema.Number,
  balance_remaining: Schema.Number,
  idempotent_replay: Schema.optional(Schema.Literal(true))
})

const ChargeErrors = [InsufficientCredits, DailyCapExceeded, IdempotencyConflict] as const

/** Spec 4.1: third-party apps bill their users per event. */
export class EventsApi extends HttpApiGroup.make("events")
  .add(
    HttpApiEndpoint.post("report", "/v1/events")
      .setPayload(BillingEvent)
      .addSuccess(ChargeResult)
      .addError(UnknownEvent)
      .addError(MeterDisabled)
      .addError(InsufficientScope)
      .addError(InsufficientCredits)
      .addError(DailyCapExceeded)
      .addError(IdempotencyConflict)
      .annotate(OpenApi.Description, "Charge the authorized user the price of the app's meter for `event`, once per idempotency key.")
  )
  .middleware(AppAuthentication)
  .addError(InvalidRequest)
  .annotate(OpenApi.Title, "Billing events")
  .annotate(OpenApi.Description, "Charge a user's wallet per metered event (`POST /v1/events`), idempotent by key.")
{}

/** Spec 4.8: credit endpoints for API-key callers, on their own wallet. */
export class CreditsApi extends HttpApiGroup.make("credits")
  .add(HttpApiEndpoint.get("balance", "/openapi/credit/balance").addSuccess(Schema.Struct({ balance: Schema.Number })))
  .add(
    HttpApiEndpoint.post("preCheck", "/openapi/credit/preCheck")
      .setPayload(Schema.Struct({ amount: CreditAmount }))
      .addSuccess(Schema.Struct({ sufficient: Schema.Boolean, balance: Schema.Number }))
      // Sufficient when a consume of `amount` would be taken now: within balance - held (docs/billing.md, "Holds").
      .annotate(OpenApi.Description, "Whether a consume of `amount` would be taken now: within the balance less what runs in progress hold.")
  )
  .add(
    HttpApiEndpoint.post("consume", "/openapi/credit/consume")
      .setPayload(Schema.Struct({
        amount: CreditAmount,
        idempotency_key: IdempotencyKey,
        description: Schema.optional(NoNul.pipe(Schema.maxLength(500)))
      }))
      .addSuccess(ChargeResult)
      .addError(ChargeErrors[0])
      .addError(ChargeErrors[2])
  )
  .middleware(ApiKeyAuthentication)
  .addError(InvalidRequest)
  .annotate(OpenApi.Title, "Credits")
  .annotate(OpenApi.Description, "Third-party apps check and consume a user's credits with the user's OAuth token.")
{}

export const LedgerLine = Schema.Struct({
  seq: Schema.Number,
  amount: Schema.Number,
  kind: Schema.String,
  app: Schema.NullOr(Schema.String),
  event: Schema.NullOr(Schema.String),
  metadata: Schema.NullOr(Schema.Record({ key: Schema.String, value: Schema.String })),
  description: Schema.NullOr(Schema.String),
  balance_after: Schema.Number,
  created_at: Schema.String
})

export const Order = Schema.Struct({
  id: Schema.String,
  amount: Schema.Number,
  status: Schema.Literal("pending", "paid"),
  created_at: Schema.String,
  /** Where the person pays it: the test provider's checkout page, or null while a real provider's callback is awaited. */
  pay_url: Schema.NullOr(Schema.String)
})

/** An order as its owner's checkout page reads it, with the provider that takes it (`PAYMENTS_PROVIDER`). */
export const OrderStatus = Schema.Struct({
  id: Schema.String,
  amount: Schema.Number,
  status: Schema.Literal("pending", "paid"),
  provider: Schema.Literal("test", "none")
})

/** The logged-in user's wallet and top-ups. */
export class WalletApi extends HttpApiGroup.make("wallet")
  .add(
    HttpApiEndpoint.get("wallet", "/api/wallet")
      .addSuccess(Schema.Struct({
        balance: Schema.Number,
        /** Credits reserved by runs and turns in progress (docs/billing.md, "Holds"): available = balance - held. */
        held: Schema.Number,
        /** What a new charge or hold may take now: balance - held. */
        available: Schema.Number,
        today_spent: Schema.Number
      }))
  )
  .add(
    HttpApiEndpoint.get("ledger", "/api/wallet/ledger")
      .setUrlParams(Schema.Struct({
        limit: Schema.optional(Schema.NumberFromString.pipe(Schema.int(), Schema.between(1, 200))),
        before: Schema.optional(Schema.NumberFromString.pipe(Schema.int(), Schema.positive()))
      }))
      .addSuccess(Schema.Struct({
        data: Schema.Array(LedgerLine),
        has_more: Schema.Boolean,
        next_before: Schema.NullOr(Schema.Number)
      }))
  )
  .add(
    HttpApiEndpoint.post("createOrder", "/api/payment/orders")
      .setPayload(Schema.Struct({ amount: CreditAmount }))
      .addSuccess(Order, { status: 201 })
  )
  .add(
    HttpApiEndpoint.get("order", "/api/payment/orders/:id")
      .setPath(Schema.Struct({ id: OrderId.unchecked }))
      .addSuccess(OrderStatus)
      .addError(NotFound)
      .annotate(OpenApi.Description, "One of the person's orders: its amount, whether it is paid, and the provider that takes it.")
  )
  .add(
    HttpApiEndpoint.post("testCheckout", "/api/payment/orders/:id/test-checkout")
      .setPath(Schema.Struct({ id: OrderId.unchecked }))
      .setPayload(Schema.Struct({ decision: Schema.Literal("complete", "decline") }))
      .addSuccess(OrderStatus)
      .addError(NotFound)
      .annotate(
        OpenApi.Description,
        "The test payment provider (PAYMENTS_PROVIDER=test, never in production): complete or decline the order, settled as a provider's callback would settle it. 404 when the test provider is off."
      )
  )
  .middleware(UserAuthentication)
  .addError(InvalidRequest)
  .annotate(OpenApi.Title, "Wallet")
  .annotate(OpenApi.Description, "A user's balance and ledger.")
{}

/** The payment provider's callback (no login: the signature is the authentication). */
export class PaymentNotifyApi extends HttpApiGroup.make("paymentNotify")
  .add(
    HttpApiEndpoint.post("notify", "/api/payment/notify/:provider")
      .setPath(Schema.Struct({ provider: Schema.String }))
      .addSuccess(Schema.Struct({ received: Schema.Literal(true), order_id: Schema.String, status: Schema.String }))
      .addError(Unauthorized)
      .addError(NotFound)
      .addError(InvalidRequest)
      .annotate(
        OpenApi.Description,
        "Body `{\"order_id\",\"status\":\"paid\",\"amount\"}`, signed: header `X-Signature: sha256=<hex HMAC-SHA256 of the raw body>`."
      )
  )
  .annotate(OpenApi.Title, "Payments")
  .annotate(OpenApi.Description, "Top-ups and the payment provider's signed callbacks.")
{}

const AppView = Schema.Struct({
  id: AppId,
  name: Schema.String,
  client_id: Schema.String,
  redirect_uris: Schema.Array(Schema.String),
  daily_cap_per_user: Schema.NullOr(Schema.Number),
  created_at: Schema.String
})

const RedirectUri = Schema.String.pipe(
  Schema.filter((uri) => {
    try {
      const url = new URL(uri)
      // `url.hash` is "" for a bare trailing "#", which is still a fragment (RFC 6749 3.1.2): look at the text.
      return (url.protocol === "https:" || url.protocol === "http:") && !uri.includes("#")
        ? undefined
        : "redirect_uris must be absolute http(s) URLs without a fragment"
    } catch {
      return "redirect_uris must be absolute http(s) URLs without a fragment"
    }
  })
)

export const MeterView = Schema.Struct({
  id: Schema.String,
  event_name: Schema.String,
  credits_per_use: Schema.Number,
  type: Schema.Literal("PER_USE"),
  disabled: Schema.Boolean
})

/** Apps a user registers for OAuth, and their meters (spec 2.6). Owner only; others get 404. */
export class AppsApi extends HttpApiGroup.make("apps")
  .add(
    HttpApiEndpoint.post("create", "/api/apps")
      .setPayload(Schema.Struct({
        name: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100)),
        redirect_uris: Schema.Array(RedirectUri).pipe(Schema.minItems(1), Schema.maxItems(10))
      }))
      .addSuccess(Schema.Struct({ ...AppView.fields, client_secret: Schema.String }), { status: 201 })
  )
  .add(
    HttpApiEndpoint.get("list", "/api/apps")
      .setUrlParams(ListParams)
      .addSuccess(Schema.Struct({ data: Schema.Array(AppView), has_more: Schema.Boolean }))
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.patch("update", "/api/apps/:id")
      .setPath(Schema.Struct({ id: AppId.unchecked }))
      .setPayload(Schema.Struct({
        name: Schema.optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100))),
        redirect_uris: Schema.optional(Schema.Array(RedirectUri).pipe(Schema.minItems(1), Schema.maxItems(10))),
        daily_cap_per_user: Schema.optional(Schema.NullOr(CreditPrice))
      }))
      .addSuccess(AppView)
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.post("createMeter", "/api/apps/:id/meters")
      .setPath(Schema.Struct({ id: AppId.unchecked }))
      .setPayload(Schema.Struct({
        event_name: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100)),
        credits_per_use: CreditPrice
      }))
      .addSuccess(MeterView, { status: 201 })
      .addError(NotFound)
      .addError(IdempotencyConflict)
  )
  .add(
    HttpApiEndpoint.get("listMeters", "/api/apps/:id/meters")
      .setPath(Schema.Struct({ id: AppId.unchecked }))
      .setUrlParams(ListParams)
      .addSuccess(Schema.Struct({ data: Schema.Array(MeterView), has_more: Schema.Boolean }))
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.patch("updateMeter", "/api/apps/:id/meters/:meterId")
      .setPath(Schema.Struct({ id: AppId.unchecked, meterId: MeterId.unchecked }))
      .setPayload(Schema.Struct({
        credits_per_use: Schema.optional(CreditPrice),
        disabled: Schema.optional(Schema.Boolean)
      }))
      .addSuccess(MeterView)
      .addError(NotFound)
  )
  .middleware(UserAuthentication)
  .addError(InvalidRequest)
  .annotate(OpenApi.Title, "Apps and meters")
  .annotate(OpenApi.Description, "Third-party apps: OAuth clients, redirect URIs, the meters they bill by.")
{}

/** Private-network operations (the global middleware refuses other callers). */
export class InternalBillingApi extends HttpApiGroup.make("internalBilling")
  .add(
    HttpApiEndpoint.post("grant", "/internal/wallets/:userId/grants")
      .setPath(Schema.Struct({ userId: NoNul.pipe(Schema.compose(UserId.unchecked)) }))
      .setPayload(Schema.Struct({
        amount: CreditAmount,
        idempotency_key: IdempotencyKey,
        reason: NoNul.pipe(Schema.minLength(1), Schema.maxLength(500))
      }))
      .addSuccess(Schema.Struct({ balance: Schema.Number, idempotent_replay: Schema.optional(Schema.Literal(true)) }))
      .addError(NotFound)
      .addError(IdempotencyConflict)
  )
  .addError(InvalidRequest)
  .annotate(OpenApi.Title, "Internal")
  .annotate(OpenApi.Description, "Operator billing actions; private network only.")
{}
