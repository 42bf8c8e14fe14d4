import { Cron, DateTime, Either, Option } from "effect"
import { useEffect, useState, type FormEvent } from "react"
import { call, itemsOf } from "../api.js"
import { Link } from "../router.js"
import { StudioHeader, when } from "./StudioTabs.js"
import type { ScheduleId } from "../../../src/schedules/Domain.js"

/** A schedule as the API tells it (src/schedules/Domain.ts, ScheduleView). */
interface Schedule {
  id: ScheduleId
  agent: string
  cron: string
  timezone: string
  input: string
  missed: "run_once" | "skip"
  description: string
  status: "active" | "paused"
  next_run_at: string | null
  last_firing: { fire_at: string; status: "pending" | "started" | "skipped" | "failed"; run_id: string | null; error: string | null } | null
  created_at: string
}

const FIRING: Record<string, string> = {
  pending: "about to start",
  started: "started a run",
  skipped: "skipped (missed while the platform was down)",
  failed: "failed"
}

/** The browser's own zone, the form's default. */
const localZone = () => {
  try {
    return Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC"
  } catch {
    return "UTC"
  }
}

/**
 * The cron and zone checked here first, with the same parser the platform uses (Effect's `Cron`), so a mistake is
 * said in words before anything is sent; the platform checks again.
 */
export const cronProblem = (cron: string, zone: string): string | null => {
  const text = cron.trim()
  if (text === "") return "Cron is missing. Write 5 fields: minute hour day-of-month month day-of-week, for example 0 9 * * 1-5 (9:00 on weekdays)."
  const fields = text.split(/\s+/).length
  if (fields !== 5) {
    return `Cron has ${fields} field${fields === 1 ? "" : "s"}; it needs 5: minute hour day-of-month month day-of-week, for example 0 9 * * 1-5 (9:00 on weekdays).`
  }
  if (Either.isLeft(Cron.parse(text))) {
    return `Cron "${text.slice(0, 100)}" is not a schedule: each field is a number in its range (minute 0-59, hour 0-23, day 1-31, month 1-12, weekday 0-6), a range like 1-5, a list like 1,15, a step like */15, or *.`
  }
  if (zone.trim() === "" || Option.isNone(DateTime.zoneMakeNamed(zone.trim()))) {
    return `Time zone "${zone.trim().slice(0, 100)}" is not known. Write a zone name like Europe/Paris, America/New_York or UTC.`
  }
  return null
}

/** The schedules of one expert (GET /v1/schedules, every page, kept to this expert). */
export const StudioSchedulesPage = ({ identifier }: { identifier: string }) => {
  const [schedules, setSchedules] = useState<ReadonlyArray<Schedule> | null>(null)
  const [form, setForm] = useState({ cron: "", timezone: localZone(), input: "", missed: "run_once" as "run_once" | "skip", description: "" })
  const [error, setError] = useState<string | null>(null)
  const [status, setStatus] = useState<string | null>(null)
  const [busy, setBusy] = useState(false)

  const load = async () => {
    try {
      const all: Array<Schedule> = []
      let after: string | undefined
      for (let i = 0; i < 20; i++) {
        const page = await call((c) => c.schedules.list({ urlParams: after ? { limit: 100, after } : { limit: 100 } }))
        const items = itemsOf<Schedule>(page)
        all.push(...items)
        if (!page.has_more || items.length === 0) break
        after = items[items.length - 1]!.id
      }
      setSchedules(all.filter((s) => s.agent === identifier))
    } catch (failure) {
      setError((failure as Error).message)
    }
  }

  useEffect(() => {
    void load()
  }, [identifier])

  const create = async (e: FormEvent) => {
    e.preventDefault()
    setError(null)
    setStatus(null)
    const problem = cronProblem(form.cron, form.timezone)
    if (problem) {
      setError(problem)
      return
    }
    if (form.input.trim() === "") {
      setError("Message is missing. Write what each firing sends to the expert.")
      return
    }
    setBusy(true)
    try {
      const created = await call((c) => c.schedules.create({
        payload: {
          agent: identifier,
          cron: form.cron.trim(),
          timezone: form.timezone.trim(),
          input: form.input,
          missed: form.missed,
          ...(form.description.trim() ? { description: form.description.trim() } : {})
        }
      }))
      setStatus(`Schedule added: it first runs ${when(created.next_run_at)}.`)
      setForm((f) => ({ ...f, cron: "", input: "", description: "" }))
      await load()
    } catch (failure) {
      setError((failure as Error).message)
    } finally {
      setBusy(false)
    }
  }

  const act = async (schedule: Schedule, action: "pause" | "resume" | "delete") => {
    setError(null)
    setStatus(null)
    if (action === "delete" && !confirm(`Delete the schedule “${schedule.description || schedule.cron}”? Runs it started go on.`)) return
    try {
      if (action === "pause") await call((c) => c.schedules.pause({ path: { id: schedule.id } }))
      if (action === "resume") await call((c) => c.schedules.resume({ path: { id: schedule.id } }))
      if (action === "delete") await call((c) => c.schedules.delete({ path: { id: schedule.id } }))
      setStatus(action === "pause" ? "Schedule paused: it does not run until you resume it." : action === "resume" ? "Schedule resumed." : "Schedule deleted.")
      await load()
    } catch (failure) {
      setError((failure as Error).message)
    }
  }

  const field = <K extends "cron" | "timezone" | "input" | "description">(key: K) => ({
    value: form[key],
    onChange: (e: { target: { value: string } }) => setForm((f) => ({ ...f, [key]: e.target.value }))
  })

  return (
    <section className="stack">
      <StudioHeader identifier={identifier} title="Schedules" />
      <form onSubmit={create} className="card stack" aria-label="Add a schedule" noValidate>
        <h2>Add a schedule</h2>
        <p className="muted small">
          At each time the cron names, in its time zone, the expert runs in the background with your message, billed to
          your wallet; its runs appear under <Link to={`/studio/${identifier}/runs`}>Runs</Link>.
        </p>
        <label>
          Cron (minute hour day-of-month month day-of-week)
          <input {...field("cron")} placeholder="0 9 * * 1-5" aria-describedby="cron-hint" spellCheck={false} />
        </label>
        <p id="cron-hint" className="muted small">For example <code>0 9 * * 1-5</code> is 9:00 on weekdays, <code>*/30 * * * *</code> every half hour.</p>
        <label>Time zone <input {...field("timezone")} placeholder="Europe/Paris" spellCheck={false} /></label>
        <label>Message sent at each run <textarea rows={3} maxLength={32000} {...field("input")} /></label>
        <label>
          When a run was missed (the platform was down)
          <select value={form.missed} onChange={(e) => setForm((f) => ({ ...f, missed: e.target.value as "run_once" | "skip" }))}>
            <option value="run_once">Run it once on recovery</option>
            <option value="skip">Skip it</option>
          </select>
        </label>
        <label>Description (optional) <input maxLength={500} {...field("description")} /></label>
        <div className="row"><button type="submit" disabled={busy}>Add schedule</button></div>
      </form>
      <p role="status" aria-live="polite">{status}</p>
      {error && <p role="alert" className="error">{error}</p>}
      {schedules === null && !error && <p role="status">Loading…</p>}
      {schedules !== null && schedules.length === 0 && (
        <p className="empty-state" data-testid="schedules-empty">
          No schedules yet. Add one above to run this expert at set times, for example a report every weekday at 9:00.
        </p>
      )}
      {schedules !== null && schedules.length > 0 && (
        <ul className="list" aria-label="Schedules" data-testid="schedules">
          {schedules.map((s) => (
            <li key={s.id} className="card stack">
              <h2>{s.description || `Runs at “${s.cron}”`}</h2>
              <p>
                <strong>{s.status === "active" ? "Active" : "Paused"}</strong>
                {" · "}<code>{s.cron}</code> in {s.timezone}
                {" · "}{s.status === "active" && s.next_run_at ? `next run ${when(s.next_run_at)}` : "no next run while paused"}
              </p>
              <p className="muted small">
                Sends: “{s.input.length > 200 ? `${s.input.slice(0, 200)}…` : s.input}” · a missed run is {s.missed === "skip" ? "skipped" : "run once on recovery"}
              </p>
              {s.last_firing && (
                <p className="small">
                  Last run {when(s.last_firing.fire_at)}: {FIRING[s.last_firing.status] ?? s.last_firing.status}
                  {s.last_firing.error && <span className="error"> ({s.last_firing.error})</span>}
                  {s.last_firing.run_id && <> · <Link to={`/studio/${identifier}/runs?run=${encodeURIComponent(s.last_firing.run_id)}`}>open the run</Link></>}
                </p>
              )}
              <div className="row">
                {s.status === "active"
                  ? <button type="button" className="secondary" onClick={() => void act(s, "pause")}>Pause<span className="visually-hidden"> {s.description || s.cron}</span></button>
                  : <button type="button" className="secondary" onClick={() => void act(s, "resume")}>Resume<span className="visually-hidden"> {s.description || s.cron}</span></button>}
                <button type="button" className="danger" onClick={() => void act(s, "delete")}>Delete<span className="visually-hidden"> {s.description || s.cron}</span></button>
              </div>
            </li>
          ))}
        </ul>
      )}
    </section>
  )
}
