import { Effect, Option, Redacted, Schema } from "effect"
import * as Crypto from "node:crypto"
import { InvalidRequest, NotFound, Unauthorized } from "../platform/Errors.js"
import type { UserId } from "../platform/Ids.js"
import { OrderId } from "./Domain.js"
import { type Micros, parseCredits, toNumber } from "../platform/Money.js"
import { BillingConfig } from "./Config.js"
import { PaymentOrdersRepo } from "./OrdersRepo.js"
import { Wallets } from "./Wallets.js"
import { isOrderOf } from "./Policy.js"

/** What a provider's callback says: the order, whether it is paid, and optionally the amount it saw. */
const Notification = Schema.Struct({
  order_id: OrderId.unchecked,
  status: Schema.optional(Schema.Unknown),
  amount: Schema.optional(Schema.Unknown)
})

const decodeJson = Schema.decodeUnknown(Schema.parseJson())
const decodeNotification = Schema.decodeUnknown(Notification)

/**
 * Top-ups (spec 2.5): an order, then the provider's callback. The HMAC-SHA256 of the raw body under
 * `PAYMENT_WEBHOOK_SECRET` is the only proof that the provider sent it; the order's top-up goes through the wallet
 * with the order id as its key, so however often the callback repeats, the order credits the wallet once.
 */
export class Payments extends Effect.Service<Payments>()("atrium/billing/Payments", {
  effect: Effect.gen(function*() {
    const config = yield* BillingConfig
    const orders = yield* PaymentOrdersRepo
    const wallets = yield* Wallets
    const refused = new Unauthorized({ message: "The payment notification's signature does not verify." })

    const createOrder = Effect.fn("Payments.createOrder")(function*(userId: UserId, amount: Micros) {
      const id = OrderId.random()
      const createdAt = yield* orders.insert(id, userId, amount)
      return { id, amount: toNumber(amount), status: "pending" as const, created_at: createdAt.toISOString(), pay_url: payUrl(id) }
    })

    /** `signature`: the `X-Signature` header, hex, with or without its `sha256=` prefix. */
    const notify = Effect.fn("Payments.notify")(function*(provider: string, raw: string, signature: string) {
      const secret = yield* Option.match(config.paymentWebhookSecret, {
        onNone: () => refused,
        onSome: (secret) => Effect.succeed(Redacted.value(secret))
      })
      const given = Buffer.from(signature.replace(/^sha256=/, ""))
      const expected = Buffer.from(Crypto.createHmac("sha256", secret).update(raw).digest("hex"))
      // Lengths in bytes: a header of as many characters but wider ones would make timingSafeEqual throw.
      if (given.length !== expected.length || !Crypto.timingSafeEqual(given, expected)) return yield* refused
      const json = yield* decodeJson(raw).pipe(
        Effect.mapError(() => new InvalidRequest({ message: "The notification body is not JSON." }))
      )
      const body = yield* decodeNotification(json).pipe(
        Effect.mapError(() => new InvalidRequest({ message: "order_id: is missing" }))
      )
      return yield* settle(provider, body)
    })

    /**
     * What a verified notification does: a paid one credits its order once; any other status leaves the order
     * pending (a declined card can be tried again). Both doors lead here: a provider's signed callback, and the test
     * provider's checkout page.
     */
    const settle = Effect.fn("Payments.settle")(function*(provider: string, body: typeof Notification.Type) {
      // No order id holds NUL or a lone surrogate (and PostgreSQL would refuse or alter such text).
      if (/[\u0000\uD800-\uDFFF]/u.test(body.order_id)) return yield* new NotFound({ message: "No such order." })
      const order = yield* orders.find(body.order_id)
      if (Option.isNone(order)) return yield* new NotFound({ message: `No order ${body.order_id}.` })
      if (body.status !== "paid") return { received: true as const, order_id: body.order_id, status: order.value.status }
      const amount = order.value.amount
      if (body.amount !== undefined) {
        // Compared as exact decimals, read like every amount of a request: 15, "15" and "15.0" are one amount.
        const stated = typeof body.amount === "number" || typeof body.amount === "string"
          ? parseCredits(String(body.amount).trim())
          : undefined
        if (stated !== amount) return yield* new InvalidRequest({ message: "amount does not match the order." })
      }
      yield* wallets.credit(order.value.userId, amount, {
        kind: "topup",
        scope: "order",
        key: body.order_id,
        description: `Top-up via ${provider}`
      }).pipe(Effect.orDie)
      yield* orders.markPaid(body.order_id, provider)
      return { received: true as const, order_id: body.order_id, status: "paid" }
    })

    /** The order, if it is this person's (someone else's is "no such order", as if it did not exist). */
    const orderOf = Effect.fn("Payments.orderOf")(function*(userId: UserId, id: OrderId) {
      const order = /[\u0000\uD800-\uDFFF]/u.test(id) ? Option.none() : yield* orders.find(id)
      if (Option.isNone(order) || !isOrderOf(userId, order.value)) return yield* new NotFound({ message: "No such order." })
      return { id, amount: toNumber(order.value.amount), status: order.value.status as "pending" | "paid", provider: config.paymentsProvider }
    })

    /**
     * The test provider's checkout (`PAYMENTS_PROVIDER=test`): the person completes or declines their order, and it
     * is settled exactly as a provider's signed callback would settle it. Off, there is no such provider (404).
     */
    const testCheckout = Effect.fn("Payments.testCheckout")(function*(userId: UserId, id: OrderId, decision: "complete" | "decline") {
      if (config.paymentsProvider !== "test") return yield* new NotFound({ message: "The test payment provider is off." })
      yield* orderOf(userId, id)
      yield* settle("test", { order_id: id, status: decision === "complete" ? "paid" : "declined" })
      return yield* orderOf(userId, id)
    })

    /** Where the person pays an order: the test provider's page, or nowhere yet (a real provider's callback). */
    const payUrl = (id: OrderId) => config.paymentsProvider === "test" ? `/checkout?order=${encodeURIComponent(id)}` : null

    return { createOrder, notify, orderOf, testCheckout, payUrl } as const
  }),
  dependencies: [BillingConfig.Default, PaymentOrdersRepo.Default]
}) {}
