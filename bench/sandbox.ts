/**
 * The embedded sandbox (`run_code`) as the build users run has it (`dist/`, so `npm run build` first): cold start (a
 * new contained guest process through its first Python call, Pyodide loaded; and the same for JavaScript), warm
 * `run_code` latency (a small call in a sandbox already loaded), and memory per warm sandbox (the guest processes'
 * RSS, and this process's own RSS growth, with N Python sandboxes alive, divided by N).
 *
 *   npm run build && npx tsx bench/sandbox.ts      # SANDBOX_BENCH_WARM=4 SANDBOX_BENCH_CALLS=50 to change the sizes
 *
 * A script, not a test: it prints medians and asserts nothing. It goes through the `Sandbox` port itself (no HTTP,
 * no model), so it measures the sandbox alone.
 */
import * as Fs from "node:fs"
import * as Os from "node:os"
import { ConfigProvider, Effect, Layer } from "effect"
import type * as SandboxModule from "../src/runtime/sandbox/Sandbox.js"
import { percentile } from "./support.js"

const { Sandbox } = (await import(new URL("../dist/runtime/sandbox/Sandbox.js", import.meta.url).href)) as typeof SandboxModule
const { WasmSandboxLive } = (await import(new URL("../dist/runtime/sandbox/WasmSandbox.js", import.meta.url).href)) as
  typeof import("../src/runtime/sandbox/WasmSandbox.js")
type SandboxInstance = SandboxModule.SandboxInstance

/** The resident memory of this process's children (each guest is one), in bytes. */
const childrenRss = () => {
  let total = 0
  for (const pid of Fs.readdirSync("/proc").filter((name) => /^\d+$/.test(name))) {
    try {
      const status = Fs.readFileSync(`/proc/${pid}/status`, "utf8")
      if (Number(/^PPid:\s+(\d+)/m.exec(status)?.[1]) !== process.pid) continue
      total += Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1] ?? 0) * 1024
    } catch {
      // gone meanwhile
    }
  }
  return total
}

const WARM = Number(process.env.SANDBOX_BENCH_WARM ?? 4)
const CALLS = Number(process.env.SANDBOX_BENCH_CALLS ?? 50)
const COLD = Number(process.env.SANDBOX_BENCH_COLD ?? 3)

const median = (values: Array<number>) => percentile([...values].sort((a, b) => a - b), 50)
const p95 = (values: Array<number>) => percentile([...values].sort((a, b) => a - b), 95)
const load = () => Os.loadavg().map((n) => n.toFixed(2)).join(" ")

const program = Effect.gen(function*() {
  const sandbox = yield* Sandbox
  const spec = { owner: { accountId: "bench", endUserId: "" }, env: {}, files: new Map(), packages: [], setupScript: "" }
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
  console.log(`cold start, Python (new guest process + Pyodide + first call): median ${median(coldPython).toFixed(0)} ms over ${COLD} [load ${load()}]`)
  console.log(`cold start, JavaScript (new guest process + QuickJS + first call): median ${median(coldJs).toFixed(0)} ms over ${COLD} [load ${load()}]`)

  const rssBefore = process.memoryUsage().rss
  const warm: Array<SandboxInstance> = []
  for (let i = 0; i < WARM; i++) {
    const instance = yield* sandbox.create(spec)
    yield* instance.run("python", "import json\nx = [i * i for i in range(1000)]\nlen(x)")
    warm.push(instance)
  }
  const rssAfter = process.memoryUsage().rss
  console.log(
    `memory per warm Python sandbox: ${(childrenRss() / WARM / 1024 / 1024).toFixed(0)} MiB RSS in its guest process, ` +
      `${((rssAfter - rssBefore) / WARM / 1024 / 1024).toFixed(1)} MiB in this process (${WARM} alive) [load ${load()}]`
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

const settings = ConfigProvider.fromJson({ SANDBOX_TIME_MS: 60_000, SANDBOX_LIVE_PER_ACCOUNT: WARM + 1, SANDBOX_LIVE_PER_END_USER: WARM + 1 })
Effect.runPromise(program.pipe(
  Effect.provide(WasmSandboxLive.pipe(Layer.provide(Layer.setConfigProvider(settings)))),
  Effect.scoped
)).then(
  () => process.exit(0),
  (error) => {
    console.error(error)
    process.exit(1)
  }
)
