/**
 * Trace search (issue 46, figure: a search over 1,000,000 spans answers in ≤ 500 ms p95 on this machine): the
 * platform started as its own process (`dist/main.js`, services mode), its trace tables filled straight in SQL with
 * `--spans` spans (8 per trace, a tenth of the traces of the measured creator's experts, the rest other accounts'),
 * then `GET /v1/traces` timed end to end, one query at a time, for each filter the route takes.
 *
 *   npm run build && DATABASE_URL=postgres://postgres@127.0.0.1:5432/test REDIS_URL=redis://127.0.0.1:6379 \
 *     npx tsx bench/traces.ts [--spans 1000000] [--queries 200] [--json FILE]
 *
 * Services mode only: the spans are written by this script on the platform's own database while it runs (an
 * embedded platform holds its PGlite directory alone). A script, not a test: it prints a Markdown table for
 * BENCHMARKS.md and asserts nothing.
 */
import * as Http from "node:http"
import pg from "pg"
import { call, launchBenchPlatform, percentile, writeJson } from "./support.js"

const args = new Map<string, string>()
for (let i = 2; i < process.argv.length; i += 2) args.set(process.argv[i]!.replace(/^--/, ""), process.argv[i + 1]!)
const SPANS = Number(args.get("spans") ?? 1_000_000)
const QUERIES = Number(args.get("queries") ?? 200)
const JSON_FILE = args.get("json")
const SPANS_PER_TRACE = 8
const ADMIN_URL = process.env.DATABASE_URL
const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379"
const PHONE = "+15550009901"
const CODE = "123456"

if (ADMIN_URL === undefined) {
  console.error("bench/traces.ts needs DATABASE_URL (services mode): it fills the platform's database while it runs.")
  process.exit(2)
}

const agent = new Http.Agent({ keepAlive: true, maxSockets: 4 })

const main = async () => {
  const platform = await launchBenchPlatform({
    env: { SMS_TEST_OTP: `${PHONE}=${CODE}`, JWT_SECRET: "bench-traces-secret-0123456789-0123456789" },
    services: { adminUrl: ADMIN_URL, redisUrl: REDIS_URL }
  })
  try {
    const login = await call(agent, platform.base, "POST", "/api/auth/login", { phone: PHONE, code: CODE })
    const token = login.body.token as string
    const userId = JSON.parse(Buffer.from(token.split(".")[1]!, "base64url").toString("utf8")).userId as string
    const db = new pg.Client({ connectionString: platform.db!.url })
    await db.connect()
    const traces = Math.ceil(SPANS / SPANS_PER_TRACE)
    const seeding = performance.now()
    // One trace in ten is a run of the measured creator's experts; errors one in seventeen; tools in rotation.
    await db.query(
      `INSERT INTO traces (trace_id, run_id, agent_id, agent, agent_version, owner_id, payer_id, end_user_id, session_id,
         status, error_type, credits, tools, span_count, started_at, ended_at)
       SELECT md5('t' || i), 'run_bench' || i, NULL, 'expert-' || (i % 20), 1 + (i % 3),
         CASE WHEN i % 10 = 0 THEN $1 ELSE 'usr_other' || (i % 1000) END, 'usr_payer' || (i % 5000), '',
         CASE WHEN i % 4 = 0 THEN 'ses_' || (i % 20000) ELSE NULL END,
         CASE WHEN i % 17 = 0 THEN 'error' ELSE 'ok' END, CASE WHEN i % 17 = 0 THEN 'upstream_error' ELSE NULL END,
         ((i * 7919) % 50000)::bigint, CASE i % 3 WHEN 0 THEN ARRAY['calculator'] WHEN 1 THEN ARRAY['file_search', 'get_time'] ELSE '{}' END,
         ${SPANS_PER_TRACE}, now() - make_interval(secs => i), now() - make_interval(secs => i) + interval '2 seconds'
       FROM generate_series(1, $2::integer) AS i`,
      [userId, traces]
    )
    for (let from = 1; from <= traces; from += 25_000) {
      const to = Math.min(traces, from + 24_999)
      await db.query(
        `INSERT INTO trace_spans (trace_id, span_id, parent_span_id, run_id, name, kind, start_time, end_time, status, attributes, credits)
         SELECT md5('t' || i), substr(md5('s' || i || '-' || j), 1, 16),
           CASE WHEN j = 1 THEN NULL ELSE substr(md5('s' || i || '-1'), 1, 16) END, 'run_bench' || i,
           CASE WHEN j = 1 THEN 'invoke_agent expert-' || (i % 20) WHEN j % 2 = 0 THEN 'chat builtin' ELSE 'execute_tool calculator' END,
           CASE WHEN j % 2 = 0 THEN 'client' ELSE 'internal' END,
           now() - make_interval(secs => i), now() - make_interval(secs => i) + interval '1 second', 'ok',
           jsonb_build_object('gen_ai.operation.name', CASE WHEN j % 2 = 0 THEN 'chat' ELSE 'execute_tool' END,
             'gen_ai.usage.input_tokens', 100 + j, 'gen_ai.usage.output_tokens', 20 + j),
           CASE WHEN j % 2 = 0 THEN (i % 50000)::bigint / 4 ELSE 0 END
         FROM generate_series($1::integer, $2::integer) AS i, generate_series(1, ${SPANS_PER_TRACE}) AS j`,
        [from, to]
      )
    }
    await db.query("ANALYZE traces")
    await db.query("ANALYZE trace_spans")
    const seeded = (performance.now() - seeding) / 1000
    const counted = await db.query("SELECT (SELECT count(*) FROM trace_spans)::int AS spans, (SELECT count(*) FROM traces)::int AS traces")
    await db.end()
    console.error(`seeded ${counted.rows[0].spans} spans in ${counted.rows[0].traces} traces in ${seeded.toFixed(1)} s`)

    const queries: Record<string, (i: number) => string> = {
      "newest page": () => "/v1/traces",
      "by expert": (i) => `/v1/traces?agent=expert-${(i * 10) % 20}`,
      "by expert and version": (i) => `/v1/traces?agent=expert-${(i * 10) % 20}&version=${1 + (i % 3)}`,
      "by tool": () => "/v1/traces?tool=calculator",
      "errors": () => "/v1/traces?status=error",
      "cost range": (i) => `/v1/traces?min_credits=0.0${1 + (i % 8)}&max_credits=0.04`,
      "time window": (i) => `/v1/traces?after=${new Date(Date.now() - (i % 50 + 1) * 3_600_000).toISOString()}&before=${new Date(Date.now() - (i % 50) * 3_600_000).toISOString()}`,
      "session": (i) => `/v1/traces?session=ses_${(i * 40) % 20000}`,
      "rare: expensive errors with a tool": () => "/v1/traces?status=error&tool=file_search&min_credits=0.049"
    }
    const rows: Array<{ query: string; p50: number; p95: number; p99: number; rows: number }> = []
    for (const [name, path] of Object.entries(queries)) {
      const times: Array<number> = []
      let found = 0
      for (let i = 0; i < QUERIES; i++) {
        const started = performance.now()
        const reply = await call(agent, platform.base, "GET", path(i), undefined, { authorization: `Bearer ${token}` })
        times.push(performance.now() - started)
        if (reply.status !== 200) throw new Error(`${path(i)}: ${reply.status} ${JSON.stringify(reply.body)}`)
        found += reply.body.data.length
      }
      times.sort((a, b) => a - b)
      rows.push({ query: name, p50: percentile(times, 50), p95: percentile(times, 95), p99: percentile(times, 99), rows: found / QUERIES })
    }
    console.log(`\nTrace search over ${counted.rows[0].spans} spans (${counted.rows[0].traces} traces), ${QUERIES} queries each, GET /v1/traces as the creator of a tenth of them\n`)
    console.log("| query | p50 ms | p95 ms | p99 ms | rows per page |")
    console.log("| --- | --- | --- | --- | --- |")
    for (const row of rows) {
      console.log(`| ${row.query} | ${row.p50.toFixed(1)} | ${row.p95.toFixed(1)} | ${row.p99.toFixed(1)} | ${row.rows.toFixed(1)} |`)
    }
    writeJson(JSON_FILE, { spans: counted.rows[0].spans, traces: counted.rows[0].traces, seededSeconds: seeded, rows })
  } finally {
    await platform.stop()
  }
}

main().then(() => process.exit(0), (error) => {
  console.error(error)
  process.exit(1)
})
