import { useEffect, useRef, useState, type FormEvent } from "react"
import { EVENT_TYPES, isEventType } from "../../../src/webhooks/Domain.js"
import { call, itemsOf } from "../api.js"
import { ListTable } from "./ListTable.js"
import { StudioHeader, when } from "./StudioTabs.js"
import { WebhookDeliveryId, WebhookId } from "../../../src/platform/Ids.js"

/** An endpoint as the API tells it (src/webhooks/Domain.ts, WebhookView). */
interface Webhook {
  id: string
  url: string
  events: ReadonlyArray<string>
  description: string
  status: "enabled" | "disabled"
  disabled_reason: string | null
  created_at: string
}

interface Delivery {
  id: string
  event_id: string
  event_type: string
  status: "pending" | "succeeded" | "failed"
  attempts: number
  response_status: number | null
  latency_ms: number | null
  response_body: string | null
  error: string | null
  last_attempt_at: string | null
  next_attempt_at: string | null
  redelivery: boolean
  created_at: string
}

/** Each event an endpoint can subscribe to, in words. */
const EVENT_WORDS: Record<(typeof EVENT_TYPES)[number], string> = {
  "run.completed": "A run completed",
  "run.failed": "A run failed",
  "run.cancelled": "A run was cancelled",
  "run.incomplete": "A run stopped before finishing",
  "approval.required": "A run waits for an approval",
  "schedule.failed": "A scheduled run could not start",
  "response.completed": "A Responses run completed",
  "response.failed": "A Responses run failed",
  "response.cancelled": "A Responses run was cancelled",
  "response.incomplete": "A Responses run stopped before finishing"
}
const eventWords = (type: string) => EVENT_WORDS[type as keyof typeof EVENT_WORDS] ?? type

const DELIVERY: Record<Delivery["status"], string> = {
  pending: "Retrying",
  succeeded: "Delivered",
  failed: "Failed"
}

/** Why an endpoint is off, as the platform records it (src/webhooks/Repo.ts), in the reader's words and locale. */
const disabledWhy = (reason: string | null) => {
  if (reason === null || reason === "disabled by its owner") return "turned off by you"
  const failing = /^every delivery attempt has failed since (\S+)$/.exec(reason)
  if (failing) return `turned off: every delivery has failed since ${when(failing[1])}`
  return reason
}

const urlProblem = (url: string) => {
  try {
    const parsed = new URL(url.trim())
    if (parsed.protocol !== "https:" && parsed.protocol !== "http:") return "URL must start with https:// (or http://)."
    return null
  } catch {
    return "URL is not valid. Write the full address of your endpoint, for example https://example.com/hooks/atrium."
  }
}

/** The signing secret, shown the one time the API gives it. */
const SecretOnce = ({ secret, onDone }: { secret: { id: string; value: string; url: string }; onDone: () => void }) => {
  const [copied, setCopied] = useState(false)
  // Focus moves to the secret when it appears (a screen reader reads it; the form is above the list, out of view).
  const box = useRef<HTMLDivElement>(null)
  useEffect(() => box.current?.focus(), [secret.value])
  return (
    <div ref={box} tabIndex={-1} className="card notice stack" role="region" aria-label="Signing secret" data-testid="webhook-secret">
      <p>
        <strong>The signing secret of {secret.url}.</strong> Copy it now: it is shown this once. Your endpoint checks
        each delivery's <code>webhook-signature</code> with it (Standard Webhooks).
      </p>
      <p><code className="secret">{secret.value}</code></p>
      <div className="row">
        <button type="button" className="secondary" onClick={() => void navigator.clipboard?.writeText(secret.value).then(() => setCopied(true), () => undefined)}>
          {copied ? "Copied" : "Copy the secret"}
        </button>
        <button type="button" onClick={onDone}>I saved it</button>
      </div>
    </div>
  )
}

const EventChoices = ({ prefix, chosen, onChange }: { prefix: string; chosen: ReadonlyArray<string>; onChange: (events: Array<string>) => void }) => (
  <fieldset className="events">
    <legend>Events to send</legend>
    {EVENT_TYPES.map((type) => (
      <label key={type} className="check">
        <input
          type="checkbox"
          name={`${prefix}-${type}`}
          checked={chosen.includes(type)}
          onChange={(e) => onChange(e.target.checked ? [...chosen, type] : chosen.filter((t) => t !== type))}
        />
        {EVENT_WORDS[type]}
      </label>
    ))}
  </fieldset>
)

/** The endpoints of the account (GET /v1/webhooks): they get events of all its experts' runs. */
export const StudioWebhooksPage = ({ identifier }: { identifier: string }) => {
  const [hooks, setHooks] = useState<ReadonlyArray<Webhook> | null>(null)
  const [form, setForm] = useState({ url: "", description: "", events: ["run.completed", "run.failed"] as Array<string> })
  const [secret, setSecret] = useState<{ id: string; value: string; url: string } | null>(null)
  const [error, setError] = useState<string | null>(null)
  const [status, setStatus] = useState<string | null>(null)
  const [busy, setBusy] = useState(false)

  const load = () => call((c) => c.webhooks.list({ urlParams: {} })).then((l) => setHooks(itemsOf<Webhook>(l)), (e: Error) => setError(e.message))
  useEffect(() => {
    void load()
  }, [])

  const create = async (e: FormEvent) => {
    e.preventDefault()
    setError(null)
    setStatus(null)
    const problem = urlProblem(form.url)
    if (problem) return setError(problem)
    if (form.events.length === 0) return setError("Events: choose at least one event to send.")
    setBusy(true)
    try {
      // One key per submission: a double click or a retried request makes one endpoint, not two.
      const key = crypto.randomUUID()
      const created = await call((c) => c.webhooks.create({
        headers: { "idempotency-key": key },
        payload: { url: form.url.trim(), events: form.events.filter(isEventType), ...(form.description.trim() ? { description: form.description.trim() } : {}) }
      }))
      setSecret({ id: created.id, value: created.secret, url: created.url })
      setForm({ url: "", description: "", events: ["run.completed", "run.failed"] })
      setStatus("Endpoint added.")
      await load()
    } catch (failure) {
      setError((failure as Error).message)
    } finally {
      setBusy(false)
    }
  }

  return (
    <section className="stack">
      <StudioHeader identifier={identifier} title="Webhooks" />
      <p className="muted">
        Endpoints belong to your account: each gets a signed POST when something it subscribes to happens in the runs
        of any of your experts, not only this one, retried for up to 72 hours until it answers 2xx.
      </p>
      {secret && <SecretOnce secret={secret} onDone={() => setSecret(null)} />}
      <form onSubmit={create} className="card stack" aria-label="Add an endpoint" noValidate>
        <h2>Add an endpoint</h2>
        <label>Endpoint URL <input type="url" value={form.url} onChange={(e) => setForm((f) => ({ ...f, url: e.target.value }))} placeholder="https://example.com/hooks/atrium" spellCheck={false} /></label>
        <label>Description (optional) <input maxLength={500} value={form.description} onChange={(e) => setForm((f) => ({ ...f, description: e.target.value }))} /></label>
        <EventChoices prefix="new" chosen={form.events} onChange={(events) => setForm((f) => ({ ...f, events }))} />
        <div className="row"><button type="submit" disabled={busy}>Add endpoint</button></div>
      </form>
      <p role="status" aria-live="polite">{status}</p>
      {error && <p role="alert" className="error">{error}</p>}
      {hooks === null && !error && <p role="status">Loading…</p>}
      {hooks !== null && hooks.length === 0 && (
        <p className="empty-state" data-testid="webhooks-empty">
          No endpoints yet. Add the URL of a server of yours above to be told when runs complete or fail, instead of asking.
        </p>
      )}
      {hooks !== null && hooks.length > 0 && (
        <ul className="list" aria-label="Endpoints" data-testid="webhooks">
          {hooks.map((hook) => (
            <WebhookItem
              key={hook.id}
              hook={hook}
              onChanged={load}
              onSecret={(value) => setSecret({ id: hook.id, value, url: hook.url })}
              onStatus={setStatus}
              onError={setError}
            />
          ))}
        </ul>
      )}
    </section>
  )
}

const WebhookItem = ({ hook, onChanged, onSecret, onStatus, onError }: {
  hook: Webhook
  onChanged: () => Promise<unknown>
  onSecret: (secret: string) => void
  onStatus: (status: string | null) => void
  onError: (error: string | null) => void
}) => {
  const [editing, setEditing] = useState(false)
  const [edit, setEdit] = useState({ url: hook.url, description: hook.description, events: [...hook.events] })
  const [log, setLog] = useState(false)
  const name = hook.description || hook.url

  const run = async (what: () => Promise<unknown>, done: string) => {
    onError(null)
    onStatus(null)
    try {
      await what()
      onStatus(done)
      await onChanged()
    } catch (failure) {
      onError((failure as Error).message)
    }
  }

  const save = async (e: FormEvent) => {
    e.preventDefault()
    const problem = urlProblem(edit.url)
    if (problem) return onError(problem)
    if (edit.events.length === 0) return onError("Events: choose at least one event to send.")
    await run(() => call((c) => c.webhooks.update({ path: { id: WebhookId.unchecked.make(hook.id) }, payload: { url: edit.url.trim(), description: edit.description, events: edit.events.filter(isEventType) } })), "Endpoint saved.")
    setEditing(false)
  }

  const rotate = async () => {
    if (!confirm(`Make a new signing secret for ${name}? Deliveries from now on are signed with the new one.`)) return
    onError(null)
    try {
      const rotated = await call((c) => c.webhooks.rotateSecret({ path: { id: WebhookId.unchecked.make(hook.id) } }))
      onSecret(rotated.secret)
    } catch (failure) {
      onError((failure as Error).message)
    }
  }

  const remove = async () => {
    if (!confirm(`Delete the endpoint ${name}? Its deliveries still waiting are dropped.`)) return
    await run(() => call((c) => c.webhooks.delete({ path: { id: WebhookId.unchecked.make(hook.id) } })), "Endpoint deleted.")
  }

  return (
    <li className="card stack" data-testid="webhook">
      <h2 className="wrap-anywhere">{hook.description || hook.url}</h2>
      <p>
        <strong>{hook.status === "enabled" ? "On" : `Off (${disabledWhy(hook.disabled_reason)})`}</strong>
        {hook.description && <> · <span className="wrap-anywhere">{hook.url}</span></>}
      </p>
      <p className="muted small">Sends: {hook.events.map(eventWords).join(", ")} · added {when(hook.created_at)}</p>
      {editing
        ? (
          <form onSubmit={save} className="stack" aria-label={`Edit ${name}`} noValidate>
            <label>Endpoint URL <input type="url" value={edit.url} onChange={(e) => setEdit((x) => ({ ...x, url: e.target.value }))} spellCheck={false} /></label>
            <label>Description <input maxLength={500} value={edit.description} onChange={(e) => setEdit((x) => ({ ...x, description: e.target.value }))} /></label>
            <EventChoices prefix={hook.id} chosen={edit.events} onChange={(events) => setEdit((x) => ({ ...x, events }))} />
            <div className="row">
              <button type="submit">Save endpoint</button>
              <button type="button" className="secondary" onClick={() => setEditing(false)}>Cancel</button>
            </div>
          </form>
        )
        : (
          <div className="row">
            <button type="button" className="secondary" onClick={() => setLog((x) => !x)} aria-expanded={log}>
              {log ? "Hide deliveries" : "Deliveries"}<span className="visually-hidden"> of {name}</span>
            </button>
            <button type="button" className="secondary" onClick={() => setEditing(true)}>Edit<span className="visually-hidden"> {name}</span></button>
            {hook.status === "enabled"
              ? <button type="button" className="secondary" onClick={() => void run(() => call((c) => c.webhooks.update({ path: { id: WebhookId.unchecked.make(hook.id) }, payload: { disabled: true } })), "Endpoint turned off: nothing is sent to it until you turn it on.")}>Turn off<span className="visually-hidden"> {name}</span></button>
              : <button type="button" className="secondary" onClick={() => void run(() => call((c) => c.webhooks.update({ path: { id: WebhookId.unchecked.make(hook.id) }, payload: { disabled: false } })), "Endpoint turned on.")}>Turn on<span className="visually-hidden"> {name}</span></button>}
            <button type="button" className="secondary" onClick={() => void rotate()}>New secret<span className="visually-hidden"> for {name}</span></button>
            <button type="button" className="danger" onClick={() => void remove()}>Delete<span className="visually-hidden"> {name}</span></button>
          </div>
        )}
      {log && <Deliveries hook={hook} />}
    </li>
  )
}

const PAGE = 20

/** The delivery log of one endpoint, newest first, with Redeliver. */
const Deliveries = ({ hook }: { hook: Webhook }) => {
  const [items, setItems] = useState<ReadonlyArray<Delivery> | null>(null)
  const [more, setMore] = useState(false)
  const [error, setError] = useState<string | null>(null)
  const [status, setStatus] = useState<string | null>(null)

  const load = (after?: string) =>
    call((c) => c.webhooks.deliveries({ path: { id: WebhookId.unchecked.make(hook.id) }, urlParams: after ? { limit: PAGE, after } : { limit: PAGE } })).then((page) => {
      const got = itemsOf<Delivery>(page)
      setItems((old) => after ? [...(old ?? []), ...got] : got)
      setMore(page.has_more)
      setError(null)
    }, (e: Error) => setError(e.message))

  useEffect(() => {
    void load()
  }, [hook.id])

  // Retries go on in the background: the log is read again while one is pending.
  const pending = items?.some((d) => d.status === "pending") ?? false
  useEffect(() => {
    if (!pending) return
    const timer = setInterval(() => void load(), 2000)
    return () => clearInterval(timer)
  }, [pending, hook.id])

  const redeliver = async (delivery: Delivery) => {
    setError(null)
    try {
      await call((c) => c.webhooks.redeliver({ path: { id: WebhookId.unchecked.make(hook.id), delivery_id: WebhookDeliveryId.unchecked.make(delivery.id) } }))
      setStatus(`“${eventWords(delivery.event_type)}” sent again.`)
      await load()
    } catch (failure) {
      setError((failure as Error).message)
    }
  }

  return (
    <section className="stack" aria-label={`Deliveries of ${hook.description || hook.url}`}>
      <div className="row">
        <h3>Deliveries</h3>
        <button type="button" className="secondary" onClick={() => void load()}>Refresh<span className="visually-hidden"> the deliveries</span></button>
      </div>
      <p role="status" aria-live="polite">{status}</p>
      {error && <p role="alert" className="error">{error}</p>}
      <ListTable
        caption="Deliveries, newest first"
        captionHidden
        testId="deliveries"
        rows={items}
        rowKey={(d) => d.id}
        failed={error !== null}
        empty={<p className="muted" data-testid="deliveries-empty">Nothing sent yet: a delivery appears here after the first event it subscribes to, for example when a run completes.</p>}
        first={{
          label: "Event",
          cell: (d) => (
            <>
              {eventWords(d.event_type)}
              <span className="muted small"> · {when(d.last_attempt_at ?? d.created_at)}{d.redelivery ? " · sent again" : ""}</span>
            </>
          )
        }}
        columns={[
          {
            label: "Result",
            cell: (d) => (
              <>
                <span className={`badge delivery-${d.status}`}>{DELIVERY[d.status]}</span>
                {d.response_status !== null
                  ? ` · answered ${d.response_status}`
                  : d.error ? ` · ${d.error}` : ""}
                {d.status === "pending" && d.next_attempt_at && <span className="muted small"> · next try {when(d.next_attempt_at)}</span>}
              </>
            )
          },
          { label: "Attempts", numeric: true, cell: (d) => d.attempts },
          { label: "Latency", numeric: true, cell: (d) => d.latency_ms === null ? "—" : `${new Intl.NumberFormat().format(d.latency_ms)} ms` },
          { label: "Answer", cell: (d) => <span className="response-body">{d.response_body ? d.response_body.slice(0, 200) : "—"}</span> },
          {
            label: "Actions",
            hiddenLabel: true,
            cell: (d) => (
              <button type="button" className="secondary" onClick={() => void redeliver(d)}>
                Redeliver<span className="visually-hidden"> “{eventWords(d.event_type)}”, sent {when(d.created_at)}</span>
              </button>
            )
          }
        ]}
        older={{ label: "Older deliveries", more, onClick: (last) => void load(last.id) }}
      />
    </section>
  )
}
