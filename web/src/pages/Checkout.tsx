import { useEffect, useState } from "react"
import { OrderId } from "../../../src/billing/Domain.js"
import { call } from "../api.js"
import { Link, useLocation } from "../router.js"
import { formatCredits, useMe } from "../session.js"

interface OrderStatus {
  readonly id: string
  readonly amount: number
  readonly status: "pending" | "paid"
  readonly provider: "test" | "none"
}

/**
 * The test payment provider's checkout (`/checkout?order=…`, `PAYMENTS_PROVIDER=test`, never in production): the
 * place a real provider's hosted page would be (docs/payments.md). Completing settles the order the way a provider's
 * signed callback does, so the wallet is credited by the same code; declining leaves the order unpaid.
 */
export const CheckoutPage = () => {
  const me = useMe()
  const { search } = useLocation()
  // Unchecked: a mistyped link answers 404 like an unknown order.
  const id = OrderId.unchecked.make(search.get("order") ?? "")
  const [order, setOrder] = useState<OrderStatus | null>(null)
  const [outcome, setOutcome] = useState<"paid" | "declined" | null>(null)
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<string | null>(null)

  useEffect(() => {
    if (!id) return setError("This page needs an order: start a top-up in your wallet.")
    call((c) => c.wallet.order({ path: { id } })).then(setOrder, (e: Error) => setError(e.message))
  }, [id])

  const decide = async (decision: "complete" | "decline") => {
    setBusy(true)
    setError(null)
    try {
      const settled = await call((c) => c.wallet.testCheckout({ path: { id }, payload: { decision } }))
      setOrder(settled)
      setOutcome(decision === "complete" ? "paid" : "declined")
      void me.refresh()
    } catch (failure) {
      setError((failure as Error).message)
    } finally {
      setBusy(false)
    }
  }

  return (
    <section className="stack checkout">
      <h1>Checkout</h1>
      {error && <p role="alert" className="error">{error}</p>}
      {order === null && !error && <p role="status">Loading…</p>}
      {order !== null && (
        <div className="card stack">
          <p className="notice">
            <strong>Test payment provider.</strong> No money moves: this page stands in for a real payment provider in
            development. Completing adds the credits; declining adds nothing.
          </p>
          <p className="big" data-testid="checkout-amount">{formatCredits(order.amount)}</p>
          {order.status === "paid"
            ? <p role="status">Paid. {formatCredits(order.amount)} were added to your wallet.</p>
            : order.provider !== "test"
            ? <p>This order is paid with the platform's payment provider: the credits arrive once it confirms the payment.</p>
            : (
              <>
                {outcome === "declined" && <p role="alert">The payment was declined. Nothing was charged; you can try again.</p>}
                <div className="row">
                  <button type="button" disabled={busy} onClick={() => void decide("complete")}>Pay {formatCredits(order.amount)}</button>
                  <button type="button" className="secondary" disabled={busy} onClick={() => void decide("decline")}>Decline</button>
                </div>
              </>
            )}
          <p><Link to="/wallet">Back to the wallet</Link></p>
        </div>
      )}
    </section>
  )
}
