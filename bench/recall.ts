/**
 * Memory's proof and price (issue 47 item 4): the recall set (bench/recall/cases.jsonl, 200 cases written by
 * bench/recall/generate.ts; 56 contradicted between sessions) played against the platform with an expert on a fake
 * OpenAI-compatible model that answers from its context (test/support/RecallModel.ts, a fixture, never the product's
 * default), through the harness the CI test uses (test/support/Recall.ts, test/memory/recall.test.ts). The platform
 * runs from `dist/main.js` (npm run build:server first).
 *
 *   npx tsx bench/recall.ts [--cases 200] [--concurrency 8] [--debounce "1 second"] [--out FILE.md]
 *   (services mode: DATABASE_URL=postgres://postgres@127.0.0.1:5432/test REDIS_URL=redis://127.0.0.1:6379 before it)
 *
 * What runs, on one platform process:
 * 1. warm-up: 10 cases (other end users) with memory and without, not counted.
 * 2. without memory: every case against an expert without memory (the same turns; the answer is "I don't know").
 * 3. with memory: every case against an expert with memory and extraction; a case's next session starts once its
 *    session's extraction landed (the fake model tells when it answered it, `GET /v1/memory` shows its facts).
 * Reported: recall (the answer gives the value, and for a contradicted fact the newer value and not the older),
 * per category and for contradicted facts; and the added cost per turn, with memory against without: server CPU
 * (/proc/<pid>/stat over the phase, less the process's idle CPU over the same wall time, measured for 5 s before),
 * model calls (extraction's, beside the turns' own) and tokens (the turns' input grows by the memory in the prompt;
 * extraction's input and output are its own). CPU figures of a loaded machine are rough: the lead's quiet-machine
 * run is the one BENCHMARKS.md quotes. A script, not a test: it asserts nothing; the report says whether recall
 * meets the 90% target.
 */
import * as Fs from "node:fs"
import * as Os from "node:os"
import { createRecallExpert, loadCases, type RecallReport, runRecall } from "../test/support/Recall.js"
import { type RecallModelStats, recallProviders, startRecallModel } from "../test/support/RecallModel.js"
import { launchBenchPlatform, processCpu } from "./support.js"

const flag = (name: string) => {
  const i = process.argv.indexOf(`--${name}`)
  return i >= 0 ? process.argv[i + 1] : undefined
}
const CASES = Number(flag("cases") ?? 200)
const CONCURRENCY = Number(flag("concurrency") ?? 8)
const DEBOUNCE = flag("debounce")
const OUT = flag("out")
const SERVICES = process.env.DATABASE_URL !== undefined
const ADMIN_URL = process.env.DATABASE_URL ?? ""
const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379"
const PHONE = "+15550047047"

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const pct = (x: number) => `${(x * 100).toFixed(1)}%`

interface Phase {
  readonly report: RecallReport
  readonly stats: RecallModelStats
  /** Server CPU seconds over the phase, less idle. */
  readonly cpu: number
  readonly rawCpu: number
}

const main = async () => {
  const model = await startRecallModel()
  const platform = await launchBenchPlatform({
    env: {
      SMS_TEST_OTP: `${PHONE}=123456`,
      SIGNUP_CREDITS: "1000000",
      MODEL_PROVIDERS: recallProviders(model.baseUrl),
      ...(DEBOUNCE === undefined ? {} : { MEMORY_EXTRACTION_DEBOUNCE: DEBOUNCE })
    },
    ...(SERVICES ? { services: { adminUrl: ADMIN_URL, redisUrl: REDIS_URL } } : {})
  })
  const { base, child } = platform
  try {
    const login = await fetch(`${base}/api/auth/login`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ phone: PHONE, code: "123456" })
    })
    const token = ((await login.json()) as { token: string }).token
    const withMemory = await createRecallExpert(base, token, true)
    const without = await createRecallExpert(base, token, false)
    const cases = loadCases(CASES)
    const warm = loadCases(10)
    process.stderr.write("warm-up\n")
    await runRecall({ base, expert: without, model, cases: warm, memory: false, tag: "warm-off", concurrency: CONCURRENCY })
    await runRecall({ base, expert: withMemory, model, cases: warm, memory: true, tag: "warm-on", concurrency: CONCURRENCY })
    // The extraction of the last questions: let it end before idle is measured.
    await quiet()

    const idleStart = processCpu(child.pid)
    await sleep(5_000)
    const idlePerSecond = (processCpu(child.pid) - idleStart) / 5

    /** Until extraction calls stop coming (the questions' own extractions end after the last answer). */
    async function quiet() {
      let seen = -1
      while (model.stats().extractionCalls !== seen) {
        seen = model.stats().extractionCalls
        await sleep(3_000)
      }
    }

    const phase = async (memory: boolean): Promise<Phase> => {
      process.stderr.write(`${memory ? "with" : "without"} memory: ${cases.length} cases\n`)
      model.reset()
      const cpu0 = processCpu(child.pid)
      const t0 = Date.now()
      const report = await runRecall({ base, expert: memory ? withMemory : without, model, cases, memory, tag: memory ? "on" : "off", concurrency: CONCURRENCY })
      if (memory) await quiet()
      const rawCpu = processCpu(child.pid) - cpu0
      return { report, stats: model.stats(), rawCpu, cpu: rawCpu - idlePerSecond * ((Date.now() - t0) / 1000) }
    }
    const off = await phase(false)
    const on = await phase(true)

    const turns = on.report.turns
    const per = (x: number) => x / turns
    const categories = [...new Set(on.report.results.map((r) => r.category))]
    const lines = [
      `## Memory recall (bench/recall.ts, ${new Date().toISOString().slice(0, 10)})`,
      "",
      `${cases.length} cases (${on.report.results.filter((r) => r.contradicted).length} contradicted), ${turns} turns per phase, ` +
      `${CONCURRENCY} cases at a time; ${SERVICES ? "services mode (PostgreSQL + Redis)" : "embedded (PGlite)"}; ` +
      `extraction debounce ${DEBOUNCE ?? "1 second (default)"}; ${Os.cpus().length} cores, load ${Os.loadavg()[0]!.toFixed(2)}.`,
      "",
      "| | with memory | without memory |",
      "| --- | --- | --- |",
      `| recall | **${pct(on.report.recall)}** (target ≥ 90%: ${on.report.recall >= 0.9 ? "met" : "NOT met"}) | ${pct(off.report.recall)} |`,
      `| contradicted facts (newer value) | **${pct(on.report.contradictedRecall)}** | ${pct(off.report.contradictedRecall)} |`,
      ...categories.map((category) => {
        const of = (p: Phase) => {
          const rs = p.report.results.filter((r) => r.category === category)
          return `${pct(rs.filter((r) => r.correct).length / rs.length)} of ${rs.length}`
        }
        return `| ${category} | ${of(on)} | ${of(off)} |`
      }),
      `| server CPU per turn (less idle) | ${(per(on.cpu) * 1000).toFixed(2)} ms | ${(per(off.cpu) * 1000).toFixed(2)} ms |`,
      `| server CPU per turn (raw) | ${(per(on.rawCpu) * 1000).toFixed(2)} ms | ${(per(off.rawCpu) * 1000).toFixed(2)} ms |`,
      `| model calls per turn: the turn's / extraction's | ${per(on.stats.chatCalls).toFixed(2)} / ${per(on.stats.extractionCalls).toFixed(3)} | ${per(off.stats.chatCalls).toFixed(2)} / ${per(off.stats.extractionCalls).toFixed(3)} |`,
      `| tokens per turn: the turn's input / output | ${per(on.stats.chatInputTokens).toFixed(0)} / ${per(on.stats.chatOutputTokens).toFixed(1)} | ${per(off.stats.chatInputTokens).toFixed(0)} / ${per(off.stats.chatOutputTokens).toFixed(1)} |`,
      `| tokens per turn: extraction's input / output | ${per(on.stats.extractionInputTokens).toFixed(0)} / ${per(on.stats.extractionOutputTokens).toFixed(1)} | 0 / 0 |`,
      "",
      `Added per turn by memory: ${((per(on.cpu) - per(off.cpu)) * 1000).toFixed(2)} ms of server CPU, ` +
      `${per(on.stats.extractionCalls).toFixed(3)} extra model calls, ` +
      `${(per(on.stats.chatInputTokens - off.stats.chatInputTokens + on.stats.extractionInputTokens)).toFixed(0)} input and ` +
      `${per(on.stats.extractionOutputTokens + on.stats.chatOutputTokens - off.stats.chatOutputTokens).toFixed(1)} output tokens ` +
      `(the memory in each turn's prompt, and extraction). Wall: ${on.report.wallSeconds.toFixed(0)} s with memory ` +
      `(waiting for extraction between sessions), ${off.report.wallSeconds.toFixed(0)} s without.`
    ]
    const missed = on.report.results.filter((r) => !r.correct)
    if (missed.length > 0) lines.push("", "Missed with memory:", ...missed.map((r) => `- ${r.id} (${r.category}): ${JSON.stringify(r.answer)}`))
    const text = lines.join("\n") + "\n"
    process.stdout.write(text)
    if (OUT !== undefined) Fs.writeFileSync(OUT, text)
  } finally {
    await platform.stop()
    await model.close()
  }
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
