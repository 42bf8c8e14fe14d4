/**
 * Where a server's CPU went: reads the `.cpuprofile` files that `BENCH_NODE_ARGS="--cpu-prof --cpu-prof-dir=DIR"`
 * left (one per process) and prints the self time of busy samples grouped by where the code lives (the `effect`
 * runtime, each `@effect/*` package, other packages, Node internals, garbage collection, our code by folder), then the
 * top functions. Issue 45 asks, for each missed engine target, how much of the cost is the Effect runtime and how much
 * is ours: this is the tool that answers it.
 *
 *   npx tsx bench/profile.ts DIR [--top 25]
 */
import * as Fs from "node:fs"
import * as Path from "node:path"

interface Node {
  readonly id: number
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number }
}
interface Profile {
  readonly nodes: ReadonlyArray<Node>
  readonly samples: ReadonlyArray<number>
  readonly timeDeltas: ReadonlyArray<number>
}

const args = process.argv.slice(2)
const dir = args[0]
if (dir === undefined) throw new Error("usage: npx tsx bench/profile.ts DIR [--top 25]")
const topIndex = args.indexOf("--top")
const TOP = topIndex >= 0 ? Number(args[topIndex + 1]) : 25

/** The bucket a frame's self time belongs to. */
const bucketOf = (url: string, name: string): string => {
  if (name === "(garbage collector)") return "garbage collection"
  if (name === "(program)") return "(program: native, outside JavaScript)"
  if (url === "") return name.startsWith("(") ? name : "native / builtins"
  if (url.startsWith("node:")) return "node internals"
  const nm = url.lastIndexOf("node_modules/")
  if (nm >= 0) {
    const rest = url.slice(nm + "node_modules/".length).split("/")
    const pkg = rest[0]!.startsWith("@") ? `${rest[0]}/${rest[1]}` : rest[0]!
    return pkg === "effect" ? "effect (runtime)" : pkg
  }
  const dist = url.indexOf("/dist/")
  if (dist >= 0) return `ours: ${url.slice(dist + 6).split("/").slice(0, -1).join("/") || "."}`
  return `other: ${Path.basename(url)}`
}

const bySelf = new Map<string, number>()
const byFunction = new Map<string, number>()
let total = 0
let idle = 0
for (const file of Fs.readdirSync(dir).filter((f) => f.endsWith(".cpuprofile"))) {
  const profile = JSON.parse(Fs.readFileSync(Path.join(dir, file), "utf8")) as Profile
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]))
  profile.samples.forEach((id, i) => {
    const node = nodes.get(id)!
    const micros = profile.timeDeltas[i] ?? 0
    const { functionName, lineNumber, url } = node.callFrame
    if (functionName === "(idle)") {
      idle += micros
      return
    }
    total += micros
    const bucket = bucketOf(url, functionName)
    bySelf.set(bucket, (bySelf.get(bucket) ?? 0) + micros)
    const where = url === "" ? "" : ` ${url.replace(/^.*node_modules\//, "").replace(/^.*\/dist\//, "dist/")}:${lineNumber + 1}`
    const key = `${functionName || "(anonymous)"}${where}`
    byFunction.set(key, (byFunction.get(key) ?? 0) + micros)
  })
}

const pct = (n: number) => `${((100 * n) / total).toFixed(1)}%`
console.log(`busy ${(total / 1e6).toFixed(2)} s, idle ${(idle / 1e6).toFixed(2)} s\n`)
console.log("| where the code lives | self time |\n| --- | ---: |")
for (const [bucket, micros] of [...bySelf].sort((a, b) => b[1] - a[1])) {
  if (micros / total >= 0.002) console.log(`| ${bucket} | ${pct(micros)} |`)
}
const sumOf = (test: (bucket: string) => boolean) => [...bySelf].filter(([bucket]) => test(bucket)).reduce((sum, [, micros]) => sum + micros, 0)
console.log(`\nours in all: ${pct(sumOf((b) => b.startsWith("ours:")))}; effect and @effect/* in all: ${pct(sumOf((b) => b.startsWith("effect") || b.startsWith("@effect/")))}`)
console.log(`\ntop ${TOP} functions by self time:`)
for (const [fn, micros] of [...byFunction].sort((a, b) => b[1] - a[1]).slice(0, TOP)) console.log(`${pct(micros).padStart(6)}  ${fn}`)
