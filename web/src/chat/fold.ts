import type { SessionEvent } from "../stream.js"

export interface ToolCall {
  id: string
  name: string
  args: string
  status: string
  result?: unknown
  error?: unknown
  reason?: unknown
}

export interface Approval {
  approval_id: string
  tool_call_id: string
  name: string
  arguments: unknown
  expires_at: string
  answered: boolean
}

export interface Turn {
  /** The session's turn number (`run.created`'s `session_turn`): where the turn is in the conversation's tree. */
  number?: number
  user: string | null
  text: string
  thinking: string
  tools: Array<ToolCall>
  approvals: Array<Approval>
  status: "running" | "completed" | "failed"
  failure?: { code: string; message: string }
  trial?: { price: unknown; trials_used: unknown }
  budget?: { reason: string; spent: unknown; budget: unknown }
  credits?: number
  /** A tool ran (or a new model step began) since the text so far: the next text starts a paragraph of its own. */
  stepBreak?: boolean
}

/** Folds the session's events, in order, into its turns (docs/events.md). */
export const fold = (turns: Array<Turn>, event: SessionEvent, user: string | null = null): Array<Turn> => {
  if (event.type === "run.created") {
    const number = typeof event.session_turn === "number" ? { number: event.session_turn } : {}
    return [...turns, { ...number, user, text: "", thinking: "", tools: [], approvals: [], status: "running" }]
  }
  const last = turns.at(-1)
  if (!last) return turns
  const turn: Turn = { ...last, tools: [...last.tools], approvals: [...last.approvals] }
  const tool = (id: unknown) => {
    const index = turn.tools.findIndex((t) => t.id === id)
    if (index < 0) return undefined
    const copy = { ...turn.tools[index]! }
    turn.tools[index] = copy
    return copy
  }
  const settle = (toolCallId: unknown) => {
    turn.approvals = turn.approvals.map((a) => a.tool_call_id === toolCallId ? { ...a, answered: true } : a)
  }
  switch (event.type) {
    case "output.text.delta": {
      const delta = String(event.delta ?? "")
      // Two model steps' texts ("Calling calculator." and "calculator returned …") are two paragraphs, not one run-on.
      if (turn.stepBreak && delta !== "") {
        if (turn.text.trim() !== "" && !/\n\s*\n\s*$/.test(turn.text)) turn.text = `${turn.text.trimEnd()}\n\n`
        turn.stepBreak = false
      }
      turn.text += delta
      break
    }
    case "run.in_progress":
      turn.stepBreak = true
      break
    case "output.thinking.delta":
      turn.thinking += String(event.delta ?? "")
      break
    case "tool_call.created":
      turn.stepBreak = true
      turn.tools.push({
        id: String(event.tool_call_id),
        name: String(event.name),
        args: event.arguments === undefined ? "" : typeof event.arguments === "string" ? event.arguments : JSON.stringify(event.arguments),
        status: "pending"
      })
      break
    case "tool_call.arguments.delta": {
      const t = tool(event.tool_call_id)
      if (t) t.args += String(event.delta ?? "")
      break
    }
    case "tool_call.in_progress":
    case "tool_call.completed":
    case "tool_call.failed": {
      const t = tool(event.tool_call_id)
      if (t) {
        t.status = String(event.status ?? event.type.split(".")[1])
        if (event.error !== undefined) t.error = event.error
      }
      settle(event.tool_call_id)
      break
    }
    case "tool_call.result": {
      turn.stepBreak = true
      const t = tool(event.tool_call_id)
      if (t) t.result = event.output
      break
    }
    case "tool_call.denied": {
      const t = tool(event.tool_call_id)
      if (t) {
        t.status = "denied"
        t.reason = event.reason
      }
      settle(event.tool_call_id)
      break
    }
    case "approval.required":
      turn.approvals.push({
        approval_id: String(event.approval_id),
        tool_call_id: String(event.tool_call_id),
        name: String(event.name),
        arguments: event.arguments,
        expires_at: String(event.expires_at),
        answered: false
      })
      break
    case "usage.trial_exhausted":
      turn.trial = { price: event.price, trials_used: event.trials_used }
      break
    case "usage.budget_exhausted":
      turn.budget = { reason: String(event.reason), spent: event.spent, budget: event.budget }
      break
    case "run.completed":
      turn.status = "completed"
      turn.credits = Number(event.credits_charged ?? 0)
      turn.approvals = turn.approvals.map((a) => ({ ...a, answered: true }))
      break
    case "run.failed":
      turn.status = "failed"
      turn.failure = { code: String(event.code), message: String(event.message ?? "") }
      turn.approvals = turn.approvals.map((a) => ({ ...a, answered: true }))
      break
    default:
      return turns
  }
  return [...turns.slice(0, -1), turn]
}


/**
 * Who said what: the user's side of each turn. The session's history has the turns it recorded, by turn number;
 * the messages this tab sent wait in a queue (kept in `sessionStorage`, so a reload mid-turn keeps them) until
 * their turn's `run.created` arrives. A message the history already has is taken off the queue too, so after a
 * reload nothing is shown twice, and nothing sent is lost, however many messages went out in a row.
 */
export class UserSide {
  private readonly history: Map<number, string>
  private readonly base: number
  private pending: Array<string>
  /** Messages already given to a turn the history does not have yet, by the turn's place: a reload needs them. */
  private assigned: Record<number, string>
  private runs = 0

  constructor(readonly sessionId: string, history: Map<number, string>) {
    this.history = history
    this.base = history.has(0) ? 0 : 1
    const stored = readStore(sessionId)
    this.pending = stored.pending
    this.assigned = Object.fromEntries(
      Object.entries(stored.assigned).filter(([index]) => !history.has(Number(index) + this.base))
    )
  }

  private save() {
    writeStore(this.sessionId, { pending: this.pending, assigned: this.assigned })
  }

  /** A message is about to be sent. */
  sent(text: string) {
    this.pending.push(text)
    this.save()
  }

  /** A message could not be sent: it never gets a turn. */
  failed(text: string) {
    const index = this.pending.lastIndexOf(text)
    if (index >= 0) this.pending.splice(index, 1)
    this.save()
  }

  /**
   * The user's message of the next turn (`run.created`); `number`: its turn number, when the event names it (a
   * conversation with branches does not run its turns in the order of their numbers' places).
   */
  next(number?: number): string | null {
    const index = number === undefined ? this.runs++ : number - this.base
    const recorded = this.history.get(index + this.base)
    if (recorded !== undefined) {
      if (this.pending[0] === recorded) {
        this.pending.shift()
        this.save()
      }
      return recorded
    }
    const known = this.assigned[index]
    if (known !== undefined) return known
    const text = this.pending.shift()
    if (text === undefined) return null
    this.assigned[index] = text
    this.save()
    return text
  }
}

interface Store {
  pending: Array<string>
  assigned: Record<number, string>
}

const storeKey = (id: string) => `atrium.pending.${id}`

const readStore = (id: string): Store => {
  try {
    const stored = JSON.parse(sessionStorage.getItem(storeKey(id)) ?? "{}") as Partial<Store>
    return {
      pending: Array.isArray(stored.pending) ? stored.pending.filter((x): x is string => typeof x === "string") : [],
      assigned: typeof stored.assigned === "object" && stored.assigned !== null ? stored.assigned : {}
    }
  } catch {
    return { pending: [], assigned: {} }
  }
}

const writeStore = (id: string, store: Store) => {
  if (store.pending.length === 0 && Object.keys(store.assigned).length === 0) sessionStorage.removeItem(storeKey(id))
  else sessionStorage.setItem(storeKey(id), JSON.stringify(store))
}

/** Queues a message of session `id`: through its `UserSide` when the page follows that session, else in storage. */
export const queueMessage = (side: UserSide | null, id: string, text: string) => {
  if (side?.sessionId === id) return side.sent(text)
  const store = readStore(id)
  writeStore(id, { ...store, pending: [...store.pending, text] })
}

export const unqueueMessage = (side: UserSide | null, id: string, text: string) => {
  if (side?.sessionId === id) return side.failed(text)
  const store = readStore(id)
  writeStore(id, { ...store, pending: store.pending.filter((t) => t !== text) })
}
