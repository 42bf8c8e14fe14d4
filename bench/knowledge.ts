/**
 * Knowledge (issue 32 item 7): ingestion throughput and search latency of knowledge bases, against the platform
 * started as its own process, the way `npm start` runs it.
 *
 *   npx tsx bench/knowledge.ts                                                              # embedded (PGlite)
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test REDIS_URL=redis://127.0.0.1:6379 \
 *     npx tsx bench/knowledge.ts                                                            # services
 *
 * Flags (defaults in brackets): --sizes 10000,100000 (chunks in the knowledge base; each size is a fresh
 * platform), --modes full_text,hybrid (hybrid: with a stand-in embeddings upstream this script serves, 64
 * dimensions; in services mode only where the server has pgvector), --queries 200 (searches timed per size and
 * mode), --file-chunks 2000 (chunks per uploaded file), --json FILE.
 *
 * For each size and mode it generates a corpus (sentences of a synthetic vocabulary, so every query word has a
 * known frequency), uploads it in files, adds them to one knowledge base with 100-token chunks without overlap,
 * and reports: ingestion chunks/s (from the first add to the last file `completed`), then search latency p50/p99
 * through `POST /v1/vector_stores/:id/search` (HTTP, end to end), and the same queries as SQL straight on the
 * database: our full-text statement against a plain `ILIKE '%word%'` scan of the same chunks (the reference a
 * knowledge base without an index would be). In embedded mode the SQL runs after the platform stopped, on its
 * data directory opened with PGlite in this process.
 *
 * A script, not a test: it prints Markdown tables for BENCHMARKS.md and asserts nothing.
 */
import { PGlite } from "@electric-sql/pglite"
import { vector } from "@electric-sql/pglite-pgvector"
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Path from "node:path"
import pg from "pg"
import { call, launchBenchPlatform, percentile, writeJson } from "./support.js"

const args = new Map<string, string>()
for (let i = 2; i < process.argv.length; i += 2) args.set(process.argv[i]!.replace(/^--/, ""), process.argv[i + 1]!)
const SIZES = (args.get("sizes") ?? "10000,100000").split(",").map(Number)
const MODES = (args.get("modes") ?? "full_text,hybrid").split(",") as Array<"full_text" | "hybrid">
const QUERIES = Number(args.get("queries") ?? 200)
const FILE_CHUNKS = Number(args.get("file-chunks") ?? 2000)
const JSON_FILE = args.get("json")
const SERVICES = process.env.DATABASE_URL !== undefined
const PHONE = "+15550004242"
const CODE = "123456"
const DIMS = 64

// ---- corpus -----------------------------------------------------------------------------------------------------

/** A deterministic generator, so runs compare. */
const random = (() => {
  let state = 42
  return () => {
    state = (state * 1103515245 + 12345) & 0x7fffffff
    return state / 0x7fffffff
  }
})()

/** 20,000 pseudo-words with a Zipf-like frequency: a query word may be common or rare. */
const VOCABULARY = Array.from({ length: 20_000 }, (_, i) => `w${i.toString(36)}x`)
const word = () => VOCABULARY[Math.floor(VOCABULARY.length * random() ** 3)]!

/** About 300 to 350 characters: with its heading, one 100-token chunk (400 characters), so a size is the chunks made. */
const chunkText = () => {
  const sentences: Array<string> = []
  let length = 0
  while (length < 300) {
    const sentence = Array.from({ length: 8 }, word).join(" ") + "."
    sentences.push(sentence)
    length += sentence.length + 1
  }
  return sentences.join(" ")
}

/** A file of `chunks` sections, each a heading and a paragraph of one chunk's length. */
const fileText = (chunks: number) =>
  Array.from({ length: chunks }, (_, i) => `## Part ${i}\n\n${chunkText()}`).join("\n\n")

// ---- a stand-in embeddings upstream -----------------------------------------------------------------------------

const fakeVector = (text: string) => {
  const v = new Array<number>(DIMS).fill(0)
  v[0] = 0.01
  for (const w of text.match(/w[0-9a-z]+x/g) ?? []) {
    let h = 0
    for (const c of w) h = (h * 31 + c.charCodeAt(0)) >>> 0
    v[1 + (h % (DIMS - 1))]! += 1
  }
  return v
}

const startUpstream = () =>
  new Promise<{ url: string; close: () => void }>((resolve) => {
    const server = Http.createServer((req, res) => {
      let body = ""
      req.on("data", (c) => (body += c))
      req.on("end", () => {
        const parsed = JSON.parse(body) as { input: Array<string> }
        const tokens = parsed.input.reduce((s, t) => s + Math.ceil(t.length / 4), 0)
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({
          data: parsed.input.map((t, index) => ({ index, embedding: fakeVector(t) })),
          usage: { prompt_tokens: tokens, total_tokens: tokens }
        }))
      })
    })
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number }
      resolve({ url: `http://127.0.0.1:${port}/v1`, close: () => server.close() })
    })
  })

// ---- one size, one mode -----------------------------------------------------------------------------------------

const timed = async (f: () => Promise<unknown>) => {
  const start = performance.now()
  await f()
  return performance.now() - start
}

const summary = (ms: Array<number>) => {
  const sorted = [...ms].sort((a, b) => a - b)
  return { p50: percentile(sorted, 50), p99: percentile(sorted, 99) }
}

const run = async (size: number, mode: "full_text" | "hybrid") => {
  const upstream = mode === "hybrid" ? await startUpstream() : undefined
  // On a loaded machine an embedded start (PGlite, its migrations) can outlast the usual two minutes: ten.
  const platform = await launchBenchPlatform({
    startTries: 6000,
    env: {
      SMS_TEST_OTP: `${PHONE}=${CODE}`,
      SIGNUP_CREDITS: "1000000",
      EMBEDDINGS_PRICE_PER_1K: "0",
      KNOWLEDGE_INGEST_POLL: "1 second",
      KNOWLEDGE_FILE_MAX_BYTES: String(64 * 1024 * 1024),
      KNOWLEDGE_STORE_MAX_BYTES: String(4 * 1024 * 1024 * 1024),
      ...(upstream === undefined ? {} : { EMBEDDINGS_BASE_URL: upstream.url, EMBEDDINGS_MODEL: "bench-embed" })
    },
    ...(SERVICES ? { services: { adminUrl: process.env.DATABASE_URL!, redisUrl: process.env.REDIS_URL ?? "redis://127.0.0.1:6379" } } : {})
  })
  const agent = new Http.Agent({ keepAlive: true, maxSockets: 16 })
  try {
    const login = await call(agent, platform.base, "POST", "/api/auth/login", { phone: PHONE, code: CODE })
    const auth = { authorization: `Bearer ${login.body.token}` }
    const store = await call(agent, platform.base, "POST", "/v1/vector_stores", { name: `bench ${size}` }, auth)
    const storeId = store.body.id as string
    const files: Array<string> = []
    for (let made = 0; made < size; made += FILE_CHUNKS) {
      const bytes = Buffer.from(fileText(Math.min(FILE_CHUNKS, size - made)))
      const ticket = await call(agent, platform.base, "POST", "/v1/files/upload-url", { filename: `part${made}.md`, content_type: "text/markdown", size: bytes.length }, auth)
      await fetch(ticket.body.upload_url, { method: "PUT", headers: ticket.body.headers, body: bytes })
      const file = await call(agent, platform.base, "POST", "/v1/files", { upload_id: ticket.body.upload_id }, auth)
      files.push(file.body.id)
    }
    const strategy = { type: "static", static: { max_chunk_size_tokens: 100, chunk_overlap_tokens: 0 } }
    const started = performance.now()
    for (const id of files) await call(agent, platform.base, "POST", `/v1/vector_stores/${storeId}/files`, { file_id: id, chunking_strategy: strategy }, auth)
    while (true) {
      const state = await call(agent, platform.base, "GET", `/v1/vector_stores/${storeId}`, undefined, auth)
      if (state.body.file_counts.in_progress === 0) break
      await new Promise((r) => setTimeout(r, 200))
    }
    const ingestSeconds = (performance.now() - started) / 1000
    const stored = await call(agent, platform.base, "GET", `/v1/vector_stores/${storeId}/files?limit=100`, undefined, auth)
    const chunks = (stored.body.data as Array<any>).reduce((s, f) => s + (f.progress.chunks_done ?? 0), 0)

    const queries = Array.from({ length: QUERIES }, () => `${word()} ${word()}`)
    // One search first, not timed: the first query of a dimension builds its HNSW index (once per database).
    await call(agent, platform.base, "POST", `/v1/vector_stores/${storeId}/search`, { query: "warm up" }, auth)
    let ranker = ""
    const http: Array<number> = []
    for (const query of queries) {
      http.push(await timed(async () => {
        const found = await call(agent, platform.base, "POST", `/v1/vector_stores/${storeId}/search`, { query }, auth)
        ranker = found.body.ranker
      }))
    }
    return { size, mode, ranker, chunks, ingestSeconds, chunksPerSecond: chunks / ingestSeconds, http: summary(http), queries, storeId, platform }
  } finally {
    agent.destroy()
    upstream?.close()
  }
}

/** Our full-text statement and a plain ILIKE scan, straight on the database, the same queries. */
const sqlLatencies = async (query: (text: string, params: Array<unknown>) => Promise<unknown>, storeId: string, queries: Array<string>) => {
  const ours: Array<number> = []
  const ilike: Array<number> = []
  for (const q of queries) {
    ours.push(await timed(() => query(
      `WITH t AS (SELECT replace(plainto_tsquery('english', $2)::text, ' & ', ' | ')::tsquery AS q)
       SELECT c.seq, ts_rank_cd(c.tsv, t.q, 32) AS score FROM t, knowledge_chunks c
       WHERE c.store_id = $1 AND c.tsv @@ t.q ORDER BY score DESC LIMIT 30`, [storeId, q])))
    const first = q.split(" ")[0]!
    ilike.push(await timed(() => query(
      `SELECT c.seq FROM knowledge_chunks c WHERE c.store_id = $1 AND c.text ILIKE $2 LIMIT 30`, [storeId, `%${first}%`])))
  }
  return { ours: summary(ours), ilike: summary(ilike) }
}

const rows: Array<Record<string, unknown>> = []
for (const size of SIZES) {
  for (const mode of MODES) {
    const result = await run(size, mode)
    let sql: { ours: { p50: number; p99: number }; ilike: { p50: number; p99: number } } | undefined
    if (result.platform.db !== undefined) {
      const client = new pg.Client({ connectionString: result.platform.db.url })
      await client.connect()
      sql = await sqlLatencies((text, params) => client.query(text, params), result.storeId, result.queries)
      await client.end()
      await result.platform.stop()
    } else {
      // PGlite answers only its own process: the platform stops, and this script opens its data directory.
      await result.platform.stop({ keepData: true })
      const dir = result.platform.dataDir!
      const db = await PGlite.create(Path.join(dir, "pgdata"), { extensions: { vector } })
      sql = await sqlLatencies((text, params) => db.query(text, params), result.storeId, result.queries)
      await db.close()
      Fs.rmSync(dir, { recursive: true, force: true })
    }
    const row = {
      mode: SERVICES ? "services" : "embedded",
      search: result.ranker,
      chunks: result.chunks,
      "ingest chunks/s": Math.round(result.chunksPerSecond),
      "HTTP p50 ms": result.http.p50.toFixed(1),
      "HTTP p99 ms": result.http.p99.toFixed(1),
      "SQL full-text p50/p99 ms": sql === undefined ? "-" : `${sql.ours.p50.toFixed(1)} / ${sql.ours.p99.toFixed(1)}`,
      "SQL ILIKE p50/p99 ms": sql === undefined ? "-" : `${sql.ilike.p50.toFixed(1)} / ${sql.ilike.p99.toFixed(1)}`
    }
    rows.push(row)
    console.log(JSON.stringify(row))
  }
}
const headers = Object.keys(rows[0] ?? {})
console.log(`\n| ${headers.join(" | ")} |\n| ${headers.map(() => "---").join(" | ")} |`)
for (const row of rows) console.log(`| ${headers.map((h) => String(row[h])).join(" | ")} |`)
writeJson(JSON_FILE, rows)
