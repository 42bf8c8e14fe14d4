import { useEffect, useState } from "react"
import { formatCredits } from "../session.js"
import type { Approval, ToolCall, Turn } from "./fold.js"
import { splitAttachments } from "./attachments.js"
import { Footnotes, footnotes } from "./Citations.js"
import { Markdown } from "./Markdown.js"

const FAILURES: Record<string, string> = {
  interrupted: "You stopped this answer.",
  rolled_back: "This answer was cancelled by a newer message.",
  insufficient_credits: "Your wallet does not have enough credits for this. Top up in the wallet and try again.",
  budget_exceeded: "This answer reached its spending limit and stopped.",
  agent_unavailable: "This expert is not available any more.",
  session_deleted: "This conversation was deleted."
}

const Countdown = ({ until }: { until: string }) => {
  const [now, setNow] = useState(Date.now())
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), 1000)
    return () => clearInterval(timer)
  }, [])
  const left = Math.max(0, Math.round((new Date(until).getTime() - now) / 1000))
  return <span className="muted">{left > 0 ? `${Math.floor(left / 60)}:${String(left % 60).padStart(2, "0")} left to answer` : "expired"}</span>
}

export const pretty = (value: unknown) => {
  if (value === undefined || value === null || value === "") return ""
  if (typeof value === "string") {
    try {
      return JSON.stringify(JSON.parse(value), null, 2)
    } catch {
      return value
    }
  }
  return JSON.stringify(value, null, 2)
}

/** One line of the arguments, for the card's summary. */
const brief = (args: string) => {
  const text = pretty(args).replace(/\s+/g, " ").trim()
  return text.length > 60 ? `${text.slice(0, 57)}…` : text
}

const STATUS_WORDS: Record<string, string> = { pending: "waiting", in_progress: "running", completed: "done", failed: "failed", denied: "denied" }

/** A tool call as a compact card: name, arguments in brief and status; open it for the arguments and result. */
const ToolCard = ({ tool }: { tool: ToolCall }) => (
  <details className={`tool tool-${tool.status}`}>
    <summary>
      <span className="tool-name"><code>{tool.name}</code></span>
      {tool.args && <span className="tool-args muted">{brief(tool.args)}</span>}
      <span className="tool-badge" aria-label={`status: ${STATUS_WORDS[tool.status] ?? tool.status}`}>
        <span data-testid="tool-status" hidden>{tool.status}</span>{STATUS_WORDS[tool.status] ?? tool.status}
      </span>
    </summary>
    {tool.args && <><h4>Arguments</h4><pre>{pretty(tool.args)}</pre></>}
    {tool.result !== undefined && <><h4>Result</h4><pre>{pretty(tool.result)}</pre></>}
    {tool.error !== undefined && <><h4>Error</h4><pre>{pretty(tool.error)}</pre></>}
    {tool.reason !== undefined && <p>Refused: {String(tool.reason)}</p>}
  </details>
)

/** "Show thinking and credits on every answer": off by default, kept in this browser. */
export const useDetailsSetting = () => {
  const [always, setAlways] = useState(() => localStorage.getItem("atrium.details") === "always")
  const set = (value: boolean) => {
    localStorage.setItem("atrium.details", value ? "always" : "auto")
    setAlways(value)
  }
  return [always, set] as const
}

/**
 * What a turn of a conversation tree offers (issue 44): answer it again, edit its message (both make a sibling
 * version), and `< n/m >` between the versions where there are several.
 */
export interface BranchControls {
  readonly onRegenerate?: (() => void) | undefined
  readonly onEdit?: ((text: string) => void) | undefined
  readonly versions?: { readonly n: number; readonly m: number; readonly onPrevious: () => void; readonly onNext: () => void } | undefined
}

/** A thumbs up or down on an answer (docs/sessions.md "Feedback"), where the answer is a turn of the session. */
export interface FeedbackControls {
  readonly rating: "up" | "down" | null
  readonly onRate: (rating: "up" | "down", reason?: string, share?: boolean) => Promise<void>
  readonly onClear: () => Promise<void>
}

/**
 * 👍 and 👎 under an answer, as ChatGPT and Claude.ai have them. A thumbs down asks what was wrong (optional) and
 * whether the expert's creator may read this exchange to improve it; pressing the chosen thumb again takes it back.
 */
const Thumbs = ({ feedback }: { feedback: FeedbackControls }) => {
  const [asking, setAsking] = useState(false)
  const [reason, setReason] = useState("")
  const [share, setShare] = useState(false)
  const [error, setError] = useState<string | null>(null)
  const run = (action: () => Promise<void>, then: () => void) => {
    setError(null)
    action().then(then, (failure: Error) => setError(failure.message))
  }
  const done = () => setAsking(false)
  const press = (rating: "up" | "down") => {
    if (feedback.rating === rating) return run(feedback.onClear, done)
    // The thumbs down counts at once; what was wrong is asked after, and may be skipped.
    run(() => feedback.onRate(rating), () => setAsking(rating === "down"))
  }
  return (
    <>
      <span className="thumbs" role="group" aria-label="Rate this answer">
        <button type="button" className="link" aria-pressed={feedback.rating === "up"} aria-label="Good answer" onClick={() => press("up")}>👍</button>
        <button type="button" className="link" aria-pressed={feedback.rating === "down"} aria-label="Bad answer" onClick={() => press("down")}>👎</button>
      </span>
      {asking && feedback.rating === "down" && (
        <form className="feedback-form stack" aria-label="What was wrong with this answer?" onSubmit={(e) => {
          e.preventDefault()
          run(() => feedback.onRate("down", reason, share), done)
        }}>
          <label>What was wrong? (optional) <textarea rows={2} maxLength={2000} value={reason} onChange={(e) => setReason(e.target.value)} /></label>
          <label className="row">
            <input type="checkbox" checked={share} onChange={(e) => setShare(e.target.checked)} />
            Let the expert's creator read this exchange to improve it
          </label>
          <div className="row">
            <button type="submit">Send feedback</button>
            <button type="button" className="secondary" onClick={() => setAsking(false)}>Skip</button>
          </div>
        </form>
      )}
      {feedback.rating !== null && !asking && <span className="muted small" role="status">Thanks for the feedback.</span>}
      {error && <span className="error small" role="alert">{error}</span>}
    </>
  )
}

/** The `< n/m >` switch between a turn's versions. */
const Versions = ({ versions }: { versions: NonNullable<BranchControls["versions"]> }) => (
  <span className="versions" role="group" aria-label="Versions of this message" data-testid="versions">
    <button type="button" className="link" aria-label="Previous version" disabled={versions.n <= 1} onClick={versions.onPrevious}>&lt;</button>
    <span data-testid="version">{versions.n}/{versions.m}</span>
    <button type="button" className="link" aria-label="Next version" disabled={versions.n >= versions.m} onClick={versions.onNext}>&gt;</button>
  </span>
)

/** A message as a person reads it: the words, and a chip per attached file (its quote in the message is the model's). */
export const MessageText = ({ text }: { text: string }) => {
  const { text: words, files } = splitAttachments(text)
  return (
    <>
      {words}
      {files.length > 0 && (
        <ul className="attachments" aria-label="Attached files">
          {files.map((name, i) => <li key={i} className="attachment-chip"><span aria-hidden="true">📎</span> {name}</li>)}
        </ul>
      )}
    </>
  )
}

/** The user's message, with Edit (a new version of it, sent as a sibling) where the turn is on the tree. */
const UserBubble = ({ text, branch }: { text: string; branch: BranchControls | undefined }) => {
  const [editing, setEditing] = useState<string | null>(null)
  if (editing !== null && branch?.onEdit) {
    const save = () => {
      const next = editing.trim()
      // The edit changes the words; the files the message carried go with the new version.
      const at = text.indexOf("<attachment ")
      const quoted = at < 0 ? "" : text.slice(at)
      if (next === "" && quoted === "") return
      setEditing(null)
      branch.onEdit!([next, quoted].filter(Boolean).join("\n\n"))
    }
    return (
      <form className="bubble user editing" aria-label="Edit your message" onSubmit={(e) => { e.preventDefault(); save() }}>
        <label className="visually-hidden" htmlFor="edit-message">Edited message</label>
        <textarea id="edit-message" rows={2} value={editing} onChange={(e) => setEditing(e.target.value)} autoFocus />
        <div className="row">
          <button type="submit" disabled={editing.trim() === ""}>Send edit</button>
          <button type="button" className="secondary" onClick={() => setEditing(null)}>Cancel</button>
        </div>
      </form>
    )
  }
  return (
    <div className="bubble user">
      <span className="visually-hidden">You: </span><MessageText text={text} />
      {(branch?.onEdit || branch?.versions) && (
        <div className="message-actions">
          {branch.versions && <Versions versions={branch.versions} />}
          {branch.onEdit && <button type="button" className="link" onClick={() => setEditing(splitAttachments(text).text)}>Edit</button>}
        </div>
      )}
    </div>
  )
}

export const TurnView = ({ turn, unlocked, unlocking, details, onUnlock, branch, feedback }: {
  turn: Turn
  unlocked: boolean
  unlocking: boolean
  details: boolean
  onUnlock: () => void
  branch?: BranchControls | undefined
  feedback?: FeedbackControls | undefined
}) => (
  <li className="turn">
    {turn.user !== null && <UserBubble text={turn.user} branch={branch} />}
    <div className="bubble assistant" aria-busy={turn.status === "running"}>
      <span className="visually-hidden">Expert: </span>
      {(turn.thinking.trim() !== "" || details) && (
        <details className="thinking">
          <summary>Thinking</summary>
          <p>{turn.thinking.trim() || "No reasoning was shown for this answer."}</p>
        </details>
      )}
      {turn.tools.map((tool) => <ToolCard key={tool.id} tool={tool} />)}
      {turn.approvals.some((a) => !a.answered) && <p className="muted small">Waiting for your answer below.</p>}
      {turn.text && <Cited turn={turn} />}
      {turn.status === "running" && <p className="typing" aria-hidden="true">…</p>}
      {turn.trial && !unlocked && (
        <div className="notice" role="alert" data-testid="trial-notice">
          <p>
            You have used your {Number(turn.trial.trials_used)} free trial {Number(turn.trial.trials_used) === 1 ? "message" : "messages"} with
            this expert, so this message was not answered. Unlock it for {formatCredits(Number(turn.trial.price))} to keep
            chatting{turn.user ? ": your message is sent again right after" : ""}.
          </p>
          <button type="button" disabled={unlocking} onClick={onUnlock}>Unlock for {formatCredits(Number(turn.trial.price))}</button>
        </div>
      )}
      {turn.trial && unlocked && <p className="muted small">You have unlocked this expert since this message.</p>}
      {turn.budget && (
        <p className="notice" role="alert">
          {turn.budget.reason === "wallet"
            ? "Your wallet ran out of credits during this answer. Top up in the wallet to continue."
            : "This answer reached its budget and stopped."}
        </p>
      )}
      {turn.status === "failed" && turn.failure && (
        <p className="error" role="alert" data-testid="failure">
          {FAILURES[turn.failure.code] ?? `The answer failed: ${turn.failure.message || turn.failure.code}`}
        </p>
      )}
      {turn.status === "completed" && turn.credits !== undefined && (turn.credits > 0 || details) && (
        <p className="muted small">Charged {formatCredits(turn.credits)}</p>
      )}
      {turn.status !== "running" && (branch?.onRegenerate || feedback) && (
        <div className="answer-actions">
          {branch?.onRegenerate && <button type="button" className="link" onClick={branch.onRegenerate}>Regenerate</button>}
          {feedback && <Thumbs feedback={feedback} />}
        </div>
      )}
    </div>
  </li>
)

/** The answer, its citations as numbered footnotes that open the passage (Citations.tsx), and Copy once it is done. */
const Cited = ({ turn }: { turn: Turn }) => {
  const { text, notes } = footnotes(turn)
  return (
    <>
      <Markdown text={text} testId="answer" />
      <Footnotes notes={notes} />
      {turn.status !== "running" && <CopyAnswer text={turn.text} />}
    </>
  )
}

/** Copies the answer as written (its Markdown), as ChatGPT and Claude.ai offer under every answer. */
const CopyAnswer = ({ text }: { text: string }) => {
  const [state, setState] = useState<"idle" | "copied" | "failed">("idle")
  const copy = () =>
    void navigator.clipboard?.writeText(text).then(() => setState("copied"), () => setState("failed"))
  return (
    <div className="answer-actions">
      <button type="button" className="link" aria-label={state === "copied" ? "Copied" : "Copy answer"} onClick={copy}>
        {state === "copied" ? "Copied" : state === "failed" ? "Copy failed" : "Copy"}
      </button>
    </div>
  )
}

/** Approvals waiting for an answer, pinned above the composer so none waits unseen. */
export const Approvals = ({ turns, onAnswer }: {
  turns: ReadonlyArray<Turn>
  onAnswer: (approval: Approval, decision: "approve" | "deny") => void
}) => {
  const waiting = turns.flatMap((turn) => turn.approvals.filter((a) => !a.answered))
  if (waiting.length === 0) return null
  return (
    <div className="pinned" aria-label="Waiting for your approval" role="region">
      {waiting.map((approval) => (
        <div key={approval.approval_id} className="approval" role="group" aria-label={`Approve the tool ${approval.name}?`}>
          <p>The expert wants to run <code>{approval.name}</code> with:</p>
          <pre>{pretty(approval.arguments)}</pre>
          <div className="row">
            <button type="button" onClick={() => onAnswer(approval, "approve")}>Approve</button>
            <button type="button" className="danger" onClick={() => onAnswer(approval, "deny")}>Deny</button>
            <Countdown until={approval.expires_at} />
          </div>
        </div>
      ))}
    </div>
  )
}
