import { assert, describe, it, layer } from "@effect/vitest"
import { Effect } from "effect"
import { registerApp, authorizeApp } from "../support/Billing.js"
import { request } from "../support/Client.js"
import { pollUntil } from "../support/Poll.js"
import { openStream, streamOf, textOf } from "../support/Sse.js"
import { makeSmsInbox, makeMigratedStorage, startServer, TestServer } from "../support/TestServer.js"
import { agentWith, ENV, LIVE, newUser } from "../runs/runs-support.js"

/** Sessions across restarts and disconnects, and OAuth callers (issue 6 items 1, 3, 5, 7). */

const createSession = (token: string, agent: string) =>
  Effect.gen(function*() {
    const reply = yield* request("POST", "/v1/sessions", { token, body: { agent } })
    assert.strictEqual(reply.status, 201, reply.text)
    return reply.body.id as string
  })

const say = (token: string, session: string, message: string) =>
  streamOf(`/v1/sessions/${session}/events`, { token, body: { type: "message", message } })

/**
 * A session whose running turn (`/slow 200`) a shutdown cut: a server with a grace shorter than the turn starts it,
 * `meanwhile` runs while it runs, then the server stops.
 */
const cutByShutdown = <E>(
  storage: Parameters<typeof startServer>[0],
  inbox: Parameters<typeof startServer>[1],
  meanwhile: (session: string, token: string) => Effect.Effect<void, E, TestServer> = () => Effect.void
) =>
  Effect.gen(function*() {
    let stopFrom = 0
    const cut = yield* Effect.scoped(Effect.gen(function*() {
      const server = yield* startServer(storage, inbox, { ...ENV, SHUTDOWN_GRACE: "1 second" })
      return yield* Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const session = yield* createSession(user.token, agent)
        const live = yield* openStream(`/v1/sessions/${session}/events`, { token: user.token, body: { type: "message", message: "/slow 200" } })
        yield* live.until("output.text.delta")
        yield* meanwhile(session, user.token)
        stopFrom = Date.now()
        return { token: user.token, session }
      }).pipe(Effect.provideService(TestServer, server))
    }))
    // A bound on the stop, not a speed check: the cut turn's settle to a wallet its stopping runner can no longer
    // reach waited out the 12 s entity deadline (services mode: every such stop took the grace and 12 s more).
    const stopMs = Date.now() - stopFrom
    assert.isBelow(stopMs, 8_000, `the stop took ${stopMs} ms with a 1 s grace`)
    return cut
  })

describe("session lifecycle", () => {
  it.scopedLive("a restart between turns keeps the history and the seq", () =>
    Effect.gen(function*() {
      const storage = yield* makeMigratedStorage
      const inbox = yield* makeSmsInbox
      const before = yield* Effect.scoped(Effect.gen(function*() {
        const server = yield* startServer(storage, inbox, ENV)
        return yield* Effect.gen(function*() {
          const user = yield* newUser
          const agent = yield* agentWith(user.token)
          const session = yield* createSession(user.token, agent)
          const first = yield* say(user.token, session, "remember me")
          return { token: user.token, session, lastSeq: first.events[first.events.length - 1]!.data.seq as number }
        }).pipe(Effect.provideService(TestServer, server))
      }))
      const server = yield* startServer(storage, inbox, ENV)
      yield* Effect.gen(function*() {
        const second = yield* say(before.token, before.session, "/history")
        assert.strictEqual(textOf(second), "I see 2 earlier messages.")
        assert.strictEqual(second.events[0]!.data.seq, before.lastSeq + 1, "seq goes on where it stopped")
        const replay = yield* openStream(`/v1/sessions/${before.session}/events?after=0`, { token: before.token, method: "GET" })
        const all = yield* replay.until("run.completed")
        yield* replay.cancel
        const seqs = all.events.map((e) => e.data.seq)
        assert.deepStrictEqual(seqs, Array.from({ length: seqs.length }, (_, i) => i + 1))
      }).pipe(Effect.provideService(TestServer, server))
    }), { timeout: 120_000 })

  it.scopedLive("a turn cut by a shutdown is closed as interrupted when the session is next read", () =>
    Effect.gen(function*() {
      const storage = yield* makeMigratedStorage
      const inbox = yield* makeSmsInbox
      const before = yield* cutByShutdown(storage, inbox)
      const server = yield* startServer(storage, inbox, ENV)
      yield* Effect.gen(function*() {
        // Loading the session closes the cut turn, so it is no longer in flight: read the log from the start.
        const follower = yield* openStream(`/v1/sessions/${before.session}/events?after=0`, { token: before.token, method: "GET" })
        const replayed = yield* follower.until("run.failed")
        yield* follower.cancel
        assert.strictEqual(replayed.events[0]!.event, "run.created")
        const failed = replayed.events[replayed.events.length - 1]!.data
        assert.strictEqual(failed.code, "interrupted")
        const detail = yield* request("GET", `/v1/sessions/${before.session}`, { token: before.token })
        assert.strictEqual(detail.body.status, "idle")
        const next = yield* say(before.token, before.session, "still here")
        assert.strictEqual(textOf(next), "You said: still here")
      }).pipe(Effect.provideService(TestServer, server))
    }), { timeout: 120_000 })

  it.scopedLive("a turn queued behind one cut by a shutdown runs after the restart", () =>
    Effect.gen(function*() {
      const storage = yield* makeMigratedStorage
      const inbox = yield* makeSmsInbox
      const before = yield* cutByShutdown(storage, inbox, (session, token) =>
        Effect.gen(function*() {
          yield* openStream(`/v1/sessions/${session}/events`, { token, body: { type: "message", message: "owed" } })
          // Acknowledged means written: wait for the row rather than for the stream's first event (there is none yet).
          const server = yield* TestServer
          const queuedNow = server.query(`SELECT turn FROM session_queue WHERE session_id = '${session}' ORDER BY turn`)
          // Polled: the queued turn's row is the only sign it was written (its stream says nothing yet).
          const queued = yield* pollUntil(queuedNow, (rows) => rows.length >= 2, "the owed turn queued", { every: 50, within: 30_000 })
          assert.deepStrictEqual(queued.map((row) => Number(row.turn)), [1, 2])
        }))
      const server = yield* startServer(storage, inbox, ENV)
      yield* Effect.gen(function*() {
        const follower = yield* openStream(`/v1/sessions/${before.session}/events?after=0`, { token: before.token, method: "GET" })
        // A read may bring more than asked for (the owed turn starts at once): find the end of the cut turn.
        const cut = (yield* follower.until("run.failed")).events.find((e) => e.event === "run.failed")!
        assert.strictEqual(cut.data.code, "interrupted")
        const both = yield* follower.until("run.completed")
        yield* follower.cancel
        const owed = both.events.filter((e) => e.data.seq > cut.data.seq)
        assert.strictEqual(owed[0]!.event, "run.created")
        assert.strictEqual(owed.filter((e) => e.event === "output.text.delta").map((e) => e.data.delta).join(""), "You said: owed")
        assert.deepStrictEqual(yield* server.query(`SELECT turn FROM session_queue WHERE session_id = '${before.session}'`), [])
        const detail = yield* request("GET", `/v1/sessions/${before.session}`, { token: before.token })
        // The history holds the owed turn; the cut one never reached it (as for any turn a shutdown cut).
        assert.deepStrictEqual(detail.body.messages.map((m: { role: string }) => m.role), ["user", "assistant"])
      }).pipe(Effect.provideService(TestServer, server))
    }), { timeout: 120_000 })

  it.scopedLive("runs a stopped runner left running are closed by the next owner, each with its own turn's credits", () =>
    Effect.gen(function*() {
      const storage = yield* makeMigratedStorage
      const inbox = yield* makeSmsInbox
      const before = yield* Effect.scoped(Effect.gen(function*() {
        const server = yield* startServer(storage, inbox, ENV)
        return yield* Effect.gen(function*() {
          const user = yield* newUser
          const agent = yield* agentWith(user.token)
          const session = yield* createSession(user.token, agent)
          // Two turns, billed through the wallet (the ledger holds each turn's steps under its own key prefix).
          assert.strictEqual(textOf(yield* say(user.token, session, "one")), "You said: one")
          assert.isNotEmpty(textOf(yield* say(user.token, session, "/slow 8")))
          // What a runner leaves when it stops after a turn's end is in the log and before its run's row is closed
          // (the next owner closes the log's turn and then the runs: two statements), for both turns. The runs table
          // only: the ledger and the wallets stay as the real charges left them.
          yield* server.query(
            `UPDATE runs SET status = 'running', credits_charged = 0, finished_at = NULL WHERE session_id = '${session}'`
          )
          return { token: user.token, session }
        }).pipe(Effect.provideService(TestServer, server))
      }))
      const server = yield* startServer(storage, inbox, ENV)
      yield* Effect.gen(function*() {
        // No turn is in flight: the session's next owner closes both runs as it loads the session.
        assert.strictEqual(textOf(yield* say(before.token, before.session, "three")), "You said: three")
        const runs = yield* server.query(`
          SELECT e.turn, r.status, r.failure_code, r.credits_charged::text AS recorded,
            coalesce((SELECT -sum(l.amount) FROM ledger_entries l WHERE l.scope = 'run'
              AND l.idempotency_key LIKE 'session:' || r.session_id || ':' || e.turn || ':%'), 0)::text AS ledger
          FROM runs r JOIN session_events e ON e.session_id = r.session_id AND e.payload->>'type' = 'preparing'
            AND e.payload->>'run_id' = r.id
          WHERE r.session_id = '${before.session}' ORDER BY e.turn`)
        assert.deepStrictEqual(runs.map((r) => [r.turn, r.status, r.failure_code]), [
          [1, "failed", "interrupted"],
          [2, "failed", "interrupted"],
          [3, "completed", null]
        ])
        for (const run of runs) {
          assert.notStrictEqual(run.ledger, "0", `turn ${run.turn} was billed`)
          assert.strictEqual(run.recorded, run.ledger, `turn ${run.turn}: its run records what the ledger holds for it`)
        }
      }).pipe(Effect.provideService(TestServer, server))
    }), { timeout: 120_000 })

  it.scopedLive("a turn with no open stream when its server stops ends within the grace and is billed in full", () =>
    Effect.gen(function*() {
      const storage = yield* makeMigratedStorage
      const inbox = yield* makeSmsInbox
      const before = yield* Effect.scoped(Effect.gen(function*() {
        const server = yield* startServer(storage, inbox, { ...ENV, SHUTDOWN_GRACE: "8 seconds" })
        return yield* Effect.gen(function*() {
          const user = yield* newUser
          const agent = yield* agentWith(user.token)
          const session = yield* createSession(user.token, agent)
          // Its client gone: nothing holds the HTTP server's stop, so the turn ends after the server closed, while the
          // runner stops (sessions/Activation.ts, TurnDrainLive).
          const live = yield* openStream(`/v1/sessions/${session}/events`, { token: user.token, body: { type: "message", message: "/slow 12" } })
          yield* live.until("output.text.delta")
          yield* live.cancel
          return { token: user.token, session }
        }).pipe(Effect.provideService(TestServer, server))
      }))
      const server = yield* startServer(storage, inbox, ENV)
      yield* Effect.gen(function*() {
        const runs = yield* server.query(`
          SELECT r.status, r.credits_charged::text AS recorded,
            coalesce((SELECT -sum(l.amount) FROM ledger_entries l WHERE l.scope = 'run'
              AND l.idempotency_key LIKE 'session:' || r.session_id || ':1:%'), 0)::text AS ledger
          FROM runs r WHERE r.session_id = '${before.session}'`)
        // Ended before the cluster stopped: completed by the stopping runner, its settle posted there. Without the
        // drain the turn ended in its session's finalizer, its settle unanswered, and the ledger held only its hold's
        // void: the run recorded what the next owner found (nothing of the steps run in the grace).
        assert.deepStrictEqual(runs.map((r) => r.status), ["completed"])
        assert.notStrictEqual(runs[0]!.ledger, "0", "the turn's steps are in the ledger")
        assert.strictEqual(runs[0]!.recorded, runs[0]!.ledger, "its run records what the ledger holds for it")
        const replay = yield* openStream(`/v1/sessions/${before.session}/events?after=0`, { token: before.token, method: "GET" })
        const all = yield* replay.until("run.completed")
        yield* replay.cancel
        assert.strictEqual(textOf(all), Array.from({ length: 12 }, (_, i) => `chunk ${i + 1} `).join(""))
      }).pipe(Effect.provideService(TestServer, server))
    }), { timeout: 120_000 })

  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("a client that disconnects does not stop the turn: it finishes, is billed and is in the log", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const session = yield* createSession(user.token, agent)
        const live = yield* openStream(`/v1/sessions/${session}/events`, { token: user.token, body: { type: "message", message: "/slow 8" } })
        yield* live.until("output.text.delta")
        yield* live.cancel
        // A subscriber without `after` gets the turn in flight from its run.created.
        const follower = yield* openStream(`/v1/sessions/${session}/events`, { token: user.token, method: "GET" })
        const followed = yield* follower.until("run.completed")
        yield* follower.cancel
        assert.strictEqual(followed.events[0]!.event, "run.created")
        assert.strictEqual(textOf(followed), Array.from({ length: 8 }, (_, i) => `chunk ${i + 1} `).join(""))
        const completed = followed.events[followed.events.length - 1]!.data
        assert.isAbove(completed.credits_charged, 0)
        const server = yield* TestServer
        const runs = yield* server.query(`SELECT status, credits_charged::text AS credits FROM runs WHERE session_id = '${session}'`)
        assert.deepStrictEqual(runs.map((r) => r.status), ["completed"])
      }))

    it.effect("OAuth callers need agents:write for sessions; with it they own their sessions directly", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const developer = yield* newUser
        const app = yield* registerApp(developer.token)
        const narrow = yield* authorizeApp(user.token, app, "events")
        const wide = yield* authorizeApp(user.token, app, "agents:write")
        const refused = yield* request("POST", "/v1/sessions", { token: narrow.access_token, body: { agent } })
        assert.strictEqual(refused.status, 401, refused.text)
        const session = yield* createSession(wide.access_token, agent)
        const turn = yield* say(wide.access_token, session, "hello from an app")
        assert.strictEqual(textOf(turn), "You said: hello from an app")
        // The app acts for the user: the user's own login sees the session too.
        const mine = yield* request("GET", `/v1/sessions/${session}`, { token: user.token })
        assert.strictEqual(mine.status, 200, mine.text)
      }))
  })
})
