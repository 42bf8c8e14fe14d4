import * as Fs from "node:fs"
import * as Path from "node:path"
import type { RecallModel } from "./RecallModel.js"

/**
 * The recall harness (issue 47 item 4), shared by bench/recall.ts and test/memory/recall.test.ts: plays each case of
 * bench/recall/cases.jsonl as an end user of an expert on `recall/recall` (the fake model, test/support/RecallModel.ts)
 * over the public API, one session per case session, and scores the answer to the last session's question. Plain
 * promises over `fetch`, so a script runs it as a test does.
 *
 * With memory on, a case's next session starts once memory has what its session said: the fake model tells when an
 * extraction that read the session's last message was answered, and the harness reads `GET /v1/memory` until that
 * extraction's proposals are there (the end user's "next day"; the wait is never part of a turn).
 */

export interface RecallCase {
  readonly id: string
  readonly category: string
  readonly attribute: string
  readonly sessions: ReadonlyArray<ReadonlyArray<string>>
  readonly question: string
  readonly expected: string
  /** The contradicted value: the answer must not give it. */
  readonly stale?: string
}

export interface CaseResult {
  readonly id: string
  readonly category: string
  readonly contradicted: boolean
  readonly correct: boolean
  readonly answer: string
}

export interface RecallReport {
  readonly results: ReadonlyArray<CaseResult>
  /** Turns played (every message of every session, the questions included). */
  readonly turns: number
  readonly recall: number
  readonly contradictedRecall: number
  readonly wallSeconds: number
}

export const CASES_FILE = Path.resolve(import.meta.dirname, "../../bench/recall/cases.jsonl")

/** The first `count` cases of the set (all when not said). */
export const loadCases = (count?: number): Array<RecallCase> => {
  const all = Fs.readFileSync(CASES_FILE, "utf8").split("\n").filter((line) => line.length > 0).map((line) => JSON.parse(line) as RecallCase)
  return count === undefined ? all : all.slice(0, count)
}

/** Whether `answer` gives the case's value (and not the value it replaced). */
export const scoreAnswer = (c: RecallCase, answer: string) =>
  answer.toLowerCase().includes(c.expected.toLowerCase()) && (c.stale === undefined || !answer.toLowerCase().includes(c.stale.toLowerCase()))

const json = async (base: string, method: string, path: string, auth: string, body?: unknown, headers: Record<string, string> = {}) => {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${auth}`, ...(body === undefined ? {} : { "content-type": "application/json" }), ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  const text = await response.text()
  if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${text}`)
  return JSON.parse(text)
}

/** The answer's text from a turn's SSE stream; a failed turn is an error. */
const answerOf = (raw: string) => {
  let text = ""
  for (const block of raw.split("\n\n")) {
    const event = /^event: (.+)$/m.exec(block)?.[1]
    const data = /^data: (.+)$/m.exec(block)?.[1]
    if (event === undefined || data === undefined) continue
    if (event === "output.text.delta") text += JSON.parse(data).delta
    if (event === "run.failed") throw new Error(`turn failed: ${data}`)
  }
  return text
}

export interface Expert {
  readonly key: string
  readonly agent: string
}

/** An API key of the account logged in as `token`, and an expert on `recall/recall`, with memory or without. */
export const createRecallExpert = async (base: string, token: string, memory: boolean): Promise<Expert> => {
  const key = (await json(base, "POST", "/api/user/apiKey/create", token, { name: `recall ${memory ? "on" : "off"}` })).key as string
  const created = await json(base, "POST", "/v1/agents", token, {
    name: `Recall ${memory ? "with" : "without"} memory`,
    instructions: "Answer the user's questions about themselves from what you remember.",
    model: "recall/recall",
    ...(memory
      ? { memory: { enabled: true, extraction: true, blocks: [{ label: "human", description: "Who the user is", limit: 1000 }] } }
      : {})
  })
  return { key, agent: created.identifier as string }
}

/**
 * Plays `cases` against `expert` (`concurrency` cases at a time, each its own end user, `tag` told apart between
 * runs on one database) and scores them. `memory` says whether to wait for extraction between sessions.
 */
export const runRecall = async (options: {
  readonly base: string
  readonly expert: Expert
  readonly model: RecallModel
  readonly cases: ReadonlyArray<RecallCase>
  readonly memory: boolean
  readonly tag: string
  readonly concurrency?: number
  /** How long a case waits for its session's extraction to land before it goes on without it. */
  readonly extractionTimeoutMs?: number
}): Promise<RecallReport> => {
  const { base, expert, model } = options
  const timeout = options.extractionTimeoutMs ?? 30_000
  let turns = 0
  const say = async (endUser: string, session: string, message: string) => {
    turns++
    const response = await fetch(`${base}/v1/sessions/${session}/events`, {
      method: "POST",
      headers: { authorization: `Bearer ${expert.key}`, "x-end-user-id": endUser, "content-type": "application/json" },
      body: JSON.stringify({ type: "message", message })
    })
    const raw = await response.text()
    if (!response.ok) throw new Error(`turn: ${response.status} ${raw}`)
    return answerOf(raw)
  }
  const session = async (endUser: string) =>
    (await json(base, "POST", "/v1/sessions", expert.key, { agent: expert.agent }, { "x-end-user-id": endUser })).id as string

  /** Until every fact extraction proposed after `message` is current in the end user's memory (or the timeout). */
  const landed = async (endUser: string, message: string) => {
    const deadline = Date.now() + timeout
    const proposal = await model.extracted(message, timeout).catch(() => undefined)
    if (proposal === undefined) return
    const wanted = [...proposal.facts, ...proposal.supersede.map((s) => s.text)]
    while (Date.now() < deadline) {
      const memory = await json(base, "GET", `/v1/memory?agent=${expert.agent}`, expert.key, undefined, { "x-end-user-id": endUser })
      const current = new Set((memory.facts as Array<{ text: string; superseded_at: string | null }>).filter((f) => f.superseded_at === null).map((f) => f.text))
      if (wanted.every((text) => current.has(text))) return
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  }

  const play = async (c: RecallCase): Promise<CaseResult> => {
    const endUser = `${options.tag}-${c.id}`
    for (const messages of c.sessions) {
      const id = await session(endUser)
      for (const message of messages) await say(endUser, id, message)
      if (options.memory) await landed(endUser, messages[messages.length - 1]!)
    }
    const answer = await say(endUser, await session(endUser), c.question)
    return { id: c.id, category: c.category, contradicted: c.stale !== undefined, correct: scoreAnswer(c, answer), answer }
  }

  const started = Date.now()
  const results: Array<CaseResult> = new Array(options.cases.length)
  let next = 0
  await Promise.all(Array.from({ length: Math.min(options.concurrency ?? 8, options.cases.length) }, async () => {
    while (next < options.cases.length) {
      const i = next++
      results[i] = await play(options.cases[i]!)
    }
  }))
  const contradicted = results.filter((r) => r.contradicted)
  return {
    results,
    turns,
    recall: results.filter((r) => r.correct).length / results.length,
    contradictedRecall: contradicted.length === 0 ? NaN : contradicted.filter((r) => r.correct).length / contradicted.length,
    wallSeconds: (Date.now() - started) / 1000
  }
}
