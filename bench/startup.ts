/**
 * Start-up and idle memory of the compiled build (`npm start`: node dist/main.js), embedded mode (PGlite in a data
 * directory, in-memory store), as an operator meets it. Measures:
 *   - the first start on an empty DATA_DIR (PGlite initialised, every migration applied), spawn to healthy;
 *   - restarts on that existing DATA_DIR (the start that matters day to day), spawn to healthy;
 *   - resident memory once idle (`IDLE_SECONDS` after healthy, default 10).
 * Targets (issue 17): restart ≤ 3 s, idle RSS ≤ 300 MB. Run `npm run build` first.
 *
 *   npx tsx bench/startup.ts            # RESTARTS=3 IDLE_SECONDS=10 by default
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Os from "node:os"
import * as Path from "node:path"
import { call, freePort, platformNodeArgs } from "./support.js"

const root = Path.resolve(import.meta.dirname, "..")
const entry = Path.join(root, "dist", "main.js")
const restarts = Number(process.env.RESTARTS ?? 3)
const idleSeconds = Number(process.env.IDLE_SECONDS ?? 10)

const rssMb = (pid: number) => {
  const line = Fs.readFileSync(`/proc/${pid}/status`, "utf8").split("\n").find((l) => l.startsWith("VmRSS:"))
  return Number(line?.split(/\s+/)[1]) / 1024
}

const load = () => Os.loadavg().map((n) => n.toFixed(2)).join(" ")

const startOnce = async (dataDir: string, measureIdle: boolean) => {
  const port = await freePort()
  const env: Record<string, string> = { ...(process.env as Record<string, string>) }
  delete env.DATABASE_URL
  delete env.REDIS_URL
  Object.assign(env, { PORT: String(port), HOST: "127.0.0.1", DATA_DIR: dataDir, LOG_LEVEL: "warn" })
  const started = performance.now()
  const child = ChildProcess.spawn(process.execPath, [...platformNodeArgs(), entry], { cwd: root, env, stdio: "inherit" })
  const exited = new Promise((resolve) => child.once("exit", resolve))
  const agent = new Http.Agent()
  const base = `http://127.0.0.1:${port}`
  try {
    while (true) {
      if (child.exitCode !== null) throw new Error("the platform exited before it was healthy")
      if (performance.now() - started > 120_000) throw new Error("the platform did not become healthy in 120 s")
      const up = await call(agent, base, "GET", "/api/health").then((r) => r.status === 200, () => false)
      if (up) break
      await new Promise((r) => setTimeout(r, 20))
    }
    const healthyMs = performance.now() - started
    const atHealthy = rssMb(child.pid!)
    let idle = NaN
    if (measureIdle) {
      await new Promise((r) => setTimeout(r, idleSeconds * 1000))
      idle = rssMb(child.pid!)
    }
    return { healthyMs, atHealthy, idle }
  } finally {
    agent.destroy()
    child.kill("SIGTERM")
    await exited
  }
}

if (!Fs.existsSync(entry)) {
  console.error(`${entry} is missing: run \`npm run build\` first.`)
  process.exit(1)
}
const dataDir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "atrium-startup-"))
try {
  console.log(`node ${process.version}, ${Os.cpus().length} cores; load average before: ${load()}`)
  const first = await startOnce(dataDir, false)
  console.log(
    `first start (empty DATA_DIR, migrations): healthy in ${(first.healthyMs / 1000).toFixed(2)} s, ` +
      `RSS ${first.atHealthy.toFixed(0)} MB; load ${load()}`
  )
  const times: Array<number> = []
  for (let i = 0; i < restarts; i++) {
    const run = await startOnce(dataDir, i === restarts - 1)
    times.push(run.healthyMs)
    console.log(
      `restart ${i + 1} (existing DATA_DIR): healthy in ${(run.healthyMs / 1000).toFixed(2)} s, ` +
        `RSS at healthy ${run.atHealthy.toFixed(0)} MB` +
        (Number.isNaN(run.idle) ? "" : `, idle after ${idleSeconds} s ${run.idle.toFixed(0)} MB`) + `; load ${load()}`
    )
  }
  times.sort((a, b) => a - b)
  console.log(`restart median: ${(times[Math.floor(times.length / 2)]! / 1000).toFixed(2)} s (target ≤ 3 s)`)
} finally {
  Fs.rmSync(dataDir, { recursive: true, force: true })
}
