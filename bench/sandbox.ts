/**
 * The embedded sandbox (`run_code`): cold start (a new sandbox through its first Python call, Pyodide loaded in a
 * fresh worker; and the same for JavaScript), warm `run_code` latency (a small call in a sandbox already loaded), and
 * memory per warm sandbox (process RSS growth with N Python sandboxes alive, divided by N).
 *
 *   npx tsx bench/sandbox.ts            # SANDBOX_BENCH_WARM=4 SANDBOX_BENCH_CALLS=50 to change the sizes
 *
 * A script, not a test: it prints medians and asserts nothing. It goes through the `Sandbox` port itself (no HTTP,
 * no model), so it measures the sandbox alone.
 */
import * as Os from "node:os"
import { Effect, Option } from "effect"
import type { SandboxInstance } from "../src/runtime/sandbox/Sandbox.js"
import { make } from "../src/runtime/sandbox/WasmSandbox.js"
import { percentile } from "./support.js"

const WARM = Number(process.env.SANDBOX_BENCH_WARM ?? 4)
const CALLS = Number(process.env.SANDBOX_BENCH_CALLS ?? 50)
const COLD = Number(process.env.SANDBOX_BENCH_COLD ?? 3)

const median = (values: Array<number>) => percentile([...values].sort((a, b) => a - b), 50)
const p95 = (values: Array<number>) => percentile([...values].sort((a, b) => a - b), 95)
const load = () => Os.loadavg().map((n) => n.toFixed(2)).join(" ")

const program = Effect.gen(function*() {
  const sandbox = yield* make({
    timeMs: 60_000,
    memoryBytes: 256 * 1024 * 1024,
    outputBytes: 1_000_000,
    fileBytes: 10 * 1024 * 1024,
    maxFiles: 1000
  }, Option.none())
  const spec = { env: {}, files: new Map(), packages: [], setupScript: "" }
  const ms = (start: bigint) => Number(process.hrtime.bigint() - start) / 1e6

  console.log(`load average before: ${load()} (${Os.cpus().length} cores)`)
  const coldPython: Array<number> = []
  const coldJs: Array<number> = []
  for (let i = 0; i < COLD; i++) {
    let start = process.hrtime.bigint()
    const py = yield* sandbox.create(spec)
    yield* py.run("python", "1 + 1")
    coldPython.push(ms(start))
    yield* py.close
    start = process.hrtime.bigint()
    const js = yield* sandbox.create(spec)
    yield* js.run("javascript", "1 + 1")
    coldJs.push(ms(start))
    yield* js.close
  }
  console.log(`cold start, Python (new worker + Pyodide + first call): median ${median(coldPython).toFixed(0)} ms over ${COLD} [load ${load()}]`)
  console.log(`cold start, JavaScript (new worker + QuickJS + first call): median ${median(coldJs).toFixed(0)} ms over ${COLD} [load ${load()}]`)

  const rssBefore = process.memoryUsage().rss
  const warm: Array<SandboxInstance> = []
  for (let i = 0; i < WARM; i++) {
    const instance = yield* sandbox.create(spec)
    yield* instance.run("python", "import json\nx = [i * i for i in range(1000)]\nlen(x)")
    warm.push(instance)
  }
  const rssAfter = process.memoryUsage().rss
  console.log(
    `memory per warm Python sandbox: ${((rssAfter - rssBefore) / WARM / 1024 / 1024).toFixed(0)} MiB RSS (${WARM} alive) [load ${load()}]`
  )

  for (const [language, code] of [["python", "sum(x) + 1"], ["javascript", "[1, 2, 3].map((n) => n * 2).length"]] as const) {
    const latencies: Array<number> = []
    const instance = warm[0]!
    yield* instance.run(language, code)
    for (let i = 0; i < CALLS; i++) {
      const start = process.hrtime.bigint()
      yield* instance.run(language, code)
      latencies.push(ms(start))
    }
    console.log(
      `warm run_code, ${language}: median ${median(latencies).toFixed(2)} ms, p95 ${p95(latencies).toFixed(2)} ms over ${CALLS} [load ${load()}]`
    )
  }
  yield* Effect.forEach(warm, (instance) => instance.close, { discard: true })
})

Effect.runPromise(program).then(
  () => process.exit(0),
  (error) => {
    console.error(error)
    process.exit(1)
  }
)
