/**
 * Per-request overhead (issue 28 item 2): the server's CPU time per request of the cheapest route, side by side in
 * one run, for a bare `node:http` server (bench/floor.ts, `GET /json`), a bare Effect `HttpApi` with our package
 * versions (bench/effect-floor.ts, `GET /json`) and Atrium from `dist/main.js` (`GET /v1/meters`, or --path), each
 * with the same bounded load (undici Pool to 127.0.0.1, --connections at once, --requests in all).
 *
 *   npm run build && npx tsx bench/overhead.ts [--requests 20000] [--connections 64] [--rounds 3] [--path /v1/meters]
 *     [--variants ENV=VALUE,...;...] [--header-variants NAME=VALUE,...;...] [--method GET] [--body '{"a":1}']
 *     [--out FILE.json]
 *
 * - CPU is the server process's utime + stime (/proc/PID/stat) over the measured requests, divided by them (it is
 *   less sensitive to the machine's other load than latency, and counts what the server's idle loops spend too,
 *   which is reported on its own line: CPU per second while nothing is asked).
 * - --rounds R: every server is measured once per round, in turn, after a warm-up of --requests / 4 requests before
 *   its first round; ratios are per round (ours over the Effect floor in the same round), then their median.
 * - --variants: extra Atrium processes, each with an environment of its own (`;` between variants, `,` between
 *   `NAME=VALUE`s of one).
 * - --header-variants: extra rows on the same Atrium process, each sending headers of its own (same syntax), e.g.
 *   `x-bench-off=edge;x-bench-off=accessLog+metrics`. The per-layer table of BENCHMARKS.md was measured so, with
 *   bench/overhead-switches.patch applied (it reads `x-bench-off` and turns those layers off for that request):
 *   the switches are not in the sources; apply the patch to a scratch copy of the tree, build it and run there.
 * - Atrium runs embedded (its own data directory), or in services mode when DATABASE_URL is set (REDIS_URL too),
 *   as bench/support.ts launches it. `LOG_LEVEL=warn`, as every bench.
 *
 * A script, not a test: it prints a Markdown table (stdout) and progress (stderr).
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { Pool } from "undici"
import { launchBenchPlatform, processCpu } from "./support.js"

const args = new Map<string, string>()
for (let i = 2; i < process.argv.length; i += 2) args.set(process.argv[i]!.replace(/^--/, ""), process.argv[i + 1]!)
const REQUESTS = Number(args.get("requests") ?? 20_000)
const CONNECTIONS = Number(args.get("connections") ?? 64)
const ROUNDS = Number(args.get("rounds") ?? 3)
const PATH = args.get("path") ?? "/v1/meters"
const METHOD = args.get("method") ?? "GET"
const BODY = args.get("body")
const OUT = args.get("out")
const pairs = (flag: string) =>
  (args.get(flag) ?? "").split(";").filter((v) => v.length > 0).map((spec) =>
    Object.fromEntries(spec.split(",").map((pair) => pair.split("=", 2) as [string, string]))
  )
const VARIANTS = pairs("variants")
const HEADER_VARIANTS = pairs("header-variants")
const ROOT = Path.resolve(import.meta.dirname, "..")
const SERVICES = process.env.DATABASE_URL !== undefined

const progress = (message: string) => console.error(`[overhead ${new Date().toISOString().slice(11, 19)}] ${message}`)
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

interface Server {
  readonly name: string
  readonly path: string
  readonly pid: number
  readonly base: string
  readonly headers?: Record<string, string>
  readonly stop: () => Promise<void>
}

/** A floor script (`node --import tsx`), up once it prints `listening <port>`. */
const startScript = (name: string, script: string): Promise<Server> =>
  new Promise((resolve, reject) => {
    const child = ChildProcess.spawn(process.execPath, ["--import", "tsx", script, "--port", "0"], {
      cwd: ROOT,
      stdio: ["ignore", "pipe", "inherit"]
    })
    let out = ""
    child.stdout.on("data", (chunk: Buffer) => {
      out += chunk.toString()
      const port = /listening (\d+)/.exec(out)?.[1]
      if (port !== undefined) {
        resolve({
          name,
          path: "/json",
          pid: child.pid!,
          base: `http://127.0.0.1:${port}`,
          stop: async () => {
            child.kill("SIGTERM")
            await new Promise((r) => child.once("exit", r))
          }
        })
      }
    })
    child.once("exit", (code) => reject(new Error(`${script} exited (${code}) before it listened`)))
  })

const startAtrium = async (name: string, env: Record<string, string>): Promise<Server> => {
  const platform = await launchBenchPlatform({
    env,
    // Many platforms start one after another on a loaded machine: their migrations may take minutes.
    startTries: 6000,
    ...(SERVICES ? { services: { adminUrl: process.env.DATABASE_URL!, redisUrl: process.env.REDIS_URL ?? "redis://127.0.0.1:6379" } } : {})
  })
  return { name, path: PATH, pid: platform.child.pid!, base: platform.base, stop: () => platform.stop() }
}

/** `n` requests, `CONNECTIONS` at a time; the server's CPU seconds over them, and the failures. */
const load = async (server: Server, n: number) => {
  const pool = new Pool(server.base, { connections: CONNECTIONS, pipelining: 1 })
  let next = 0
  let failed = 0
  const cpu0 = processCpu(server.pid)
  const started = performance.now()
  await Promise.all(Array.from({ length: CONNECTIONS }, async () => {
    while (next < n) {
      next++
      const response = await pool.request({
        path: server.path,
        method: METHOD as "GET",
        headers: { ...(BODY !== undefined ? { "content-type": "application/json" } : {}), ...server.headers },
        ...(BODY !== undefined ? { body: BODY } : {})
      })
      await response.body.dump()
      if (response.statusCode !== 200) failed++
    }
  }))
  const seconds = (performance.now() - started) / 1000
  const cpu = processCpu(server.pid) - cpu0
  await pool.close()
  return { cpu, seconds, failed }
}

/** CPU per second of a server nobody calls (its timers, polls and heartbeats). */
const idleRate = async (server: Server, seconds: number) => {
  const cpu0 = processCpu(server.pid)
  await sleep(seconds * 1000)
  return (processCpu(server.pid) - cpu0) / seconds
}

const median = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted.length === 0 ? NaN : sorted[Math.floor((sorted.length - 1) / 2)]!
}

const main = async () => {
  const servers: Array<Server> = []
  try {
    progress("starting the floors and the platform")
    servers.push(await startScript("node:http floor", "bench/floor.ts"))
    servers.push(await startScript("Effect floor", "bench/effect-floor.ts"))
    const atrium = await startAtrium("Atrium", {})
    servers.push(atrium)
    const describe = (variant: Record<string, string>) => Object.entries(variant).map(([k, v]) => `${k}=${v}`).join(" ")
    for (const headers of HEADER_VARIANTS) {
      servers.push({ ...atrium, name: `Atrium ${describe(headers)}`, headers, stop: async () => {} })
    }
    for (const variant of VARIANTS) {
      servers.push(await startAtrium(`Atrium ${describe(variant)}`, variant))
    }
    await sleep(3000)
    const idle = new Map<string, number>()
    for (const server of servers) {
      if (server.headers === undefined) idle.set(server.name, await idleRate(server, 3))
    }
    for (const server of servers) {
      progress(`warm-up ${server.name}`)
      await load(server, Math.ceil(REQUESTS / 4))
    }
    const perRequest = new Map<string, Array<number>>(servers.map((s) => [s.name, []]))
    const rps = new Map<string, Array<number>>(servers.map((s) => [s.name, []]))
    const loads: Array<number> = []
    for (let round = 1; round <= ROUNDS; round++) {
      for (const server of servers) {
        loads.push(Os.loadavg()[0]!)
        const result = await load(server, REQUESTS)
        if (result.failed > 0) progress(`${server.name}: ${result.failed} answers were not 200`)
        perRequest.get(server.name)!.push((result.cpu / REQUESTS) * 1000)
        rps.get(server.name)!.push(REQUESTS / result.seconds)
        progress(`round ${round} ${server.name}: ${((result.cpu / REQUESTS) * 1000).toFixed(4)} ms CPU/request, ${(REQUESTS / result.seconds).toFixed(0)} req/s`)
      }
    }
    const effect = perRequest.get("Effect floor")!
    const node = perRequest.get("node:http floor")!
    const rows = servers.map((server) => {
      const ms = perRequest.get(server.name)!
      const vsEffect = ms.map((v, i) => v / effect[i]!)
      const vsNode = ms.map((v, i) => v / node[i]!)
      return {
        server: server.name,
        route: `${METHOD} ${server.path}`,
        cpuMsPerRequest: ms,
        medianMs: median(ms),
        vsEffect: median(vsEffect),
        vsNode: median(vsNode),
        requestsPerSecond: median(rps.get(server.name)!),
        idleCpuPerSecond: idle.get(server.name) ?? NaN
      }
    })
    const header = `${ROUNDS} rounds × ${REQUESTS} requests, ${CONNECTIONS} connections (undici Pool), ` +
      `${SERVICES ? "services" : "embedded"} mode; load average (1 min) during the loads ${Math.min(...loads).toFixed(2)}–${Math.max(...loads).toFixed(2)}`
    console.log(header + "\n")
    console.log("| server | route | CPU ms/request (each round) | median | × Effect floor | × node:http | req/s | idle CPU s/s |")
    console.log("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for (const row of rows) {
      console.log(`| ${row.server} | ${row.route} | ${row.cpuMsPerRequest.map((v) => v.toFixed(4)).join(", ")} | ${row.medianMs.toFixed(4)} | ` +
        `${row.vsEffect.toFixed(2)} | ${row.vsNode.toFixed(2)} | ${row.requestsPerSecond.toFixed(0)} | ${row.idleCpuPerSecond.toFixed(3)} |`)
    }
    if (OUT !== undefined) Fs.writeFileSync(OUT, JSON.stringify({ header, rows }, null, 2))
  } finally {
    await Promise.all(servers.map((server) => server.stop()))
  }
}

main().then(() => process.exit(0), (error) => {
  console.error(error)
  process.exit(1)
})
