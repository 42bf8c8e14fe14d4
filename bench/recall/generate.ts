/**
 * Writes bench/recall/cases.jsonl, the recall set of issue 47 item 4 (bench/recall.ts): 200 cases, each a fact an end
 * user states in session 1 and asks for in their last session, with 0-2 other facts beside it; 56 of them (28%) are
 * contradicted in a session between, and the newer value is the right answer. Deterministic (a seeded generator), so
 * the committed file is what this prints:
 *
 *   npx tsx bench/recall/generate.ts [--cases 200] [--seed 47]
 *
 * Each case: {id, category, attribute, sessions: [[message, ...], ...], question, expected, stale?}. `stale` is the
 * contradicted value, which the answer must not give. Every message ends with a reference "(ref …)" unique in the set,
 * by which the harness tells which extraction read it.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`)
  return i >= 0 ? Number(process.argv[i + 1]) : fallback
}
const CASES = arg("cases", 200)
let seed = arg("seed", 47)
/** mulberry32: small, seeded, good enough to shuffle words. */
const random = () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}
const pick = <A>(items: ReadonlyArray<A>): A => items[Math.floor(random() * items.length)]!

const NAMES = ["Ada", "Bruno", "Chiara", "Dmitri", "Elif", "Farah", "Goran", "Hana", "Ines", "Jonas", "Kenji", "Lena", "Mateo", "Nadia", "Oskar", "Priya", "Quentin", "Rosa", "Sven", "Tamar", "Umar", "Vera", "Wen", "Ximena", "Yusuf", "Zofia"]
const PETS = ["Biscuit", "Pepper", "Miso", "Rex", "Luna", "Tofu", "Nugget", "Pixel", "Waffles", "Juniper", "Basil", "Comet"]
const CITIES = ["Lisbon", "Oslo", "Nairobi", "Montreal", "Kyoto", "Valparaiso", "Tbilisi", "Ghent", "Porto", "Hobart", "Cusco", "Tallinn", "Accra", "Bergen", "Leipzig", "Medellin"]
const MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"]
const date = (year: number) => `${1 + Math.floor(random() * 28)} ${pick(MONTHS)} ${year + Math.floor(random() * 3)}`

/** attribute, category, values (a thunk where they are drawn afresh). */
const ATTRIBUTES: ReadonlyArray<{ attribute: string; category: string; value: () => string }> = [
  { attribute: "partner's name", category: "name", value: () => pick(NAMES) },
  { attribute: "manager's name", category: "name", value: () => pick(NAMES) },
  { attribute: "best friend's name", category: "name", value: () => pick(NAMES) },
  { attribute: "daughter's name", category: "name", value: () => pick(NAMES) },
  { attribute: "dog's name", category: "name", value: () => pick(PETS) },
  { attribute: "cat's name", category: "name", value: () => pick(PETS) },
  { attribute: "favourite colour", category: "preference", value: () => pick(["teal", "ochre", "crimson", "lavender", "forest green", "navy blue", "mustard yellow", "coral"]) },
  { attribute: "favourite food", category: "preference", value: () => pick(["ramen", "paella", "pierogi", "shakshuka", "pho", "risotto", "jollof rice", "tacos al pastor"]) },
  { attribute: "preferred programming language", category: "preference", value: () => pick(["Rust", "Haskell", "Elixir", "Kotlin", "OCaml", "Zig", "Clojure", "Swift"]) },
  { attribute: "favourite band", category: "preference", value: () => pick(["Radiohead", "Khruangbin", "Daft Punk", "Fleetwood Mac", "Bonobo", "ABBA", "Tinariwen", "Portishead"]) },
  { attribute: "preferred editor", category: "preference", value: () => pick(["Neovim", "Emacs", "Helix", "Zed", "Sublime Text", "Kakoune"]) },
  { attribute: "favourite drink", category: "preference", value: () => pick(["oolong tea", "flat white", "mate", "kombucha", "horchata", "espresso tonic"]) },
  { attribute: "shoe size", category: "number", value: () => String(36 + Math.floor(random() * 12)) },
  { attribute: "employee number", category: "number", value: () => `E${10000 + Math.floor(random() * 89999)}` },
  { attribute: "apartment number", category: "number", value: () => String(100 + Math.floor(random() * 900)) },
  { attribute: "locker number", category: "number", value: () => String(1000 + Math.floor(random() * 9000)) },
  { attribute: "monthly budget", category: "number", value: () => `${(5 + Math.floor(random() * 60)) * 100} euros` },
  { attribute: "team size", category: "number", value: () => `${3 + Math.floor(random() * 40)} people` },
  { attribute: "home city", category: "place", value: () => pick(CITIES) },
  { attribute: "hometown", category: "place", value: () => pick(CITIES) },
  { attribute: "next holiday destination", category: "place", value: () => pick(CITIES) },
  { attribute: "office building", category: "place", value: () => `Building ${pick(["A", "B", "C", "D", "F", "K"])}${1 + Math.floor(random() * 9)}` },
  { attribute: "favourite cafe", category: "place", value: () => `${pick(["Blue", "Little", "Old", "Corner", "Copper"])} ${pick(["Kettle", "Fox", "Harbour", "Bean", "Lantern"])}` },
  { attribute: "birthday", category: "date", value: () => date(1980) },
  { attribute: "wedding anniversary", category: "date", value: () => date(2015) },
  { attribute: "project deadline", category: "date", value: () => date(2027) },
  { attribute: "dentist appointment", category: "date", value: () => date(2027) },
  { attribute: "flight date", category: "date", value: () => date(2027) }
]

const OPENERS = ["", "Hi! ", "Good morning. ", "Quick note: ", "By the way, ", "Something about me: ", "For the record, "]
const UPDATES = ["Update: ", "Things changed: ", "Correction: ", "Small news: ", "Heads up, "]
const QUESTIONS = ["What is my %?", "Do you remember my %?", "Remind me, what's my %?", "Can you tell me my %?"]

/** A value unlike `other`: neither holds the other (so an answer with one never contains the other by chance). */
const different = (draw: () => string, other: string) => {
  for (;;) {
    const value = draw()
    if (!value.toLowerCase().includes(other.toLowerCase()) && !other.toLowerCase().includes(value.toLowerCase())) return value
  }
}

const lines: Array<string> = []
const contradicted = Math.round(CASES * 0.28)
for (let i = 0; i < CASES; i++) {
  const id = `r${String(i + 1).padStart(3, "0")}`
  let turn = 0
  const ref = () => ` (ref ${id}-${++turn})`
  const target = ATTRIBUTES[i % ATTRIBUTES.length]!
  const others = ATTRIBUTES.filter((a) => a !== target).sort(() => random() - 0.5).slice(0, Math.floor(random() * 3))
  const value = target.value()
  const statements = [
    { attribute: target.attribute, value },
    ...others.map((o) => ({ attribute: o.attribute, value: o.value() }))
  ].sort(() => random() - 0.5)
  const sessions: Array<Array<string>> = [statements.map((s) => {
    const opener = pick(OPENERS)
    return `${opener}${opener.endsWith(", ") ? "my" : "My"} ${s.attribute} is ${s.value}.${ref()}`
  })]
  // Spread over the set rather than the first 28%: every third-or-so case, to the count.
  const isContradicted = Math.floor((i + 1) * contradicted / CASES) > Math.floor(i * contradicted / CASES)
  let expected = value
  if (isContradicted) {
    expected = different(target.value, value)
    const between = [`${pick(UPDATES)}my ${target.attribute} is now ${expected}.${ref()}`]
    if (random() < 0.5) between.unshift(`How are you today?${ref()}`)
    sessions.push(between)
  }
  const question = `${pick(QUESTIONS).replace("%", target.attribute)}${ref()}`
  lines.push(JSON.stringify({
    id,
    category: target.category,
    attribute: target.attribute,
    sessions,
    question,
    expected,
    ...(isContradicted ? { stale: value } : {})
  }))
}
const out = Path.resolve(import.meta.dirname, "cases.jsonl")
Fs.writeFileSync(out, lines.join("\n") + "\n")
console.error(`wrote ${lines.length} cases (${contradicted} contradicted) to ${out}`)
