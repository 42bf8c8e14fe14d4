import { useEffect, useState } from "react"
import { call } from "../api.js"
import { Link, useLocation } from "../router.js"

/** The expert's name, for the headings of its pages (its identifier until it is read, or when it cannot be). */
const useExpertName = (identifier: string) => {
  const [name, setName] = useState(identifier)
  useEffect(() => {
    call((c) => c.agents.get({ path: { identifier } })).then((a) => setName(a.name), () => undefined)
  }, [identifier])
  return name
}

/** The top of an expert's page in the studio: the way back, its heading with the expert's name, and the tabs. */
export const StudioHeader = ({ identifier, title }: { identifier: string; title: string }) => {
  const name = useExpertName(identifier)
  return (
    <>
      <p><Link to="/studio">← Studio</Link></p>
      <h1>{title} · {name}</h1>
      <StudioTabs identifier={identifier} />
    </>
  )
}

/** The expert's pages in the studio: its editor, what it does without anyone watching (issue 43 item 5), its traces. */
export const StudioTabs = ({ identifier }: { identifier: string }) => {
  const { path } = useLocation()
  const base = `/studio/${encodeURIComponent(identifier)}`
  const tabs: ReadonlyArray<readonly [string, string]> = [
    [base, "Editor"],
    [`${base}/runs`, "Runs"],
    [`${base}/traces`, "Traces"],
    [`${base}/evals`, "Evals"],
    [`${base}/schedules`, "Schedules"],
    [`${base}/webhooks`, "Webhooks"]
  ]
  return (
    <nav aria-label="Expert pages" className="tabs">
      <ul>
        {tabs.map(([to, label]) => (
          <li key={to}>
            <Link to={to} aria-current={path.replace(/\/+$/, "") === to ? "page" : undefined}>{label}</Link>
          </li>
        ))}
      </ul>
    </nav>
  )
}

/** A date and time in the reader's locale. */
export const when = (iso: string | null | undefined) => iso ? new Date(iso).toLocaleString() : "—"

const numbers = () => new Intl.NumberFormat(undefined, { maximumFractionDigits: 6 })

/** Credits in the reader's locale, as many decimals as the ledger keeps. */
export const credits = (n: number | string | null | undefined) =>
  n === null || n === undefined || n === "" ? "—" : `${numbers().format(Number(n))} credits`

/** A duration in words: "850 ms", "4.2 seconds", "3 minutes 5 seconds", "2 hours 10 minutes". */
export const duration = (ms: number) => {
  if (!Number.isFinite(ms) || ms < 0) return "—"
  const n = new Intl.NumberFormat(undefined, { maximumFractionDigits: 1 })
  if (ms < 1000) return `${Math.round(ms)} ms`
  if (ms < 60_000) return `${n.format(ms / 1000)} seconds`
  const minutes = Math.floor(ms / 60_000)
  if (minutes < 60) return `${minutes} minute${minutes === 1 ? "" : "s"} ${Math.floor((ms % 60_000) / 1000)} seconds`
  const hours = Math.floor(minutes / 60)
  return `${hours} hour${hours === 1 ? "" : "s"} ${minutes % 60} minutes`
}
