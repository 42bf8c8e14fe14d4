import { PGlite } from "@electric-sql/pglite"
import { PGLiteSocketServer } from "@electric-sql/pglite-socket"
import { NodeContext } from "@effect/platform-node"
import { SqlClient } from "@effect/sql"
import { PgClient, PgMigrator } from "@effect/sql-pg"
import { assert, describe, it, layer } from "@effect/vitest"
import { Effect, Layer, Redacted } from "effect"
import * as Path from "node:path"
import { migrations } from "../../src/platform/migrations/index.js"
import * as Mock from "../support/MockUpstream.js"
import { pollUntil } from "../support/Poll.js"
import { textOf } from "../support/Sse.js"
import { makeSmsInbox, makeStorage, startServer, type Storage, TestServer } from "../support/TestServer.js"
import {
  agentWith,
  answer,
  assertCompleted,
  ENV,
  LIVE,
  newUser,
  only,
  openRun,
  runAgent,
  toolDirective
} from "./runs-support.js"

/**
 * What a run's record keeps for self-evolution (migration 0009_run_evidence): the length of its answer and the
 * name of each denied tool call, written however the run ends; and the migration applied to a database of the
 * version before it.
 */

const CALC = toolDirective("calculator", { expression: "6 * 7" })

interface Evidence {
  readonly status: string
  readonly answerChars: number | null
  readonly deniedTools: ReadonlyArray<string>
  readonly toolsDenied: number
}

/** The run's record once it is finished (a cancelled run is recorded a moment after its client left). */
const evidenceOf = (runId: string) =>
  Effect.gen(function*() {
    const server = yield* TestServer
    // Polled: the run's row is finished by the server after the answer was sent.
    const [row] = yield* pollUntil(
      server.query(`SELECT status, answer_chars, denied_tools, tools_denied FROM runs WHERE id = '${runId.replace(/'/g, "")}'`),
      (rows) => rows[0] !== undefined && rows[0].status !== "running",
      `run ${runId} finished`,
      { every: 20, within: 4_000 }
    )
    const denied = typeof row!.denied_tools === "string" ? JSON.parse(row!.denied_tools) : row!.denied_tools
    return {
      status: row!.status as string,
      answerChars: row!.answer_chars === null ? null : Number(row!.answer_chars),
      deniedTools: denied as Array<string>,
      toolsDenied: Number(row!.tools_denied)
    } satisfies Evidence
  })

const runIdOf = (stream: Parameters<typeof only>[0]) => only(stream, "run.created").run_id as string

const WithUpstream = Mock.serverWithUpstream({ ...ENV, ...Mock.MOCK_MODEL_ENV })

/** An upstream step that calls the tool `name` after saying `text`. */
const callsTool = (text: string, name: string) =>
  Mock.stream([
    Mock.sse(Mock.chatChunk({ role: "assistant", content: text })),
    Mock.sse(Mock.chatChunk({
      tool_calls: [{ index: 0, id: "call_ev_1", type: "function", function: { name, arguments: "{}" } }]
    })),
    Mock.sse(Mock.chatChunk({}, "tool_calls")),
    Mock.sse(Mock.usageChunk(20, 10)),
    Mock.DONE
  ])

describe("run evidence", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("a completed run records its answer's length and no denied tools", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const stream = yield* runAgent(user, agent, "hello there")
        assertCompleted(stream)
        assert.strictEqual(textOf(stream), "You said: hello there")
        assert.deepStrictEqual(yield* evidenceOf(runIdOf(stream)), {
          status: "completed",
          answerChars: "You said: hello there".length,
          deniedTools: [],
          toolsDenied: 0
        })
      }))

    it.effect("denied calls record their tool's name: policy deny, an ask refused, an ask timed out; an approved ask is none", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const denying = yield* agentWith(user.token, { calculator: "deny", get_time: "allow" })
        const denied = yield* runAgent(user, denying, CALC)
        assertCompleted(denied)
        const record = yield* evidenceOf(runIdOf(denied))
        assert.deepStrictEqual(record.deniedTools, ["calculator"])
        assert.strictEqual(record.toolsDenied, 1)
        // Every step's text is the answer: "Calling calculator." and what the model said after the denial.
        assert.strictEqual(record.answerChars, textOf(denied).trim().length)

        const asking = yield* agentWith(user.token, { get_time: "ask" })
        const time = toolDirective("get_time")
        const refused = yield* openRun(user, asking, time)
        const required = only(yield* refused.until("approval.required"), "approval.required")
        yield* answer(user, required.approval_id, { decision: "deny", reason: "not now" })
        const refusedStream = yield* refused.rest
        assertCompleted(refusedStream)
        assert.deepStrictEqual((yield* evidenceOf(runIdOf(refusedStream))).deniedTools, ["get_time"])

        const approvedRun = yield* openRun(user, asking, time)
        const second = only(yield* approvedRun.until("approval.required"), "approval.required")
        yield* answer(user, second.approval_id, { decision: "approve" })
        const approvedStream = yield* approvedRun.rest
        assertCompleted(approvedStream)
        const approved = yield* evidenceOf(runIdOf(approvedStream))
        assert.deepStrictEqual([approved.deniedTools, approved.toolsDenied], [[], 0])

        // Nobody answers: denied with reason timeout after APPROVAL_TIMEOUT (2 seconds here).
        const timedOut = yield* runAgent(user, asking, time)
        assert.strictEqual(only(timedOut, "tool_call.denied").reason, "timeout")
        assert.deepStrictEqual((yield* evidenceOf(runIdOf(timedOut))).deniedTools, ["get_time"])
      }), 30_000)

    it.effect("a failed run and a cancelled run record their answer's length too", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token, { calculator: "ask" })
        const failed = yield* runAgent(user, agent, "/fail on purpose")
        assert.deepStrictEqual(yield* evidenceOf(runIdOf(failed)), {
          status: "failed",
          answerChars: 0,
          deniedTools: [],
          toolsDenied: 0
        })

        // The client leaves while the approval waits: the first step's text was said, nothing was denied.
        const live = yield* openRun(user, agent, CALC)
        const asked = yield* live.until("approval.required")
        yield* live.cancel
        assert.deepStrictEqual(yield* evidenceOf(runIdOf(asked)), {
          status: "cancelled",
          answerChars: textOf(asked).trim().length,
          deniedTools: [],
          toolsDenied: 0
        })
        assert.isAbove(textOf(asked).trim().length, 0)
      }))
  })

  layer(WithUpstream, LIVE)((it) => {
    it.effect("a run that fails after a denial records the denied tool and what was said before", () =>
      Effect.gen(function*() {
        const upstream = yield* Mock.Upstream
        const user = yield* newUser
        const agent = yield* agentWith(user.token, { calculator: "deny" }, { model: "mock-model" })
        yield* upstream.script(
          callsTool("Let me compute. ", "calculator"),
          Mock.status(500, { error: { message: "the GPU caught fire" } })
        )
        const stream = yield* runAgent(user, agent, "compute it")
        assert.strictEqual(only(stream, "tool_call.denied").reason, "denied by the agent's tool policy")
        assert.strictEqual(stream.events[stream.events.length - 1]!.event, "run.failed")
        assert.deepStrictEqual(yield* evidenceOf(runIdOf(stream)), {
          status: "failed",
          answerChars: "Let me compute.".length,
          deniedTools: ["calculator"],
          toolsDenied: 1
        })
      }))

    it.effect("an answer without text is recorded as 0 characters, though the model reported output tokens", () =>
      Effect.gen(function*() {
        const upstream = yield* Mock.Upstream
        const user = yield* newUser
        const agent = yield* agentWith(user.token, {}, { model: "mock-model" })
        yield* upstream.script(Mock.stream([Mock.chatText(["  ", "\n"], [30, 12])]))
        const stream = yield* runAgent(user, agent, "say nothing")
        assertCompleted(stream)
        assert.deepStrictEqual(yield* evidenceOf(runIdOf(stream)), {
          status: "completed",
          answerChars: 0,
          deniedTools: [],
          toolsDenied: 0
        })
      }))
  })
})

/** The migrations of the version before 0009: a database as it was before this one was released. */
const previousMigrations = Effect.map(migrations, (all) => all.filter(([id]) => id < 9))

/** A SQL client on `storage` without a server: PostgreSQL at its URL, or the PGlite directory on a socket. */
const clientOf = (storage: Storage) =>
  storage.env.DATABASE_URL
    ? PgClient.layer({ url: Redacted.make(storage.env.DATABASE_URL) })
    : Layer.unwrapScoped(Effect.gen(function*() {
      const db = yield* Effect.acquireRelease(
        Effect.promise(() => PGlite.create(Path.join(storage.env.DATA_DIR!, "pgdata"))),
        (db) => Effect.promise(() => db.close())
      )
      const server = yield* Effect.acquireRelease(
        Effect.promise(async () => {
          const server = new PGLiteSocketServer({ db, host: "127.0.0.1", port: 0 })
          await server.start()
          return server
        }),
        (server) => Effect.promise(() => server.stop())
      )
      const [host, port] = server.getServerConn().split(":")
      return PgClient.layer({ host: host!, port: Number(port), username: "postgres", database: "postgres", maxConnections: 1 })
    }))

describe("migration 0009_run_evidence", () => {
  it.live("applies to a database of the previous version: its runs keep their counts and get null / [] evidence", () =>
    Effect.scoped(Effect.gen(function*() {
      const storage = yield* makeStorage
      const inbox = yield* makeSmsInbox
      yield* Effect.scoped(Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const applied = yield* PgMigrator.run({ loader: previousMigrations, table: "atrium_migrations" })
        assert.strictEqual(applied.length, 8)
        yield* sql`INSERT INTO users (id, phone) VALUES ('usr_old', '+8613900000001')`
        yield* sql`
          INSERT INTO runs (id, payer_id, status, input_tokens, output_tokens, tools_denied, finished_at)
          VALUES ('run_old', 'usr_old', 'completed', 12, 7, 2, now())`
      }).pipe(Effect.provide(Layer.merge(clientOf(storage), NodeContext.layer))))

      const server = yield* startServer(storage, inbox)
      const rows = yield* server.query(
        `SELECT status, input_tokens, output_tokens, tools_denied, answer_chars, denied_tools FROM runs WHERE id = 'run_old'`
      )
      const row = rows[0]!
      const denied = typeof row.denied_tools === "string" ? JSON.parse(row.denied_tools) : row.denied_tools
      assert.deepStrictEqual(
        [row.status, row.input_tokens, row.output_tokens, row.tools_denied, row.answer_chars, denied],
        ["completed", 12, 7, 2, null, []]
      )
      const versions = yield* server.query(`SELECT migration_id FROM atrium_migrations ORDER BY migration_id`)
      // Every migration of this version, the ones after 0009 included, applied once.
      const all = (yield* migrations).map(([id]) => id)
      assert.deepStrictEqual(versions.map((v) => Number(v.migration_id)), all)
      assert.include(all, 9)
    })), 120_000)
})
