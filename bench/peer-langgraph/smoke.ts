/**
 * Smoke check of the peer: installs on demand, starts the LangGraph.js dev server, makes 5 stateless runs and 5 runs
 * on one thread (one at a time), prints their timings and the CPU the server's process tree spent, and stops it,
 * checking that no process of the tree is left.
 *
 *   npx tsx bench/peer-langgraph/smoke.ts
 */
import {
  createThread, ensureInstalled, processTree, startLangGraph, statelessRun, threadRun, treeCpu, type Timing
} from "./peer.ts"

const ms = (n: number) => (Number.isNaN(n) ? "-" : n.toFixed(1))
const row = (kind: string, i: number, t: Timing) =>
  `| ${kind} ${i + 1} | ${t.ok ? "ok" : `FAIL ${t.error ?? ""}`} | ${ms(t.firstEvent)} | ${ms(t.firstToken)} | ` +
  `${ms(t.lastToken)} | ${ms(t.total)} | ${ms(t.tail)} | ${t.events} |`

await ensureInstalled()
const started = performance.now()
const server = await startLangGraph()
console.log(`LangGraph dev server at ${server.base}, started in ${((performance.now() - started) / 1000).toFixed(1)} s`)
console.log(`process tree ${server.pids.join(" → ")}; serving HTTP: ${server.pid}`)
let failures = 0
try {
  console.log("\n| run | ok | first event ms | first token ms | last token ms | total ms | tail ms | events |")
  console.log("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
  const cpu0 = server.cpu()
  const serverCpu0 = treeCpu([server.pid])
  for (let i = 0; i < 5; i++) {
    const t = await statelessRun(server.base)
    if (!t.ok) failures++
    console.log(row("stateless", i, t))
  }
  const threadId = await createThread(server.base)
  for (let i = 0; i < 5; i++) {
    const t = await threadRun(server.base, threadId)
    if (!t.ok) failures++
    console.log(row("thread", i, t))
  }
  console.log(`\nCPU over the 10 runs: ${((server.cpu() - cpu0) * 1000 / 10).toFixed(1)} ms per run (whole tree), ` +
    `${((treeCpu([server.pid]) - serverCpu0) * 1000 / 10).toFixed(1)} ms per run (HTTP server process alone)`)
} finally {
  await server.stop()
}
const left = server.pids.filter((pid) => processTree(pid).length > 0)
console.log(`stopped; processes of the tree left: ${left.length === 0 ? "none" : left.join(", ")}`)
if (failures > 0 || left.length > 0) process.exitCode = 1
