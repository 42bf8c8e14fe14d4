import { useEffect, useState, type FormEvent } from "react"
import { call, itemsOf } from "../api.js"
import { parseCredits } from "../../../src/platform/Money.js"
import { navigate } from "../router.js"
import { formatCredits } from "../session.js"

export interface Line {
  seq: number
  amount: number
  kind: string
  description: string | null
  balance_after: number
  created_at: string
  metadata: Record<string, string> | null
}

export const LedgerTable = ({ lines, caption }: { lines: ReadonlyArray<Line>; caption: string }) => (
  <div className="table-wrap">
    <table className="cards" role="table">
      <caption>{caption}</caption>
      <thead role="rowgroup"><tr role="row"><th role="columnheader" scope="col">When</th><th role="columnheader" scope="col">What</th><th role="columnheader" scope="col" className="num">Amount</th><th role="columnheader" scope="col" className="num">Balance after</th></tr></thead>
      <tbody role="rowgroup">
        {lines.map((line) => (
          <tr role="row" key={line.seq}>
            <td role="cell" data-label="When">{new Date(line.created_at).toLocaleString()}</td>
            <td role="cell" data-label="What">{line.description ?? line.kind}{line.metadata?.agent ? ` (${line.metadata.agent})` : ""}</td>
            <td role="cell" className={`num ${line.amount < 0 ? "neg" : "pos"}`} data-label="Amount">{line.amount > 0 ? "+" : ""}{line.amount}</td>
            <td role="cell" className="num" data-label="Balance after">{line.balance_after}</td>
          </tr>
        ))}
      </tbody>
    </table>
  </div>
)

export const WalletPage = () => {
  const [wallet, setWallet] = useState<{ balance: number; held: number; available: number; today_spent: number } | null>(null)
  const [lines, setLines] = useState<ReadonlyArray<Line>>([])
  const [before, setBefore] = useState<number | null>(null)
  const [amount, setAmount] = useState("100")
  const [error, setError] = useState<string | null>(null)
  const [status, setStatus] = useState<string | null>(null)

  const loadMore = (from?: number) =>
    call((c) => c.wallet.ledger({ urlParams: { limit: 50, ...(from ? { before: from } : {}) } })).then((page) => {
      setLines((old) => from ? [...old, ...itemsOf<Line>(page)] : itemsOf<Line>(page))
      setBefore(page.has_more ? page.next_before : null)
    }, (e: Error) => setError(e.message))

  useEffect(() => {
    call((c) => c.wallet.wallet()).then(setWallet, (e: Error) => setError(e.message))
    void loadMore()
  }, [])

  const topUp = async (e: FormEvent) => {
    e.preventDefault()
    setError(null)
    setStatus(null)
    // The API takes exact micro-credits (a bigint on the client's side of the schema): parsed here, said in words.
    const micros = parseCredits(amount.trim())
    if (micros === undefined && /^\d{13,}(\.\d+)?$/.test(amount.trim())) {
      setError("Amount is too large: top up at most 999,999,999,999 credits at a time.")
      return
    }
    if (micros === undefined || micros === 0n) {
      setError("Amount is not valid. Write a positive number of credits, with at most 6 decimal places, for example 100 or 12.5.")
      return
    }
    try {
      const order = await call((c) => c.wallet.createOrder({ payload: { amount: micros } }))
      setStatus(order.pay_url
        ? "Order created: continue to payment."
        : `Order ${order.id} for ${formatCredits(order.amount)} created. The credits arrive in your wallet as soon as the payment is confirmed.`)
      // The provider's page (the test provider's checkout in development).
      if (order.pay_url) navigate(order.pay_url)
    } catch (failure) {
      setError((failure as Error).message)
    }
  }

  return (
    <section className="stack">
      <h1>Wallet</h1>
      <div className="card">
        <p className="big" data-testid="wallet-balance">{formatCredits(wallet?.balance)}</p>
        {/* Credits runs and turns in progress hold: posted (what they used) or released when they end. */}
        {wallet && wallet.held > 0
          ? <p className="muted" data-testid="wallet-held">Held by runs in progress: {formatCredits(wallet.held)} (available: {formatCredits(wallet.available)})</p>
          : null}
        <p className="muted">Spent today: {formatCredits(wallet?.today_spent)}</p>
      </div>
      <form onSubmit={topUp} className="toolbar" aria-label="Top up">
        <label>
          Top-up amount (credits)
          <input inputMode="decimal" value={amount} onChange={(e) => setAmount(e.target.value)} />
        </label>
        <button type="submit">Top up</button>
      </form>
      <p role="status" aria-live="polite">{status}</p>
      {error && <p role="alert" className="error">{error}</p>}
      {lines.length === 0 ? <p>No ledger entries yet.</p> : <LedgerTable lines={lines} caption="Ledger" />}
      {before !== null && <button type="button" className="secondary" onClick={() => void loadMore(before)}>Older entries</button>}
    </section>
  )
}
