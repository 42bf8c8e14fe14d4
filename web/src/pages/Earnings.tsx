import { useEffect, useState } from "react"
import { call, itemsOf } from "../api.js"
import { formatCredits } from "../session.js"
import { LedgerTable, type Line } from "./Wallet.js"

interface Earnings { total: number; agents: ReadonlyArray<{ identifier: string; unlocks: number; gross: number; net: number }> }

/** Cumulative earnings over time, from the ledger's earning entries: a line chart in SVG. */
const OverTime = ({ lines }: { lines: ReadonlyArray<Line> }) => {
  const points = [...lines].reverse().reduce<Array<{ t: number; total: number }>>((acc, line) => {
    acc.push({ t: new Date(line.created_at).getTime(), total: (acc.at(-1)?.total ?? 0) + line.amount })
    return acc
  }, [])
  if (points.length === 0) return <p>No earnings yet: they appear here when someone unlocks one of your experts.</p>
  const w = 600
  const h = 160
  const max = Math.max(...points.map((p) => p.total), 1)
  const t0 = points[0]!.t
  const span = Math.max(points.at(-1)!.t - t0, 1)
  const xy = points.map((p, i) => [
    points.length === 1 ? w / 2 : 20 + ((p.t - t0) / span) * (w - 40) || 20 + (i / (points.length - 1)) * (w - 40),
    h - 20 - (p.total / max) * (h - 40)
  ] as const)
  return (
    <figure className="chart">
      <svg viewBox={`0 0 ${w} ${h}`} role="img" aria-label={`Earnings over time, ${points.length} entries, ${formatCredits(points.at(-1)!.total)} in all`}>
        <line x1="20" y1={h - 20} x2={w - 20} y2={h - 20} className="axis" />
        <polyline points={xy.map(([x, y]) => `${x},${y}`).join(" ")} className="series" fill="none" />
        {xy.map(([x, y], i) => <circle key={i} cx={x} cy={y} r="4" className="dot" />)}
      </svg>
      <figcaption>Cumulative earnings over time</figcaption>
    </figure>
  )
}

const PerExpert = ({ earnings }: { earnings: Earnings }) => {
  const max = Math.max(...earnings.agents.map((a) => a.net), 1)
  return (
    <figure className="chart">
      <div className="bars" role="img" aria-label="Net earnings per expert">
        {earnings.agents.map((a) => (
          <div key={a.identifier} className="bar-row">
            <span className="bar-label">{a.identifier}</span>
            <span className="bar" style={{ width: `${Math.max(2, (a.net / max) * 100)}%` }} />
            <span className="bar-value">{a.net}</span>
          </div>
        ))}
      </div>
      <figcaption>Net earnings per expert</figcaption>
    </figure>
  )
}

export const EarningsPage = () => {
  const [earnings, setEarnings] = useState<Earnings | null>(null)
  const [lines, setLines] = useState<ReadonlyArray<Line>>([])
  const [error, setError] = useState<string | null>(null)
  useEffect(() => {
    call((c) => c.creators.earnings()).then((e) => setEarnings(e as Earnings), (e: Error) => setError(e.message))
    call((c) => c.wallet.ledger({ urlParams: { limit: 200 } })).then(
      (page) => setLines(itemsOf<Line>(page).filter((line) => line.kind === "earning")),
      (e: Error) => setError(e.message)
    )
  }, [])
  return (
    <section className="stack">
      <h1>Earnings</h1>
      {error && <p role="alert" className="error">{error}</p>}
      <div className="card">
        <p className="big" data-testid="earnings-total">{formatCredits(earnings?.total)}</p>
        <p className="muted">Your share of what buyers paid to unlock your experts.</p>
      </div>
      {earnings && earnings.agents.length > 0 && (
        <>
          <PerExpert earnings={earnings} />
          <div className="table-wrap">
            <table className="cards" role="table">
              <caption>Per expert</caption>
              <thead role="rowgroup"><tr role="row"><th role="columnheader" scope="col">Expert</th><th role="columnheader" scope="col" className="num">Unlocks</th><th role="columnheader" scope="col" className="num">Paid by buyers</th><th role="columnheader" scope="col" className="num">Your share</th></tr></thead>
              <tbody role="rowgroup">
                {earnings.agents.map((a) => (
                  <tr role="row" key={a.identifier}><td role="cell" data-label="Expert">{a.identifier}</td><td role="cell" className="num" data-label="Unlocks">{a.unlocks}</td><td role="cell" className="num" data-label="Paid by buyers">{a.gross}</td><td role="cell" className="num" data-label="Your share">{a.net}</td></tr>
                ))}
              </tbody>
            </table>
          </div>
        </>
      )}
      <OverTime lines={lines} />
      {lines.length > 0 && <LedgerTable lines={lines} caption="Earning entries in your ledger" />}
    </section>
  )
}
