import { useEffect, useState } from "react"
import { call } from "../api.js"
import { useMe } from "../session.js"
import { SubmissionId } from "../../../src/agents/Domain.js"
import { UserId } from "../../../src/platform/Ids.js"

/**
 * The review console (issue 27 item 4), for the operators named by `ADMIN_PHONES`: what waits for review, the
 * submitted version against the published one, and a decision with a reason. For anyone else the API answers 404
 * and this page says there is nothing here, like any unknown page.
 */

interface QueueItem {
  id: string
  agent: string
  name: string
  version: number
  owner_id: string
  published_version: number | null
  submitted_at: string
}
interface Application {
  user_id: string
  display_name: string | null
  bio: string | null
  account_type: string | null
  email: string | null
  applied_at: string | null
}
interface GateSide { eval_run: string; pass_rate: number; rows_total: number; rows_passed: number; credits: string; finished_at: string | null }
interface Scorecard {
  dataset: string
  dataset_name: string | null
  threshold: number
  submitted: GateSide | null
  live: GateSide | null
  live_version: number | null
}
interface Detail {
  id: string
  agent: string
  version: number
  published_version: number | null
  submitted: Record<string, unknown> | null
  published: Record<string, unknown> | null
  eval_gate: Scorecard | null
}

const percent = (n: number) => `${new Intl.NumberFormat(undefined, { maximumFractionDigits: 1 }).format(n * 100)}%`

/**
 * The eval gate's scorecard (issue 46, docs/evals.md "Publish gate"): what the creator's gate measured before this
 * version could be submitted, the submitted version's pass rate against the live one's on the gate's dataset.
 */
const GateScorecard = ({ agent, version, card }: { agent: string; version: number; card: Scorecard }) => {
  const side = (label: string, s: GateSide | null) => (
    <tr>
      <th scope="row">{label}</th>
      {s === null
        ? <td colSpan={3}>No finished eval run</td>
        : (
          <>
            <td className="num">{percent(s.pass_rate)}</td>
            <td className="num">{s.rows_passed} of {s.rows_total}</td>
            <td className="num">{s.credits} credits</td>
          </>
        )}
      <td>{s === null ? "—" : <a href={`/studio/${encodeURIComponent(agent)}/evals`} title={s.eval_run}>Eval run {s.eval_run}</a>}</td>
    </tr>
  )
  const drop = card.submitted !== null && card.live !== null ? card.live.pass_rate - card.submitted.pass_rate : null
  return (
    <div className="stack" data-testid="scorecard">
      <h3>Eval gate</h3>
      <p>
        Dataset “{card.dataset_name ?? card.dataset}”; a drop of at most {percent(card.threshold)} from the live version is allowed.
        {drop !== null && (drop > 0 ? ` This version passes ${percent(drop)} fewer rows.` : " This version passes as many rows or more.")}
      </p>
      <div className="table-wrap">
        <table>
          <caption>Pass rates on the gate's dataset</caption>
          <thead>
            <tr><th scope="col">Version</th><th scope="col" className="num">Pass rate</th><th scope="col" className="num">Rows passed</th><th scope="col" className="num">Cost</th><th scope="col">Eval run</th></tr>
          </thead>
          <tbody>
            {side(`Submitted (version ${version})`, card.submitted)}
            {card.live_version !== null ? side(`Live (version ${card.live_version})`, card.live) : null}
          </tbody>
        </table>
      </div>
      <p className="muted small">The eval runs are the creator's; their rows and answers are on the expert's Evals tab in the studio.</p>
    </div>
  )
}

const show = (value: unknown) =>
  value === undefined ? "(none)" : typeof value === "string" ? (value === "" ? "(empty)" : value) : JSON.stringify(value, null, 2)

/** The fields that differ between the published version and the submitted one (all of them for a first version). */
const Diff = ({ detail }: { detail: Detail }) => {
  const after = detail.submitted ?? {}
  const before = detail.published
  const keys = [...new Set([...Object.keys(before ?? {}), ...Object.keys(after)])].sort()
  const changed = keys.filter((k) => before === null || show(before[k]) !== show(after[k]))
  return (
    <div className="stack" data-testid="diff">
      <h3>{before === null ? `Version ${detail.version}: first publication` : `Version ${detail.version} against published version ${detail.published_version}`}</h3>
      {changed.length === 0 && <p>No field changed.</p>}
      <dl className="diff">
        {changed.map((key) => (
          <div key={key} className="diff-row">
            <dt>{key}</dt>
            {before !== null && <dd className="before"><span className="visually-hidden">Before: </span><pre>{show(before[key])}</pre></dd>}
            <dd className="after"><span className="visually-hidden">{before === null ? "Value: " : "After: "}</span><pre>{show(after[key])}</pre></dd>
          </div>
        ))}
      </dl>
    </div>
  )
}

const Decide = ({ label, onApprove, onReject }: {
  label: string
  onApprove: () => Promise<void>
  onReject: (reason: string) => Promise<void>
}) => {
  const [reason, setReason] = useState("")
  const [error, setError] = useState<string | null>(null)
  const run = async (action: () => Promise<void>) => {
    setError(null)
    try {
      await action()
    } catch (failure) {
      setError((failure as Error).message)
    }
  }
  return (
    <div className="stack">
      <label>Reason for {label} (required to reject; the creator reads it) <textarea rows={2} value={reason} onChange={(e) => setReason(e.target.value)} /></label>
      <div className="row">
        <button type="button" onClick={() => void run(onApprove)}>Approve {label}</button>
        <button
          type="button"
          className="danger"
          onClick={() => reason.trim() ? void run(() => onReject(reason.trim())) : setError("Write a reason before rejecting: the creator reads it.")}
        >
          Reject {label}
        </button>
      </div>
      {error && <p role="alert" className="error">{error}</p>}
    </div>
  )
}

export const AdminPage = () => {
  const [queue, setQueue] = useState<{ submissions: ReadonlyArray<QueueItem>; applications: ReadonlyArray<Application> } | null>(null)
  const [missing, setMissing] = useState(false)
  const [error, setError] = useState<string | null>(null)
  const [open, setOpen] = useState<Detail | null>(null)
  const [status, setStatus] = useState<string | null>(null)

  const me = useMe()
  const load = () =>
    call((c) => c.admin.queue()).then((q) => setQueue(q), (e: Error & { status?: number }) => {
      if (e.status === 404 || e.status === 401) setMissing(true)
      else setError(e.message)
    })
  // Only an operator asks for the queue: anyone else would get a 404 (an error in their console) for a page that
  // says "Not found" anyway.
  useEffect(() => {
    if (me.mayReview === true) void load()
    else if (me.mayReview === false) setMissing(true)
  }, [me.mayReview])

  const openSubmission = async (id: string) => {
    setError(null)
    try {
      setOpen(await call((c) => c.admin.submission({ path: { id: SubmissionId.unchecked.make(id) } })) as Detail)
    } catch (failure) {
      setError((failure as Error).message)
    }
  }

  if (missing) return <section><h1>Not found</h1><p>There is no page at /admin.</p></section>
  if (!queue) return error ? <p role="alert" className="error">{error}</p> : <p role="status">Loading…</p>
  return (
    <section className="stack">
      <h1>Review</h1>
      <p role="status" aria-live="polite">{status}</p>
      {error && <p role="alert" className="error">{error}</p>}
      <section className="card stack" aria-labelledby="subs">
        <h2 id="subs">Expert submissions ({queue.submissions.length})</h2>
        {queue.submissions.length === 0 && <p className="muted">Nothing waits for review.</p>}
        <ul className="list">
          {queue.submissions.map((s) => (
            <li key={s.id} className="card">
              <strong>{s.name}</strong> <span className="muted small">({s.agent}) · version {s.version} · submitted {new Date(s.submitted_at).toLocaleString()}</span>
              <div className="row">
                <button type="button" className="secondary" onClick={() => void openSubmission(s.id)} aria-expanded={open?.id === s.id}>
                  Review {s.name}
                </button>
              </div>
              {open?.id === s.id && (
                <div className="stack">
                  {open.eval_gate && <GateScorecard agent={open.agent} version={open.version} card={open.eval_gate} />}
                  <Diff detail={open} />
                  <Decide
                    label={`version ${s.version} of ${s.name}`}
                    onApprove={async () => {
                      await call((c) => c.admin.approveSubmission({ path: { id: SubmissionId.unchecked.make(s.id) } }))
                      setStatus(`Approved: version ${s.version} of ${s.name} is live.`)
                      setOpen(null)
                      await load()
                    }}
                    onReject={async (reason) => {
                      await call((c) => c.admin.rejectSubmission({ path: { id: SubmissionId.unchecked.make(s.id) }, payload: { reason } }))
                      setStatus(`Rejected version ${s.version} of ${s.name}; its creator is told why.`)
                      setOpen(null)
                      await load()
                    }}
                  />
                </div>
              )}
            </li>
          ))}
        </ul>
      </section>
      <section className="card stack" aria-labelledby="apps">
        <h2 id="apps">Creator applications ({queue.applications.length})</h2>
        {queue.applications.length === 0 && <p className="muted">No application waits.</p>}
        <ul className="list">
          {queue.applications.map((a) => (
            <li key={a.user_id} className="card stack">
              <p><strong>{a.display_name}</strong> <span className="muted small">{a.account_type} · {a.email} · applied {a.applied_at ? new Date(a.applied_at).toLocaleString() : ""}</span></p>
              <p>{a.bio}</p>
              <Decide
                label={`the application of ${a.display_name}`}
                onApprove={async () => {
                  await call((c) => c.admin.approveApplication({ path: { id: UserId.unchecked.make(a.user_id) } }))
                  setStatus(`${a.display_name} is now a creator.`)
                  await load()
                }}
                onReject={async (reason) => {
                  await call((c) => c.admin.rejectApplication({ path: { id: UserId.unchecked.make(a.user_id) }, payload: { reason } }))
                  setStatus(`Rejected the application of ${a.display_name}.`)
                  await load()
                }}
              />
            </li>
          ))}
        </ul>
      </section>
    </section>
  )
}
