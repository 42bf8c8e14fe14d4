import { CATEGORIES } from "../agents/Agent.js"

/**
 * The distiller's craft, as pure functions: check the materials, read them into key points, draft an agent from
 * them, read the creator's requests for changes, and word the answers. Everything here is deterministic, so a draft
 * is reproducible and grounded in the materials whatever model holds the conversation (docs/distillation.md).
 */

export interface Material {
  readonly filename: string
  readonly content: string
}

export interface Draft {
  readonly name: string
  readonly description: string
  readonly category: string
  readonly instructions: string
}

export const LIMITS = {
  materials: 20,
  /** Per file, in bytes of UTF-8 (200 KB). */
  fileBytes: 200_000,
  /** All files together, in bytes of UTF-8 (1 MB). */
  totalBytes: 1_000_000,
  filename: 200,
  topic: 500,
  message: 20_000,
  instructions: 20_000
} as const

const bytesOf = (text: string) => Buffer.byteLength(text, "utf8")

/** The first thing wrong with `materials`, as a message that says what to fix; undefined when they are fine. */
export const checkMaterials = (materials: ReadonlyArray<Material>): string | undefined => {
  if (materials.length === 0) return "materials: give at least one file ({filename, content})."
  if (materials.length > LIMITS.materials) {
    return `materials: at most ${LIMITS.materials} files per distillation; got ${materials.length}.`
  }
  let total = 0
  for (const [index, material] of materials.entries()) {
    const name = material.filename
    if (typeof name !== "string" || name.trim().length === 0 || name.length > LIMITS.filename) {
      return `materials[${index}].filename must be 1-${LIMITS.filename} characters.`
    }
    if (typeof material.content !== "string" || material.content.trim().length === 0) {
      return `materials[${index}] (${name}): the content is empty; send the file's text, not its path.`
    }
    const bytes = bytesOf(material.content)
    if (bytes > LIMITS.fileBytes) {
      return `materials[${index}] (${name}): ${bytes} bytes; each file may hold at most ${LIMITS.fileBytes} bytes (200 KB). ` +
        "Split it, or send the parts that matter."
    }
    total += bytes
  }
  if (total > LIMITS.totalBytes) {
    return `materials: ${total} bytes in all; at most ${LIMITS.totalBytes} bytes (1 MB) per distillation.`
  }
  return undefined
}

/** What the distiller takes from one file: its section headings and its key sentences. */
export interface Digest {
  readonly filename: string
  readonly bytes: number
  readonly headings: ReadonlyArray<string>
  readonly points: ReadonlyArray<string>
}

const POINTS_PER_FILE = 6
const MAX_POINT = 280

const clean = (text: string) =>
  text
    .replace(/!\[([^\]]*)\]\([^)]*\)/g, "$1")
    .replace(/\[([^\]]+)\]\([^)]*\)/g, "$1")
    .replace(/[*_`]{1,3}([^*_`]+)[*_`]{1,3}/g, "$1")
    .replace(/\s+/g, " ")
    .trim()

const clip = (text: string, max: number) => text.length <= max ? text : `${text.slice(0, max - 1).trimEnd()}…`

const wordsOf = (text: string): Array<string> => [...(text.toLowerCase().match(/[\p{L}\p{N}]{3,}/gu) ?? [])]

const HEADING = /^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$/
const LIST_ITEM = /^\s*(?:[-*+]|\d+[.)])\s+(.*)$/

/** Headings and key sentences of one file: the sentences that open a paragraph or share words with the topic. */
export const digest = (topic: string, material: Material): Digest => {
  const topicWords = new Set(wordsOf(topic))
  const lines = material.content.replace(/```[\s\S]*?```/g, "").split(/\r?\n/)
  const headings: Array<string> = []
  const candidates: Array<{ text: string; score: number; at: number }> = []
  let paragraph: Array<string> = []
  const flush = () => {
    if (paragraph.length === 0) return
    const text = clean(paragraph.join(" "))
    paragraph = []
    const sentences = text.split(/(?<=[.!?。！？])\s+/).filter((s) => s.length >= 12)
    sentences.forEach((sentence, i) => {
      const overlap = wordsOf(sentence).filter((word) => topicWords.has(word)).length
      candidates.push({ text: clip(sentence, MAX_POINT), score: overlap * 2 + (i === 0 ? 1 : 0), at: candidates.length })
    })
  }
  for (const line of lines) {
    const heading = HEADING.exec(line)
    if (heading) {
      flush()
      const title = clean(heading[1]!)
      if (title.length > 0 && headings.length < 12) headings.push(clip(title, 120))
      continue
    }
    const item = LIST_ITEM.exec(line)
    if (item) {
      flush()
      paragraph.push(item[1]!)
      flush()
      continue
    }
    if (line.trim().length === 0) flush()
    else paragraph.push(line.trim())
  }
  flush()
  const points = [...candidates]
    .sort((a, b) => b.score - a.score || a.at - b.at)
    .slice(0, POINTS_PER_FILE)
    .sort((a, b) => a.at - b.at)
    .map((c) => c.text)
  return { filename: material.filename, bytes: bytesOf(material.content), headings, points }
}

const CATEGORY_WORDS: Readonly<Record<string, ReadonlyArray<string>>> = {
  coding: ["code", "coding", "programming", "function", "api", "typescript", "javascript", "python", "software", "bug",
    "compiler", "git", "sql", "database", "developer", "algorithm", "library", "framework"],
  research: ["research", "study", "paper", "analysis", "experiment", "science", "scientific", "hypothesis", "survey",
    "evidence", "literature"],
  education: ["learn", "learning", "teach", "teaching", "course", "lesson", "student", "students", "exam", "curriculum",
    "tutorial", "school", "homework"],
  writing: ["write", "writing", "essay", "story", "novel", "copywriting", "blog", "grammar", "editing", "poem", "prose"],
  business: ["business", "sales", "marketing", "finance", "customer", "customers", "revenue", "strategy", "startup",
    "management", "pricing", "contract"],
  design: ["design", "ui", "ux", "color", "colour", "typography", "layout", "logo", "figma", "brand", "branding"],
  productivity: ["productivity", "schedule", "task", "tasks", "todo", "workflow", "meeting", "meetings", "habit",
    "planning", "calendar"],
  lifestyle: ["cooking", "recipe", "recipes", "travel", "fitness", "health", "tea", "coffee", "garden", "gardening",
    "fashion", "food", "wine", "sleep", "brewing"]
}

/** The category whose words the topic (three times over) and the materials use most; `other` when none. */
export const categoryOf = (topic: string, materials: ReadonlyArray<Material>): string => {
  const count = (words: ReadonlyArray<string>) => {
    const counts = new Map<string, number>()
    for (const word of words) counts.set(word, (counts.get(word) ?? 0) + 1)
    return counts
  }
  const inTopic = count([...wordsOf(topic), ...(topic.toLowerCase().match(/\b(ui|ux)\b/g) ?? [])])
  const inMaterials = count(materials.flatMap((m) => wordsOf(m.content.slice(0, 200_000))))
  let best = "other"
  let bestScore = 0
  for (const category of CATEGORIES) {
    const words = CATEGORY_WORDS[category] ?? []
    const score = words.reduce((sum, word) => sum + 3 * (inTopic.get(word) ?? 0) + (inMaterials.get(word) ?? 0), 0)
    if (score > bestScore) {
      best = category
      bestScore = score
    }
  }
  return best
}

const titleCase = (text: string) =>
  text.trim().replace(/\s+/g, " ").split(" ").map((word) => word.length === 0 ? word : word[0]!.toUpperCase() + word.slice(1)).join(" ")

export const nameOf = (topic: string) => {
  const title = clip(titleCase(topic), 90)
  return /\b(expert|assistant|guide|advisor|adviser|tutor|coach|bot)$/i.test(title) ? title : `${title} Expert`
}

const fileList = (names: ReadonlyArray<string>) =>
  names.length <= 5 ? names.join(", ") : `${names.slice(0, 5).join(", ")} and ${names.length - 5} more`

const KNOWLEDGE_BUDGET = 16_000

/** The first draft: named after the topic, categorised by its words, instructed with the materials' key points. */
export const firstDraft = (topic: string, materials: ReadonlyArray<Material>, digests: ReadonlyArray<Digest>): Draft => {
  const name = nameOf(topic)
  const files = digests.map((d) => d.filename)
  const description = clip(
    `Answers questions about ${topic.trim()}, grounded in ${files.length === 1 ? "one source file" : `${files.length} source files`}: ` +
      `${fileList(files)}.`,
    2000
  )
  const header = [
    `You are ${name}, an expert on ${topic.trim()}.`,
    "",
    "Ground every answer in the source materials summarised below and cite the file a fact comes from, like " +
      `"(source: ${files[0]})". When the materials do not cover a question, say so, and mark anything you add from ` +
      "general knowledge as such.",
    "",
    "## Source materials"
  ].join("\n")
  let knowledge = ""
  for (const d of digests) {
    const lines = [`### ${d.filename}`]
    if (d.headings.length > 0) lines.push(`Sections: ${d.headings.join("; ")}`)
    for (const point of d.points) lines.push(`- ${point} (${d.filename})`)
    if (d.headings.length === 0 && d.points.length === 0) lines.push("- (no text the distiller could read as sentences)")
    const section = `\n\n${lines.join("\n")}`
    if (knowledge.length + section.length > KNOWLEDGE_BUDGET) {
      knowledge += `\n\n(${digests.length - digests.indexOf(d)} more files are summarised in the distillation only.)`
      break
    }
    knowledge += section
  }
  return { name, description, category: categoryOf(topic, materials), instructions: `${header}${knowledge}` }
}

/** What a creator's message asks for. */
export interface Requests {
  readonly name?: string
  readonly description?: string
  readonly category?: string
  /** Text for the instructions: `instructions: ...` lines and every line that is not a request. */
  readonly notes: ReadonlyArray<string>
  readonly create: boolean
}

const FIELD = /^\s*(name|description|category|instructions?)\s*[:=]\s*(.*)$/i
const CREATE = /^\s*(?:please\s+)?create(?:\s+(?:it|the\s+agent|an?\s+agent|agent|the\s+expert|expert|the\s+draft|draft|now))*\s*(?:please)?\s*[.!]?\s*$/i

/**
 * Reads a message line by line: `name: ...`, `description: ...`, `category: ...` and `instructions: ...` are
 * requests; a line saying "create" (or "create the agent") asks for the agent draft; any other text is a note added
 * to the instructions.
 */
export const readMessage = (message: string): Requests => {
  const requests: { name?: string; description?: string; category?: string; notes: Array<string>; create: boolean } = {
    notes: [],
    create: false
  }
  let note: Array<string> = []
  const flushNote = () => {
    const text = note.join("\n").trim()
    if (text.length > 0) requests.notes.push(text)
    note = []
  }
  for (const line of message.split(/\r?\n/)) {
    const field = FIELD.exec(line)
    if (field) {
      flushNote()
      const key = field[1]!.toLowerCase()
      const value = field[2]!.trim()
      if (key === "name") requests.name = value
      else if (key === "description") requests.description = value
      else if (key === "category") requests.category = value.toLowerCase()
      else if (value.length > 0) requests.notes.push(value)
      continue
    }
    if (CREATE.test(line)) {
      flushNote()
      requests.create = true
      continue
    }
    note.push(line)
  }
  flushNote()
  return requests
}

const NOTES_HEADING = "## Notes from the creator"

/** `draft` with `requests` applied: what changed, and what could not be done (told in the answer, not failed). */
export const applyRequests = (draft: Draft, requests: Requests) => {
  const changed: Array<string> = []
  const refused: Array<string> = []
  let next = { ...draft }
  if (requests.name !== undefined) {
    if (requests.name.length < 1 || requests.name.length > 100) refused.push("the name must be 1-100 characters")
    else if (requests.name !== next.name) {
      next = { ...next, name: requests.name }
      changed.push(`name → ${requests.name}`)
    }
  }
  if (requests.description !== undefined) {
    if (requests.description.length > 2000) refused.push("the description may have at most 2000 characters")
    else if (requests.description !== next.description) {
      next = { ...next, description: requests.description }
      changed.push("description updated")
    }
  }
  if (requests.category !== undefined) {
    if (!(CATEGORIES as ReadonlyArray<string>).includes(requests.category)) {
      refused.push(`"${requests.category}" is not a category; use one of ${CATEGORIES.join(", ")}`)
    } else if (requests.category !== next.category) {
      next = { ...next, category: requests.category }
      changed.push(`category → ${requests.category}`)
    }
  }
  if (requests.notes.length > 0) {
    const additions = requests.notes.map((n) => `- ${n.replace(/\n/g, "\n  ")}`).join("\n")
    const instructions = next.instructions.includes(NOTES_HEADING)
      ? `${next.instructions.trimEnd()}\n${additions}`
      : `${next.instructions.trimEnd()}\n\n${NOTES_HEADING}\n${additions}`
    if (instructions.length > LIMITS.instructions) {
      refused.push(`the instructions would exceed ${LIMITS.instructions} characters, so the note was not added`)
    } else {
      next = { ...next, instructions }
      changed.push(`${requests.notes.length === 1 ? "a note" : `${requests.notes.length} notes`} added to the instructions`)
    }
  }
  return { draft: next, changed, refused }
}

const draftSummary = (draft: Draft, digests: ReadonlyArray<Digest>) => {
  const points = digests.flatMap((d) => d.points.slice(0, 2).map((p) => `"${clip(p, 100)}" (${d.filename})`)).slice(0, 4)
  return [
    `- Name: ${draft.name}`,
    `- Category: ${draft.category}`,
    `- Description: ${draft.description}`,
    `- Instructions: ${draft.instructions.length} characters, grounded in the materials` +
      (points.length > 0 ? `; among the key points: ${points.join("; ")}` : "")
  ].join("\n")
}

export const NEXT_STEPS = `Tell me what to change ("name: ...", "description: ...", "category: coding" — one of ` +
  `${CATEGORIES.join(", ")} — or any other text to add to the instructions). Say "create" when it is right, and I ` +
  "will create the agent draft for you."

/** The distiller's first answer (the builtin model's; a real model words its own). */
export const firstAnswer = (topic: string, digests: ReadonlyArray<Digest>, draft: Draft) => {
  const read = digests.map((d) => {
    const parts = []
    if (d.headings.length > 0) parts.push(`${d.headings.length} section${d.headings.length === 1 ? "" : "s"}`)
    parts.push(`${d.points.length} key point${d.points.length === 1 ? "" : "s"}`)
    return `${d.filename} (${parts.join(", ")})`
  })
  return [
    `I read ${digests.length === 1 ? "one file" : `${digests.length} files`} about "${topic.trim()}": ${read.join(", ")}.`,
    "",
    "Here is a first draft of the expert:",
    draftSummary(draft, digests),
    "",
    NEXT_STEPS
  ].join("\n")
}

/** What the answer says about the agent a message created or wrote to. */
export const agentLine = (agent: { identifier: string; created: boolean }) =>
  agent.created
    ? `I created the agent draft ${agent.identifier}. It is private until you publish it: try it with test_expert, ` +
      "then submit it with publish_expert."
    : `The agent ${agent.identifier} now has this draft (its draft only: published versions change through review).`

/** The distiller's answer to a later message. */
export const laterAnswer = (
  outcome: { changed: ReadonlyArray<string>; refused: ReadonlyArray<string> },
  draft: Draft,
  digests: ReadonlyArray<Digest>,
  agent: { identifier: string; created: boolean } | null,
  existing: string | null = null
) => {
  const lines: Array<string> = []
  lines.push(outcome.changed.length > 0 ? `Done: ${outcome.changed.join("; ")}.` : "Nothing in the draft changed.")
  if (outcome.refused.length > 0) lines.push(`I could not do everything: ${outcome.refused.join("; ")}.`)
  if (agent !== null) lines.push(agentLine(agent))
  lines.push("", "The draft now:", draftSummary(draft, digests), "")
  const target = agent?.identifier ?? existing
  lines.push(target === null ? NEXT_STEPS : `Keep asking for changes; say "create" again to write them to ${target}.`)
  return lines.join("\n")
}

const MATERIALS_IN_PROMPT = 48_000

/**
 * The distiller's system prompt for a model that writes its own answers: its task, the current draft, and the
 * materials (cut to a budget, so a large upload does not make every turn expensive).
 */
export const distillerPrompt = (topic: string, materials: ReadonlyArray<Material>, draft: Draft) => {
  const share = Math.max(1_000, Math.floor(MATERIALS_IN_PROMPT / Math.max(materials.length, 1)))
  const files = materials.map((m) =>
    `### ${m.filename}\n${m.content.length > share ? `${m.content.slice(0, share)}\n[... cut ...]` : m.content}`
  )
  return [
    `You are the platform's distiller. You help a creator turn source materials about "${topic.trim()}" into an AI ` +
      "expert: a name, a description, a category and instructions grounded in the materials, citing file names.",
    "The platform keeps the draft below and applies the creator's requests to it; describe the draft, point out what " +
      "the materials leave open, and tell the creator they can ask for changes or say \"create\".",
    "",
    "## Current draft",
    JSON.stringify(draft, null, 2),
    "",
    "## Materials",
    ...files
  ].join("\n")
}
