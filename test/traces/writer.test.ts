import { assert, describe, layer } from "@effect/vitest"
import { SqlClient } from "@effect/sql"
import { Effect, Layer } from "effect"
import { randomHex } from "../../src/platform/Ids.js"
import { RunId } from "../../src/runtime/Domain.js"
import type { SpanRecord, TraceRun } from "../../src/runtime/Tracing.js"
import { TraceSink } from "../../src/runtime/Tracing.js"
import { TracesRepo } from "../../src/traces/Repo.js"
import { TraceWriterLive } from "../../src/traces/Writer.js"
import { TestDatabase } from "../support/Database.js"
import { pollUntil } from "../support/Poll.js"

/**
 * The trace writer's statement (docs/traces.md): a durable run executed again after a fault (an approval that met an
 * outage, a runner killed mid-run) ends a root span per attempt under one trace. When both roots fell in one batch,
 * PostgreSQL refused the statement (its summary row updated twice, error 21000), the writer put the batch back in
 * front, and from then on no trace of that process was written.
 */

const Env = Layer.mergeAll(TracesRepo.Default, TraceWriterLive).pipe(Layer.provideMerge(TestDatabase()))

const run = (runId: RunId): TraceRun => ({
  runId,
  agentId: null,
  agent: "builtin",
  agentVersion: null,
  ownerId: "usr_owner",
  payerId: "usr_payer",
  endUserId: "",
  sessionId: null,
  captureContent: false
})

const span = (traceId: string, runId: RunId, spanId: string, parent: string | null, endMs: number, status: "ok" | "error"): SpanRecord => ({
  traceId,
  spanId,
  parentSpanId: parent,
  run: run(runId),
  name: parent === null ? "invoke_agent builtin" : "chat builtin",
  kind: "internal",
  startTime: BigInt(endMs - 5) * 1_000_000n,
  endTime: BigInt(endMs) * 1_000_000n,
  status,
  attributes: {},
  credits: 10n
})

describe("trace writer", () => {
  // The real clock: the writer's rounds run on it, and the second test polls for them.
  layer(Env, { excludeTestServices: true })("TracesRepo.write and the writer", (it) => {
    it.effect("two attempts' roots of one trace in one batch: written, the summary the last attempt's", () =>
      Effect.gen(function*() {
        const repo = yield* TracesRepo
        const sql = yield* SqlClient.SqlClient
        const runId = RunId.random()
        const traceId = randomHex(16)
        const now = Date.now()
        yield* repo.write([
          span(traceId, runId, "1111111111111111", null, now - 1000, "error"),
          span(traceId, runId, "2222222222222222", "1111111111111111", now - 1001, "error"),
          span(traceId, runId, "3333333333333333", null, now, "ok"),
          span(traceId, runId, "4444444444444444", "3333333333333333", now - 1, "ok")
        ])
        const rows = yield* sql<{ status: string; spanCount: number; credits: string; startedMs: string }>`
          SELECT status, span_count, credits::text AS credits, (extract(epoch FROM started_at) * 1000)::bigint::text AS started_ms
          FROM traces WHERE trace_id = ${traceId}`
        // From the first attempt's start, as when the two are written in two batches.
        assert.deepStrictEqual(rows, [{ status: "ok", spanCount: 4, credits: "40", startedMs: String(now - 1005) }])
        // And the next batch of the same trace (a later flush) still writes.
        yield* repo.write([span(traceId, runId, "5555555555555555", "3333333333333333", now + 1, "ok")])
        const [after] = yield* sql<{ n: number }>`SELECT count(*)::integer AS n FROM trace_spans WHERE trace_id = ${traceId}`
        assert.strictEqual(after!.n, 5)
      }))

    it.effect("a span the database refuses for its data is dropped alone: the rest of its batch and the next batches are written", () =>
      Effect.gen(function*() {
        const sink = yield* TraceSink
        const sql = yield* SqlClient.SqlClient
        const runId = RunId.random()
        const [good, poisoned, next] = [randomHex(16), randomHex(16), randomHex(16)]
        const now = Date.now()
        // PostgreSQL's jsonb refuses a NUL character (SQLSTATE 22P05); a tool's output kept as content can carry one.
        const refused = { ...span(poisoned, RunId.random(), "6666666666666666", null, now, "ok"), attributes: { "gen_ai.tool.output": "a\u0000b" } }
        sink.offer(span(good, runId, "7777777777777777", null, now, "ok"))
        sink.offer(refused)
        const spansOf = (traceId: string) => Effect.map(sql<{ n: number }>`SELECT count(*)::integer AS n FROM trace_spans WHERE trace_id = ${traceId}`, ([row]) => row!.n)
        // The writer's rounds are every 500 ms (FLUSH_EVERY): polled, not waited for.
        yield* pollUntil(spansOf(good), (n) => n === 1, "the good span of the refused batch written", { every: 50, within: 10_000 })
        sink.offer(span(next, RunId.random(), "8888888888888888", null, now + 1, "ok"))
        yield* pollUntil(spansOf(next), (n) => n === 1, "the next batch written", { every: 50, within: 10_000 })
        assert.strictEqual(yield* spansOf(poisoned), 0)
      }))
  })
})
