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
 * so not counted: the names below, which are strings minted elsewhere. The budget is what is left: it may only go
 * down, and 0 is the goal.
 */
const NOT_OUR_IDS = new Set([
  "endUserId", // the caller's own name for its user (`X-End-User-Id`): any string it chooses
  "accessKeyId", // the object store's credential
  "requestId", // an HTTP request's
  "toolCallId", // the model's name for one call
  "spanId", // OpenTelemetry's hex ids
  "parentSpanId",
  "modelId" // a provider's model name
])
const BARE_ID_BUDGET = 265
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

describe("source rules", () => {
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
