/**
 * The Effect floor for bench/engine.ts: a bare `HttpApi` served by `NodeHttpServer`, with the same
 * `@effect/platform` and `@effect/platform-node` versions as Atrium and the same answers as bench/floor.ts, and
 * nothing else (no middleware, no auth, no database). Beside the `node:http` floor it splits what a request costs
 * into what Effect's HTTP stack costs and what our own layers add (issue 28).
 *
 *   node --expose-gc --import tsx bench/effect-floor.ts [--port 0]   # prints `listening <port>` once it listens
 *
 * Routes, as bench/floor.ts:
 * - `GET /json`: the body `GET /v1/meters` answers on a fresh platform, encoded through its schema;
 * - `POST /run`: a JSON payload `{ message }` decoded through its schema, answered with the builtin run's 11 SSE
 *   events then `data: [DONE]`, as an Effect `Stream` of frames (as the platform streams);
 * - `GET /hold`: an SSE answer greeted with `: connected` and held open, pinged every 15 s by one shared ticker;
 * - `GET /mem`: a full GC then `process.memoryUsage()` and the number held.
 *
 * With `--database URL` (services mode) or `--data-dir DIR` (embedded: PGlite in DIR/pgdata on a loopback socket, as the
 * platform opens it) it is the floor "with a run's statements" (issue 45 item 5): `POST /run` runs, through
 * `@effect/sql-pg`, the statements a builtin run of the platform runs (`PROBE_SQL=1 npx tsx bench/count-run.ts
 * --phases run`), with the same texts, on the platform's own tables, and streams the same events after them:
 * - before `run.created`: the agent read by its identifier (the payload's `agent`), the run's row inserted, and the hold
 *   placed on its owner's wallet (the ledger's one commit statement, `billing/Repo.ts` `commit`);
 * - before `usage.token`: the run's row finished, the hold posted (the same commit statement with the entry) and the
 *   run's spans inserted (one statement per run; the platform's exporter batches several runs' spans into one).
 * Each wallet is read once and then kept in this process, its commits one at a time (a semaphore per wallet), as an
 * actor would. The database is one the platform made and left (bench/engine.ts's `effect-db` part: users with a
 * signup grant, an agent each), so the tables, indexes and rows are the platform's; no code of the platform runs here.
 *
 * A script, not a test: it serves until it is killed. `Effect.run*` here is the script's own main.
 */
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as SqlClient from "@effect/sql/SqlClient"
import * as PgClient from "@effect/sql-pg/PgClient"
import { PGlite } from "@electric-sql/pglite"
import { vector } from "@electric-sql/pglite-pgvector"
import { PGLiteSocketServer } from "@electric-sql/pglite-socket"
import { Effect, Layer, Option, PubSub, Redacted, Schedule, Schema, Stream } from "effect"
import * as Path from "node:path"
import * as Crypto from "node:crypto"
import * as Http from "node:http"

const args = new Map<string, string>()
for (let i = 2; i < process.argv.length; i += 2) args.set(process.argv[i]!.replace(/^--/, ""), process.argv[i + 1]!)
const PORT = Number(args.get("port") ?? 0)
const DATABASE = args.get("database")
const DATA_DIR = args.get("data-dir")

const Meter = Schema.Struct({
  id: Schema.String,
  kind: Schema.String,
  model: Schema.String,
  unit: Schema.String,
  input_credits: Schema.Number,
  output_credits: Schema.Number
})
const Meters = Schema.Struct({ data: Schema.Array(Meter), has_more: Schema.Boolean })
const METERS: typeof Meters.Type = {
  data: [{ id: "model.builtin", kind: "model_usage", model: "builtin", unit: "1k_tokens", input_credits: 0.01, output_credits: 0.02 }],
  has_more: false
}
const Memory = Schema.Struct({ heapUsed: Schema.Number, rss: Schema.Number, held: Schema.Number, gc: Schema.Boolean })

class FloorGroup extends HttpApiGroup.make("floor")
  .add(HttpApiEndpoint.get("json", "/json").addSuccess(Meters))
  .add(HttpApiEndpoint.post("run", "/run").setPayload(Schema.Struct({ message: Schema.String, agent: Schema.optional(Schema.String) })))
  .add(HttpApiEndpoint.get("hold", "/hold"))
  .add(HttpApiEndpoint.get("mem", "/mem").addSuccess(Memory))
{}
class FloorApi extends HttpApi.make("effect-floor").add(FloorGroup) {}

const STREAM_HEADERS = { "cache-control": "no-cache, no-transform", "x-accel-buffering": "no" }
const encoder = new TextEncoder()
const frame = (event: Record<string, unknown> & { readonly type: string }) =>
  encoder.encode(`event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`)

/** The builtin model's answer to `message`: `You said: <message>`, in pieces of three words. */
const pieces = (message: string): Array<string> => {
  const words = `You said: ${message}`.split(" ")
  const out: Array<string> = []
  for (let i = 0; i < words.length; i += 3) out.push(words.slice(i, i + 3).join(" ") + (i + 3 >= words.length ? "" : " "))
  return out
}

const runEvents = (message: string): Array<Record<string, unknown> & { readonly type: string }> => {
  const text = pieces(message)
  const usage = { input_tokens: message.split(" ").length + 6, output_tokens: text.join("").split(" ").length * 4 }
  return [
    { type: "run.created", run_id: `run_${Crypto.randomBytes(15).toString("base64url")}`, agent: "floor" },
    { type: "run.in_progress", turn: 1 },
    { type: "output.thinking.status", status: "started" },
    { type: "output.thinking.delta", delta: "Reading the message. ", content: "Reading the message. " },
    { type: "output.thinking.delta", delta: "Choosing what to do.", content: "Choosing what to do." },
    { type: "output.thinking.status", status: "finished" },
    ...text.map((piece) => ({ type: "output.text.delta", delta: piece, content: piece })),
    { type: "usage.token", model: "builtin", ...usage, credits: 0.00051 },
    { type: "run.completed", usage, credits_charged: 0.00051 }
  ]
}

const gc = (globalThis as { gc?: () => void }).gc
let held = 0

// ---------------------------------------------------------------------------------------------------------------------
// A run's statements (with --database or --data-dir): the texts of the platform's repositories, copied

/** What a builtin run charges (0.00051 credits, as `usage.token` says) and holds (1 credit, capped by the balance). */
const RUN_COST = 510n
const HOLD = 1_000_000n

/** The ledger's one commit statement (`billing/Repo.ts` `LedgerRepo.commit`), word for word. */
const commitWallets = (sql: SqlClient.SqlClient, wallets: string, holds: string, entries: string) =>
  sql`
    WITH w AS (
      SELECT * FROM jsonb_to_recordset(${wallets}::jsonb)
        AS w(user_id text, shard text, generation bigint, from_seq bigint, balance bigint, seq bigint, held bigint)
    ), h AS (
      SELECT * FROM jsonb_to_recordset(${holds}::jsonb)
        AS h(user_id text, hold_id text, amount bigint, expires_at timestamptz)
    ), e AS (
      SELECT * FROM jsonb_to_recordset(${entries}::jsonb)
        AS e(user_id text, seq bigint, amount bigint, kind text, scope text, idempotency_key text, app_id text,
             event text, metadata jsonb, description text, balance_after bigint, created_at timestamptz,
             fence_shard text, fence_generation bigint)
    ), fence AS MATERIALIZED (
      SELECT g.shard, g.generation FROM shard_generations g
      WHERE g.shard IN (SELECT w.shard FROM w WHERE w.shard IS NOT NULL
                        UNION SELECT e.fence_shard FROM e WHERE e.fence_shard IS NOT NULL)
      ORDER BY g.shard FOR SHARE
    ), fenced AS (
      SELECT w.user_id FROM w WHERE w.shard IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM fence WHERE fence.shard = w.shard AND fence.generation = w.generation)
    ), stale AS (
      SELECT e.user_id, e.scope, e.idempotency_key FROM e WHERE e.fence_shard IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM fence WHERE fence.shard = e.fence_shard AND fence.generation = e.fence_generation)
    ), hit AS (
      SELECT e.user_id AS wallet, l.user_id, l.scope, l.idempotency_key, l.amount, l.balance_after
      FROM e CROSS JOIN LATERAL (
        SELECT user_id, scope, idempotency_key, amount, balance_after FROM ledger_entries
        WHERE scope = e.scope AND idempotency_key = e.idempotency_key LIMIT 1
      ) l
    ), moved AS (
      UPDATE wallets SET balance = w.balance, seq = w.seq, held = w.held, updated_at = now()
      FROM w
      WHERE wallets.user_id = w.user_id AND wallets.seq = w.from_seq
        AND NOT EXISTS (SELECT 1 FROM hit WHERE hit.wallet = w.user_id)
        AND NOT EXISTS (SELECT 1 FROM fenced WHERE fenced.user_id = w.user_id)
        AND NOT EXISTS (SELECT 1 FROM stale WHERE stale.user_id = w.user_id)
      RETURNING wallets.user_id
    ), inserted AS (
      INSERT INTO ledger_entries (user_id, seq, amount, kind, scope, idempotency_key, app_id, event, metadata,
                                  description, balance_after, created_at)
      SELECT e.user_id, e.seq, e.amount, e.kind, e.scope, e.idempotency_key, e.app_id, e.event, e.metadata,
             e.description, e.balance_after, e.created_at
      FROM e JOIN moved ON moved.user_id = e.user_id
      ORDER BY e.user_id, e.seq
      RETURNING user_id
    ), released AS (
      DELETE FROM wallet_holds USING h, moved
      WHERE h.amount IS NULL AND moved.user_id = h.user_id
        AND wallet_holds.user_id = h.user_id AND wallet_holds.hold_id = h.hold_id
      RETURNING 1
    ), placed AS (
      INSERT INTO wallet_holds (user_id, hold_id, amount, expires_at)
      SELECT h.user_id, h.hold_id, h.amount, h.expires_at FROM h JOIN moved ON moved.user_id = h.user_id
      WHERE h.amount IS NOT NULL
      ON CONFLICT (user_id, hold_id) DO UPDATE SET amount = EXCLUDED.amount, expires_at = EXCLUDED.expires_at
      RETURNING 1
    )
    SELECT 'hit' AS what, wallet, user_id, scope, idempotency_key, amount::text, balance_after::text FROM hit
    UNION ALL
    SELECT 'fenced', user_id, NULL, NULL, NULL, NULL, NULL FROM fenced
    UNION ALL
    SELECT 'stale', user_id, NULL, scope, idempotency_key, NULL, NULL FROM stale
    UNION ALL
    SELECT 'moved', user_id, NULL, NULL, NULL, NULL, NULL FROM moved
    UNION ALL
    SELECT 'inserted', user_id, NULL, NULL, NULL, count(*)::text, NULL FROM inserted GROUP BY user_id`

interface Wallet {
  balance: bigint
  seq: bigint
  held: bigint
  readonly lock: Effect.Semaphore
}

/** The statements of one run, as two effects around its events: `start` before `run.created`, `finish` before
 * `usage.token`. */
const makeRunStatements = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const wallets = new Map<string, Wallet>()
  const walletOf = (userId: string) =>
    Effect.suspend(() => {
      const known = wallets.get(userId)
      if (known !== undefined) return Effect.succeed(known)
      return Effect.map(
        sql<{ balance: string; seq: string; held: string }>`SELECT balance::text, seq::text, held::text FROM wallets WHERE user_id = ${userId}`,
        ([row]) => {
          const wallet = wallets.get(userId) ??
            { balance: BigInt(row!.balance), seq: BigInt(row!.seq), held: BigInt(row!.held), lock: Effect.unsafeMakeSemaphore(1) }
          wallets.set(userId, wallet)
          return wallet
        }
      )
    })
  /** One commit of `wallet`: its next state, the holds and entries that come with it (its seq is its last entry's). */
  const commit = (userId: string, wallet: Wallet, next: { balance: bigint; held: bigint }, holds: ReadonlyArray<unknown>, entries: ReadonlyArray<unknown>) =>
    Effect.gen(function*() {
      const seq = wallet.seq + BigInt(entries.length)
      const rows = yield* commitWallets(
        sql,
        JSON.stringify([{ user_id: userId, shard: null, generation: null, from_seq: String(wallet.seq), balance: String(next.balance), seq: String(seq), held: String(next.held) }]),
        JSON.stringify(holds),
        JSON.stringify(entries)
      )
      if (!rows.some((row) => row.what === "moved")) return yield* Effect.dieMessage(`wallet ${userId} did not move`)
      wallet.seq = seq
      wallet.balance = next.balance
      wallet.held = next.held
    }).pipe(wallet.lock.withPermits(1))

  const start = (runId: string, identifier: string) =>
    Effect.gen(function*() {
      const [agent] = yield* sql<{ id: string; owner_id: string; published_version: number | null }>`SELECT id, identifier, owner_id, draft, published_version, published_at, created_at, updated_at FROM agents WHERE identifier = ${identifier}`
      if (agent === undefined) return yield* Effect.dieMessage(`no agent ${identifier}`)
      yield* sql`
        INSERT INTO runs (id, agent_id, agent_version, payer_id, end_user_id, session_id, parent_run_id, status, agent,
                          started_at)
        VALUES (${runId}, ${agent.id}, ${agent.published_version}, ${agent.owner_id}, ${""}, ${null},
                ${null}, 'running', ${null}, now())`
      const wallet = yield* walletOf(agent.owner_id)
      const hold = wallet.balance - wallet.held < HOLD ? wallet.balance - wallet.held : HOLD
      yield* commit(agent.owner_id, wallet, { balance: wallet.balance, held: wallet.held + hold }, [
        { user_id: agent.owner_id, hold_id: runId, amount: String(hold), expires_at: new Date(Date.now() + 3_600_000).toISOString() }
      ], [])
      return { userId: agent.owner_id, wallet, hold }
    }).pipe(Effect.orDie)

  const finish = (runId: string, run: { userId: string; wallet: Wallet; hold: bigint }, usage: { input_tokens: number; output_tokens: number }, answer: string) =>
    Effect.gen(function*() {
      yield* sql`
        UPDATE runs SET status = ${"completed"}, failure_code = ${null},
          failure_message = ${null}, input_tokens = ${usage.input_tokens},
          output_tokens = ${usage.output_tokens}, credits_charged = ${String(RUN_COST)},
          tools_denied = ${0}, answer_chars = ${answer.length},
          denied_tools = ${"[]"}::jsonb, output = ${answer}, finished_at = now()
        WHERE id = ${runId} AND status = 'running'`
      const { userId, wallet, hold } = run
      const balance = wallet.balance - RUN_COST
      yield* commit(userId, wallet, { balance, held: wallet.held - hold }, [{ user_id: userId, hold_id: runId, amount: null, expires_at: null }], [{
        user_id: userId, seq: String(wallet.seq + 1n), amount: String(-RUN_COST), kind: "usage", scope: "run", idempotency_key: `${runId}:1`,
        app_id: null, event: null, metadata: null, description: "builtin", balance_after: String(balance),
        created_at: new Date().toISOString(), fence_shard: null, fence_generation: null
      }])
      const now = Date.now() * 1000
      const trace = runId.replace(/^run_/, "").padEnd(32, "0").slice(0, 32)
      const spans = [
        { trace_id: trace, span_id: trace.slice(0, 16), parent_span_id: null, run_id: runId, name: "agent.run", kind: "internal", start_us: now - 2000, end_us: now, status: "ok", attributes: { "gen_ai.agent.name": "floor" }, credits: String(RUN_COST) },
        { trace_id: trace, span_id: trace.slice(16, 32), parent_span_id: trace.slice(0, 16), run_id: runId, name: "chat builtin", kind: "client", start_us: now - 1500, end_us: now - 100, status: "ok", attributes: { "gen_ai.request.model": "builtin" }, credits: String(RUN_COST) }
      ]
      yield* sql`
        INSERT INTO trace_spans (trace_id, span_id, parent_span_id, run_id, name, kind, start_time, end_time, status, attributes, credits)
        SELECT trace_id, span_id, parent_span_id, run_id, name, kind,
          to_timestamp(start_us::double precision / 1000000), to_timestamp(end_us::double precision / 1000000),
          status, attributes, credits::bigint
        FROM jsonb_to_recordset(${JSON.stringify(spans)}::jsonb) AS x(trace_id text, span_id text, parent_span_id text,
          run_id text, name text, kind text, start_us bigint, end_us bigint, status text, attributes jsonb, credits text)
        ON CONFLICT (trace_id, span_id) DO NOTHING
        RETURNING trace_id, credits, attributes->>'gen_ai.tool.name' AS tool`
    }).pipe(Effect.orDie)
  return { start, finish } as const
})

/** `POST /run`'s events as SSE frames, `[DONE]` last; with `statements`, run around them (see the header). */
const runFrames = (
  message: string,
  agent: string | undefined,
  statements: Option.Option<Effect.Effect.Success<typeof makeRunStatements>>
): Stream.Stream<Uint8Array> => {
  let id = 0
  const events = runEvents(message)
  const framed = (list: ReadonlyArray<Record<string, unknown> & { readonly type: string }>) =>
    Stream.fromIterable(list).pipe(Stream.map((event) => frame({ ...event, event_id: ++id })))
  const done = Stream.succeed(encoder.encode("data: [DONE]\n\n"))
  if (Option.isNone(statements)) return Stream.concat(framed(events), done)
  const runId = events[0]!.run_id as string
  const usage = events[events.length - 1]!.usage as { input_tokens: number; output_tokens: number }
  const answer = events.filter((e) => e.type === "output.text.delta").map((e) => e.delta).join("")
  const cut = events.findIndex((e) => e.type === "usage.token")
  return Stream.unwrap(Effect.map(statements.value.start(runId, agent ?? ""), (run) =>
    framed(events.slice(0, cut)).pipe(
      Stream.concat(Stream.unwrap(Effect.as(statements.value.finish(runId, run, usage, answer), framed(events.slice(cut))))),
      Stream.concat(done)
    ))).pipe(Stream.tapErrorCause((cause) => Effect.logError("a run's statements failed", cause)))
}

const FloorLive = HttpApiBuilder.group(FloorApi, "floor", (handlers) =>
  Effect.gen(function*() {
    // One ticker for every held answer, like Atrium's shared ticker.
    const statements = yield* Effect.serviceOption(SqlClient.SqlClient).pipe(
      Effect.flatMap(Option.match({
        onNone: () => Effect.succeed(Option.none()),
        onSome: (sql) => Effect.map(Effect.provideService(makeRunStatements, SqlClient.SqlClient, sql), Option.some)
      }))
    )
    const pings = yield* PubSub.unbounded<Uint8Array>()
    const ping = encoder.encode(": ping\n\n")
    yield* PubSub.publish(pings, ping).pipe(Effect.repeat(Schedule.spaced("15 seconds")), Effect.forkScoped)
    return handlers
      .handle("json", () => Effect.succeed(METERS))
      .handle("run", ({ payload }) =>
        Effect.sync(() =>
          HttpServerResponse.stream(runFrames(payload.message, payload.agent, statements), {
            contentType: "text/event-stream",
            headers: STREAM_HEADERS
          })
        ))
      .handle("hold", () =>
        Effect.succeed(
          HttpServerResponse.stream(
            Stream.succeed(encoder.encode(": connected\n\n")).pipe(
              Stream.concat(Stream.fromPubSub(pings)),
              Stream.ensuring(Effect.sync(() => held--)),
              Stream.onStart(Effect.sync(() => held++))
            ),
            { contentType: "text/event-stream", headers: STREAM_HEADERS }
          )
        ))
      .handle("mem", () =>
        Effect.sync(() => {
          gc?.()
          const usage = process.memoryUsage()
          return { heapUsed: usage.heapUsed, rss: usage.rss, held, gc: gc !== undefined }
        }))
  }))

/** The database of a run's statements: PostgreSQL at --database, or PGlite in --data-dir as the platform opens it. */
const Database: Layer.Layer<SqlClient.SqlClient> | undefined = DATABASE !== undefined
  ? PgClient.layer({ url: Redacted.make(DATABASE), maxConnections: 20 }).pipe(Layer.orDie)
  : DATA_DIR !== undefined
  ? Layer.unwrapScoped(Effect.gen(function*() {
    const db = yield* Effect.acquireRelease(
      Effect.promise(() =>
        PGlite.create(Path.join(DATA_DIR, "pgdata"), { startParams: [...PGlite.defaultStartParams, "-c", "shared_buffers=16MB"], extensions: { vector } })
      ),
      (db) => Effect.promise(() => db.close())
    )
    const socket = yield* Effect.acquireRelease(
      Effect.promise(async () => {
        const socket = new PGLiteSocketServer({ db, host: "127.0.0.1", port: 0, maxConnections: 8 })
        await socket.start()
        return socket
      }),
      (socket) => Effect.promise(() => socket.stop())
    )
    const [host, port] = socket.getServerConn().split(":")
    return PgClient.layer({ host: host!, port: Number(port), username: "postgres", database: "postgres", maxConnections: 1, minConnections: 1 })
  })).pipe(Layer.orDie)
  : undefined

const server = Http.createServer()
const ServerLive = HttpApiBuilder.serve().pipe(
  Layer.provide(HttpApiBuilder.api(FloorApi).pipe(Layer.provide(Database === undefined ? FloorLive : FloorLive.pipe(Layer.provide(Database))))),
  // With a database, it is opened before the server listens: a request that came before the routes were set would
  // hang (PGlite takes seconds to open).
  Layer.provide(NodeHttpServer.layer(() => server, { port: PORT, host: "127.0.0.1" }).pipe(
    Database === undefined ? (self) => self : Layer.provide(Database)
  ))
)

server.once("listening", () => {
  const address = server.address()
  console.log(`listening ${typeof address === "object" && address !== null ? address.port : PORT}`)
})
server.on("close", () => process.exit(0))

NodeRuntime.runMain(Layer.launch(ServerLive), { disableErrorReporting: false })
