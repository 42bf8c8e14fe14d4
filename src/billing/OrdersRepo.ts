import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import { Effect, Schema } from "effect"
import type { Micros } from "../platform/Money.js"
import { UserId } from "../platform/Ids.js"
import { OrderId } from "./Domain.js"

const OrderRow = Schema.Struct({ userId: UserId, amount: Schema.BigInt, status: Schema.String })

/** Top-up orders (`POST /api/payment/createOrder`) and their payment by the provider's callback. */
export class PaymentOrdersRepo extends Effect.Service<PaymentOrdersRepo>()("atrium/billing/PaymentOrdersRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const insert = SqlSchema.single({
      Request: Schema.Struct({ id: OrderId, userId: UserId, amount: Schema.BigInt }),
      Result: Schema.Struct({ createdAt: Schema.DateFromSelf }),
      execute: (order) =>
        sql`
          INSERT INTO payment_orders (id, user_id, amount, status)
          VALUES (${order.id}, ${order.userId}, ${order.amount}, 'pending') RETURNING created_at`
    })

    const find = SqlSchema.findOne({
      Request: OrderId,
      Result: OrderRow,
      execute: (id) => sql`SELECT user_id, amount::text, status FROM payment_orders WHERE id = ${id}`
    })

    const markPaid = SqlSchema.void({
      Request: Schema.Struct({ id: OrderId, provider: Schema.String }),
      execute: ({ id, provider }) =>
        sql`
          UPDATE payment_orders SET status = 'paid', provider = ${provider}, paid_at = now()
          WHERE id = ${id} AND status = 'pending'`
    })

    return {
      /** A pending order; answers when it was created. */
      insert: (id: OrderId, userId: UserId, amount: Micros) =>
        Effect.orDie(Effect.map(insert({ id, userId, amount }), (row) => row.createdAt)),
      find: (id: OrderId) => Effect.orDie(find(id)),
      markPaid: (id: OrderId, provider: string) => Effect.orDie(markPaid({ id, provider }))
    } as const
  })
}) {}
