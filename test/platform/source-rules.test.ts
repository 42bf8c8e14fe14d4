import { assert, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"

/**
 * Rules on the sources that the compiler does not check (issue 49).
 *
 * No `as any` in src/ (item 3). Where a library's types cannot say what the code knows (a class whose static
 * schema is redefined, Node's lookup callback with `all`), the cast names its target type (`as unknown as T`) and a
 * comment says why, so the compiler still checks everything around it.
 */
const sources = (dir: string): Array<string> =>
  Fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = Path.join(dir, entry.name)
    return entry.isDirectory() ? sources(path) : /\.tsx?$/.test(entry.name) ? [path] : []
  })

/**
 * Every name has one home (item 2): no module re-exports another's names, so a reader finds a name where it is
 * declared and an import says where that is. The one exception is the typed client's entry point (`src/client.ts`),
 * the package's public face, which gathers what its callers import.
 */
const REEXPORT = /^export (type )?(\*|\{[^}]*\}) from /m

/**
 * No two folders of src/ import each other, even through others (item 2): dependency-cruiser checks cycles between
 * modules and the order of the layers, but two folders of one layer could still lean on each other module by module.
 * Type-only imports count, as they do for the layers.
 */
const IMPORT = /^(?:import|export)\b[^"\n]*?\bfrom "(\.[^"]+)"/gm
const folderOf = (file: string) => Path.relative("src", file).split(Path.sep)
const folderGraph = () => {
  const graph = new Map<string, Set<string>>()
  for (const file of sources("src")) {
    const [from, ...rest] = folderOf(file)
    if (rest.length === 0) continue
    for (const match of Fs.readFileSync(file, "utf8").matchAll(IMPORT)) {
      const [to, ...inside] = folderOf(Path.join(Path.dirname(file), match[1]!))
      if (inside.length === 0 || to === from || to === "..") continue
      graph.set(from!, (graph.get(from!) ?? new Set()).add(to!))
    }
  }
  return graph
}
/** Every folder from which `start` is reached again, with the path: one line per cycle found. */
const cyclesOf = (graph: Map<string, Set<string>>) =>
  [...graph.keys()].flatMap((start) => {
    const seen = new Set<string>()
    const walk = (folder: string, path: Array<string>): Array<string> =>
      [...(graph.get(folder) ?? [])].flatMap((next) => {
        if (next === start) return [[...path, next].join(" -> ")]
        if (seen.has(next)) return []
        seen.add(next)
        return walk(next, [...path, next])
      })
    return walk(start, [start]).slice(0, 1)
  })

/**
 * Every rule of a domain in one home (item 2): each domain folder of src/ has a `Policy.ts` that names who may reach
 * what (the checks, and the partition its repository filters by). Not domains, so no Policy:
 * - platform: the mechanism itself (`platform/Policy.ts`) and the plumbing every domain shares; it owns no rows.
 * - runtime: the engine runs what a domain's rules already let through (the agent, the payer's partition handed to it).
 * - mcp: a second door onto the domains' services, whose rules it goes through; it owns no rows of its own.
 */
const NOT_DOMAINS = new Set(["platform", "runtime", "mcp"])

/**
 * Types from the contract to the row (item 1): a service or repository takes a branded id (`FileId`, `RunId`, …,
 * made by `prefixedId` in platform/Ids.ts), not a bare `string`, so the compiler refuses one kind of id where another
 * is wanted. Counted: positional parameters named `id` or `…Id` typed `string`, in the modules that declare a
 * service or port (`Effect.Service`, `Context.Tag`) and in the repositories (`Repo.ts`, `…Repo.ts`). Not ids of ours,
 * so not counted: the names below, which are strings minted elsewhere. None is left (session 27): the budget is 0.
 */
const NOT_OUR_IDS = new Set([
  "endUserId", // the caller's own name for its user (`X-End-User-Id`): any string it chooses
  "accessKeyId", // the object store's credential
  "requestId", // an HTTP request's
  "toolCallId", // the model's name for one call
  "traceId", // OpenTelemetry's hex ids (a run's is derived from its run id: `traceIdOf`)
  "spanId",
  "parentSpanId",
  "holdId", // a hold is named by its run's charge key (the run's id, or a session turn's key), not an id of its own
  "modelId" // a provider's model name
])
const BARE_ID_BUDGET = 0
const ID_PARAMETER = /[(,]\s*(\w*Id|id)\??: string\b/g
const SERVICE = /Effect\.Service<|Context\.Tag\(|Context\.GenericTag\b/
const serviceOrRepository = (file: string, text: string) => /(^|\/)(\w*Repo)\.ts$/.test(file) || SERVICE.test(text)
const idParametersIn = (text: string) =>
  [...text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/\/\/.*$/gm, "").matchAll(ID_PARAMETER)]
    .filter((match) => !NOT_OUR_IDS.has(match[1]!))
    .map((match) => match[0].replace(/^[(,]\s*/, ""))
const bareIdParameters = () =>
  sources("src").flatMap((file) => {
    const text = Fs.readFileSync(file, "utf8")
    return serviceOrRepository(file, text) ? idParametersIn(text).map((parameter) => `${file}: ${parameter}`) : []
  })

/**
 * Real waits in test/ stay within their budget (item 4): a fixed pause costs its whole length every run and guesses
 * how long the machine takes, so a test waits for an event, polls a state (`pollUntil`/`pollPromise`, which end as
 * soon as it holds), or moves the `TestClock` (docs/testing.md, "Time"). What stays is `realWait(ms)`, only where a
 * test must let real time pass that nothing can be read for: a lifetime a server keeps on its wall clock and that
 * cannot be tried without using it up, or a window in which something must NOT happen. Each is called directly (no
 * helper hides how often) and says why at its site.
 *
 * Every other timer in test/ (`setTimeout(`, `Effect.sleep(`, a `sleep(` of its own) is a real wait in disguise
 * unless it is listed in `TIMERS` with why it is not one. Not counted: `test/support/Poll.ts`, the one home of the
 * pause between reads; and the fault checker (`test/support/Faults.ts`, `test/cluster/faults.test.ts`, issue 42, run
 * only in its own CI step), whose pauses are the faults' own schedule (load served between faults, a runner held
 * paused for 9 s), the scenario it injects rather than a wait for a state.
 */
const REAL_WAIT_BUDGET = 12
const NOT_COUNTED = new Set([
  "test/support/Poll.ts",
  "test/support/Faults.ts",
  "test/cluster/faults.test.ts",
  // This rule, which names what it counts.
  "test/platform/source-rules.test.ts"
])
const TIMER = /\bsetTimeout\(|\bEffect\.sleep\(|\bsleep\(/
/** Timers that are not waits, by file and a piece of their line, with why. */
const TIMERS: ReadonlyArray<{ readonly file: string; readonly line: string; readonly why: string }> = [
  { file: "test/support/MockUpstream.ts", line: "const sleep = ", why: "the fake upstream's pause between scripted writes" },
  { file: "test/support/MockUpstream.ts", line: "await sleep(write.pause)", why: "a slow model's stream, as a test scripts it; the test waits on the stream" },
  { file: "test/support/MockUpstream.ts", line: "await sleep(20)", why: "a cut stream's last write reaches the client before the socket drops" },
  { file: "test/support/RecallModel.ts", line: "const timer = setTimeout(", why: "a deadline for an extraction that never comes, cleared when it does" },
  { file: "test/support/Recall.ts", line: "setTimeout(resolve, 50)", why: "a poll in the recall driver, which bench/recall.ts loads outside vitest (Poll.ts needs it)" },
  { file: "test/billing/crash.test.ts", line: "setTimeout(r, 15_000)", why: "a bound raced against the warm-up's event, cleared when it comes" },
  { file: "test/security/edge.test.ts", line: "setTimeout(() => done(false), 15_000)", why: "a bound raced against the server closing the socket" },
  { file: "test/web/outbox.test.ts", line: "setTimeout(resolve, 0)", why: "lets the callbacks already due run: no time passes" },
  { file: "test/billing/run-payer.test.ts", line: "Effect.sleep(ENTITY_DEADLINE)", why: "a fake wallet's 12 s on the TestClock, moved by TestClock.adjust" },
  { file: "test/runs/outage-patience.test.ts", line: "Effect.sleep(\"50 seconds\")", why: "work in flight during an outage, on the TestClock, moved by TestClock.adjust" }
]

const testSources = () => sources("test").map((file) => file.split(Path.sep).join("/")).filter((file) => !NOT_COUNTED.has(file))
const linesOf = (file: string) => Fs.readFileSync(file, "utf8").split("\n").map((line, index) => ({ at: `${file}:${index + 1}`, line }))

describe("source rules", () => {
  it(`real waits in test/: at most ${REAL_WAIT_BUDGET}, each a direct realWait(ms), every other timer listed`, () => {
    const lines = testSources().flatMap((file) => linesOf(file).map((entry) => ({ ...entry, file })))
    const waits = lines.filter(({ line }) => /\brealWait\(/.test(line))
    // The count sees the waits at all (a wrong pattern would find none and pass).
    assert.isAbove(waits.length, 0)
    assert.isAtMost(waits.length, REAL_WAIT_BUDGET, waits.map(({ at, line }) => `${at}: ${line.trim()}`).join("\n"))
    // Called, never passed around or wrapped, so each site is one wait the count sees.
    const aliased = lines.filter(({ line }) => /\brealWait\b(?!\()/.test(line) && !/^import /.test(line.trim()))
    assert.deepStrictEqual(aliased.map(({ at }) => at), [])
    // Every real wait says why: a comment just above it, or on its line.
    const unexplained = waits.filter(({ at, file }) => {
      const index = Number(at.slice(file.length + 1)) - 1
      const around = linesOf(file).slice(Math.max(0, index - 3), index + 1).map(({ line }) => line)
      return !around.some((line) => /\/\/|\/\*|^\s*\*/.test(line))
    })
    assert.deepStrictEqual(unexplained.map(({ at }) => at), [])
    // Any other timer is listed, and every listed one is still there.
    const timers = lines.filter(({ line }) => TIMER.test(line.replace(/\/\/.*$/, "")) && !/^\s*\*/.test(line))
    const unlisted = timers.filter(({ file, line }) => !TIMERS.some((timer) => timer.file === file && line.includes(timer.line)))
    assert.deepStrictEqual(unlisted.map(({ at, line }) => `${at}: ${line.trim()}`), [])
    const stale = TIMERS.filter((timer) => !timers.some(({ file, line }) => timer.file === file && line.includes(timer.line)))
    assert.deepStrictEqual(stale, [])
  })


  it("every domain folder of src/ has its Policy module", () => {
    const domains = Fs.readdirSync("src", { withFileTypes: true }).filter((entry) => entry.isDirectory() && !NOT_DOMAINS.has(entry.name))
    assert.isAbove(domains.length, 15)
    const without = domains.filter((entry) => !Fs.existsSync(Path.join("src", entry.name, "Policy.ts"))).map((entry) => entry.name)
    assert.deepStrictEqual(without, [])
  })

  it("no `as any` in src/", () => {
    const found = sources("src").flatMap((file) =>
      Fs.readFileSync(file, "utf8").split("\n").flatMap((line, index) =>
        /\bas any\b/.test(line.replace(/\/\/.*$/, "").replace(/^\s*\*.*$/, "")) ? [`${file}:${index + 1}: ${line.trim()}`] : []
      )
    )
    assert.deepStrictEqual(found, [])
  })

  it("no re-exports in src/ but the client's entry point", () => {
    const found = sources("src").filter((file) => file !== Path.join("src", "client.ts") && REEXPORT.test(Fs.readFileSync(file, "utf8")))
    assert.deepStrictEqual(found, [])
  })

  it("no import cycle between folders of src/", () => {
    const graph = folderGraph()
    // The check sees the folders' imports at all (a wrong pattern would find nothing and pass).
    assert.isTrue(graph.get("sessions")?.has("runs"))
    assert.deepStrictEqual(cyclesOf(graph), [])
  })

  it("no service or repository takes a bare string for an id of ours, beyond what is left to brand", () => {
    const found = bareIdParameters()
    // The pattern sees parameters at all (a wrong one would count nothing and pass), and not the ids of others.
    assert.deepStrictEqual(idParametersIn("(partition: Partition, agentId: string,\n  id?: string, endUserId: string)"), ["agentId: string", "id?: string"])
    assert.isTrue(serviceOrRepository("src/x/Repo.ts", "") && serviceOrRepository("src/x/X.ts", "class X extends Effect.Service<X>()"))
    assert.isAtMost(found.length, BARE_ID_BUDGET, `${found.length} bare-string ids (budget ${BARE_ID_BUDGET}):\n${found.join("\n")}`)
  })
})
