import * as Http from "node:http"
import type { AddressInfo } from "node:net"

/**
 * A fake OpenAI-compatible model for the recall set (issue 47 item 4; bench/recall.ts, test/memory/recall.test.ts):
 * a Chat Completions server (SSE, with usage) that follows its context honestly and deterministically. It is a
 * test fixture, never the product's model.
 *
 * - As the expert, it answers a question "... my X?" from what its prompt holds: the facts of the memory block
 *   rendered into its system prompt ("The user's X is Y"), else a statement "my X is Y" earlier in the same
 *   conversation, else "I don't know". Any other message is acknowledged. It calls no tools.
 * - As memory extraction (its system prompt is extraction's instructions), it reads the turns' messages (oldest
 *   first; the newest value of an attribute wins) for statements "my X is Y" / "my X is now Y" and proposes
 *   "The user's X is Y" as a new fact, or as a supersession of the remembered fact about X that says otherwise.
 *
 * Tokens are counted as a model would bill them, roughly: a token per 4 characters of every message and of the tool
 * definitions it was offered, and of its answer.
 */

export interface RecallModelStats {
  chatCalls: number
  chatInputTokens: number
  chatOutputTokens: number
  extractionCalls: number
  extractionInputTokens: number
  extractionOutputTokens: number
}

export interface Proposal {
  readonly facts: Array<string>
  readonly supersede: Array<{ id: string; text: string }>
}

export interface RecallModel {
  readonly baseUrl: string
  readonly stats: () => RecallModelStats
  readonly reset: () => void
  /**
   * Resolves with extraction's proposal once an extraction that read `message` was answered (its writes follow);
   * rejects after `timeoutMs`.
   */
  readonly extracted: (message: string, timeoutMs: number) => Promise<Proposal>
  readonly close: () => Promise<void>
}

/** The first line of extraction's instructions (src/memory/Extraction.ts), by which the fake knows it is extraction. */
const EXTRACTION_MARK = "You keep an assistant's long-term memory of one user."

const STATEMENT = /\bmy ([a-z][a-z' ]*?) is (?:now )?([^.!?,\n]+)/gi
const QUESTION = /\bmy ([a-z][a-z' ]*?)\?/i
const FACT_LINE = /^- \[([^\]]+)\] The user's ([a-z][a-z' ]*?) is (.+?) \(since [0-9-]+\)$/
const FACT_TEXT = (attribute: string, value: string) => `The user's ${attribute} is ${value}`

const textOf = (content: unknown): string =>
  typeof content === "string"
    ? content
    : Array.isArray(content)
    ? content.map((part) => (typeof part === "object" && part !== null && "text" in part ? String(part.text) : "")).join("")
    : ""

/** Every "my X is Y" of a text, in order. */
export const statementsOf = (text: string): Array<{ attribute: string; value: string }> =>
  [...text.matchAll(STATEMENT)].map((m) => ({ attribute: m[1]!.trim().toLowerCase(), value: m[2]!.trim() }))

/** The facts a system prompt's memory shows: id, attribute, value (newest first, as rendered). */
const factsOf = (system: string) =>
  system.split("\n").flatMap((line) => {
    const m = FACT_LINE.exec(line.trim())
    return m === null ? [] : [{ id: m[1]!, attribute: m[2]!.toLowerCase(), value: m[3]! }]
  })

const tokens = (chars: number) => Math.ceil(chars / 4)

const answerChat = (system: string, conversation: ReadonlyArray<{ role: string; text: string }>): string => {
  const last = [...conversation].reverse().find((m) => m.role === "user")?.text ?? ""
  const asked = QUESTION.exec(last)
  if (asked === null) return "Noted, thank you."
  const attribute = asked[1]!.trim().toLowerCase()
  // Memory first: the facts are rendered newest first, so the first one about X is the one in force.
  const fact = factsOf(system).find((f) => f.attribute === attribute)
  if (fact !== undefined) return `Your ${attribute} is ${fact.value}.`
  // Then what this conversation said (the newest statement wins).
  const said = conversation.filter((m) => m.role === "user" && m !== undefined).flatMap((m) => statementsOf(m.text))
    .filter((s) => s.attribute === attribute)
  if (said.length > 0) return `Your ${attribute} is ${said[said.length - 1]!.value}.`
  return `I don't know your ${attribute}.`
}

const answerExtraction = (system: string, transcript: string): Proposal => {
  // Extraction's transcript: the newest turn first, each "<message>\n\nThe assistant answered:\n<answer>".
  const turns = transcript.split("\n\n(An earlier turn:)\n").map((turn) => turn.split("\n\nThe assistant answered:\n")[0]!).reverse()
  const newest = new Map<string, string>()
  for (const turn of turns) for (const { attribute, value } of statementsOf(turn)) newest.set(attribute, value)
  const remembered = factsOf(system)
  const proposal: Proposal = { facts: [], supersede: [] }
  for (const [attribute, value] of newest) {
    const known = remembered.find((f) => f.attribute === attribute)
    if (known === undefined) proposal.facts.push(FACT_TEXT(attribute, value))
    else if (known.value !== value) proposal.supersede.push({ id: known.id, text: FACT_TEXT(attribute, value) })
  }
  return proposal
}

const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
  `data: ${JSON.stringify({ id: "chatcmpl-recall", object: "chat.completion.chunk", created: 0, model: "recall", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`

export const startRecallModel = async (): Promise<RecallModel> => {
  const empty = (): RecallModelStats => ({
    chatCalls: 0,
    chatInputTokens: 0,
    chatOutputTokens: 0,
    extractionCalls: 0,
    extractionInputTokens: 0,
    extractionOutputTokens: 0
  })
  let stats = empty()
  const answered: Array<{ transcript: string; proposal: Proposal }> = []
  const waiters = new Set<() => void>()

  const server = Http.createServer((req, res) => {
    let raw = ""
    req.setEncoding("utf8")
    req.on("data", (part) => (raw += part))
    req.on("end", () => {
      if (req.method !== "POST" || !req.url?.endsWith("/chat/completions")) {
        res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ error: { message: "not found" } }))
        return
      }
      const body = JSON.parse(raw) as { messages: Array<{ role: string; content: unknown }>; tools?: unknown }
      const messages = body.messages.map((m) => ({ role: m.role, text: textOf(m.content) }))
      const system = messages.filter((m) => m.role === "system").map((m) => m.text).join("\n")
      const inputChars = messages.reduce((sum, m) => sum + m.text.length, 0) + (body.tools === undefined ? 0 : JSON.stringify(body.tools).length)
      let text: string
      if (system.startsWith(EXTRACTION_MARK)) {
        const transcript = messages.filter((m) => m.role === "user").map((m) => m.text).join("\n")
        const proposal = answerExtraction(system, transcript)
        text = JSON.stringify({ facts: proposal.facts, supersede: proposal.supersede, blocks: [] })
        stats.extractionCalls++
        stats.extractionInputTokens += tokens(inputChars)
        stats.extractionOutputTokens += tokens(text.length)
        res.on("finish", () => {
          answered.push({ transcript, proposal })
          for (const wake of waiters) wake()
        })
      } else {
        text = answerChat(system, messages.filter((m) => m.role !== "system"))
        stats.chatCalls++
        stats.chatInputTokens += tokens(inputChars)
        stats.chatOutputTokens += tokens(text.length)
      }
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" })
      res.end(
        chunk({ role: "assistant", content: "" }) + chunk({ content: text }) + chunk({}, "stop") +
          `data: ${JSON.stringify({ id: "chatcmpl-recall", object: "chat.completion.chunk", created: 0, model: "recall", choices: [], usage: { prompt_tokens: tokens(inputChars), completion_tokens: tokens(text.length), total_tokens: tokens(inputChars) + tokens(text.length) } })}\n\n` +
          "data: [DONE]\n\n"
      )
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const port = (server.address() as AddressInfo).port

  const extracted = (message: string, timeoutMs: number) =>
    new Promise<Proposal>((resolve, reject) => {
      const check = () => {
        const found = answered.find((a) => a.transcript.includes(message))
        if (found === undefined) return false
        waiters.delete(check)
        clearTimeout(timer)
        resolve(found.proposal)
        return true
      }
      const timer = setTimeout(() => {
        waiters.delete(check)
        reject(new Error(`no extraction read ${JSON.stringify(message)} within ${timeoutMs} ms`))
      }, timeoutMs)
      if (!check()) waiters.add(check)
    })

  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    stats: () => ({ ...stats }),
    reset: () => {
      stats = empty()
    },
    extracted,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
}

/** The providers setting (docs/models.md) naming the fake as `recall/recall`, priced so extraction has a ledger line. */
export const recallProviders = (baseUrl: string) =>
  JSON.stringify({
    providers: [{
      id: "recall",
      kind: "openai-chat",
      base_url: baseUrl,
      api_key: "recall-fake",
      models: [{ id: "recall", input_per_1k: "0.001", output_per_1k: "0.002", context_window: 128000, capabilities: ["tools"] }]
    }]
  })
