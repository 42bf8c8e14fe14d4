import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { request } from "../support/Client.js"
import { TestServer } from "../support/TestServer.js"
import { agentWith, apiKeyOf, ENV, LIVE, newUser } from "../runs/runs-support.js"
import { pollUntil } from "../support/Poll.js"

/**
 * Issue 43 item 4 (docs/schedules.md): a schedule is made, read, changed, paused, resumed and removed in its
 * caller's partition only; bad input is a 400 naming the problem and makes nothing; a due firing starts one
 * background run, whatever happens around it; a missed firing with `missed: "skip"` starts none; an expert that can
 * no longer run, or a wallet with nothing in it, fails its firing with `schedule.failed`, and the schedule goes on.
 */

const as = (key: string, endUser = "u1") => ({ token: key, headers: { "x-end-user-id": endUser } })

/** Moves a schedule's next firing to `secondsAgo` in the past, as if its time had come (or gone) while it waited. */
const makeDue = (id: string, secondsAgo: number) =>
  Effect.flatMap(TestServer, (server) =>
    server.query(`UPDATE schedules SET next_run_at = now() - interval '${secondsAgo} seconds' WHERE id = '${id}'`))

const firingsOf = (id: string) =>
  Effect.flatMap(TestServer, (server) =>
    server.query(`SELECT status, run_id, error FROM schedule_firings WHERE schedule_id = '${id}' ORDER BY fire_at`))

const waitFor = <A, R>(read: Effect.Effect<A, never, R>, until: (value: A) => boolean, what: string) =>
  pollUntil(read, until, what, { within: 10_000 })

describe("schedules", () => {
  layer(TestServer.layer({
    ...ENV,
    SCHEDULE_POLL: "100 millis",
    SECRETS_KEY: "schedules-test-secrets-key-0123456789",
    TOOL_ALLOWED_HOSTS: "127.0.0.1"
  }), LIVE)((it) => {
    it.effect("made, read, changed, paused, resumed and removed in the caller's partition only", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const key = yield* apiKeyOf(user)
        const created = yield* request("POST", "/v1/schedules", {
          ...as(key),
          body: { agent, cron: "30 2 * * *", timezone: "Europe/Paris", input: "daily digest", description: "nightly" }
        })
        assert.strictEqual(created.status, 201, created.text)
        const schedule = created.body
        assert.match(schedule.id, /^sched_/)
        assert.strictEqual(schedule.status, "active")
        assert.strictEqual(schedule.end_user_id, "u1")
        assert.strictEqual(schedule.missed, "run_once")
        // 02:30 in Paris is 00:30 or 01:30 UTC, depending on the season.
        assert.match(schedule.next_run_at, /T0[01]:30:00\.000Z$/)
        assert.isAbove(Date.parse(schedule.next_run_at), Date.now())

        const got = yield* request("GET", `/v1/schedules/${schedule.id}`, as(key))
        assert.deepStrictEqual(got.body, schedule)
        // An id of another kind in the path is an unknown schedule, not a bad request.
        const wrongKind = yield* request("GET", "/v1/schedules/run_0000", as(key))
        assert.strictEqual(wrongKind.status, 404)
        assert.strictEqual(wrongKind.body.error.type, "not_found")
        const listed = yield* request("GET", "/v1/schedules", as(key))
        assert.deepStrictEqual(listed.body.data.map((s: any) => s.id), [schedule.id])
        // Another end user of the account, and another account, find nothing, and cannot change it.
        for (const other of [as(key, "u2"), { token: (yield* newUser).token }]) {
          assert.strictEqual((yield* request("GET", `/v1/schedules/${schedule.id}`, other)).status, 404)
          assert.strictEqual((yield* request("POST", `/v1/schedules/${schedule.id}/pause`, other)).status, 404)
          assert.strictEqual((yield* request("DELETE", `/v1/schedules/${schedule.id}`, other)).status, 404)
          assert.deepStrictEqual((yield* request("GET", "/v1/schedules", other)).body.data, [])
        }

        const patched = yield* request("PATCH", `/v1/schedules/${schedule.id}`, { ...as(key), body: { cron: "0 9 * * 1", timezone: "UTC" } })
        assert.strictEqual(patched.status, 200, patched.text)
        assert.strictEqual(new Date(patched.body.next_run_at).getUTCDay(), 1)
        assert.match(patched.body.next_run_at, /T09:00:00\.000Z$/)
        const paused = yield* request("POST", `/v1/schedules/${schedule.id}/pause`, as(key))
        assert.strictEqual(paused.body.status, "paused")
        assert.isNull(paused.body.next_run_at)
        const again = yield* request("POST", `/v1/schedules/${schedule.id}/pause`, as(key))
        assert.deepStrictEqual(again.body, paused.body, "a second pause changes nothing")
        const resumed = yield* request("POST", `/v1/schedules/${schedule.id}/resume`, as(key))
        assert.strictEqual(resumed.body.status, "active")
        assert.strictEqual(resumed.body.next_run_at, patched.body.next_run_at)

        const removed = yield* request("DELETE", `/v1/schedules/${schedule.id}`, as(key))
        assert.deepStrictEqual(removed.body, { id: schedule.id, object: "schedule", deleted: true })
        assert.strictEqual((yield* request("GET", `/v1/schedules/${schedule.id}`, as(key))).status, 404)
      }))

    it.effect("bad input is a 400 naming the problem, an unknown expert, session or endpoint a 404, and nothing is made", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const key = yield* apiKeyOf(user)
        const cases: Array<[Record<string, unknown>, number, RegExp]> = [
          [{ agent, cron: "* * * *", input: "x" }, 400, /5 fields/],
          [{ agent, cron: "*/5 * * * * *", input: "x" }, 400, /5 fields/],
          [{ agent, cron: "61 * * * *", input: "x" }, 400, /cron/],
          [{ agent, cron: "0 9 * * *", timezone: "Mars/Olympus", input: "x" }, 400, /time zone/],
          [{ agent, cron: "0 9 * * *", input: "" }, 400, /input/],
          [{ agent, cron: "0 9 * * *", input: "x", missed: "twice" }, 400, /missed/],
          [{ agent: "no-such-expert", cron: "0 9 * * *", input: "x" }, 404, /no-such-expert/],
          [{ agent, cron: "0 9 * * *", input: "x", session: "ses_missing" }, 404, /ses_missing/],
          [{ agent, cron: "0 9 * * *", input: "x", webhook: "whk_missing" }, 404, /whk_missing/],
          [{ agent, cron: "0 9 * * *", input: "x", end_user_id: "u2" }, 400, /X-End-User-Id/]
        ]
        for (const [body, status, message] of cases) {
          const reply = yield* request("POST", "/v1/schedules", { ...as(key), body })
          assert.strictEqual(reply.status, status, `${JSON.stringify(body)}: ${reply.text}`)
          assert.match(reply.body.error.message, message)
          assert.isString(reply.body.error.type)
        }
        assert.deepStrictEqual((yield* request("GET", "/v1/schedules", as(key))).body.data, [])
      }))

    it.effect("a due firing starts one background run, once; a missed one with missed: skip starts none", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const key = yield* apiKeyOf(user)
        const made = yield* request("POST", "/v1/schedules", { ...as(key), body: { agent, cron: "0 9 * * *", input: "scheduled hello" } })
        const id = made.body.id as string
        yield* makeDue(id, 5)
        const [firing] = yield* waitFor(firingsOf(id), (rows) => rows.length === 1 && rows[0]!.status === "started", "the firing started")
        const runId = firing!.run_id as string
        assert.match(runId, /^run_/)
        const run = yield* waitFor(
          Effect.map(request("GET", `/v1/runs/${runId}`, as(key)), (reply) => reply.body),
          (run) => run.status === "completed",
          "the firing's run completed"
        )
        assert.strictEqual(run.output, "You said: scheduled hello")
        assert.strictEqual(run.background, true)
        assert.isAbove(run.credits_charged, 0)
        const after = yield* request("GET", `/v1/schedules/${id}`, as(key))
        assert.strictEqual(after.body.last_firing.run_id, runId)
        assert.isAbove(Date.parse(after.body.next_run_at), Date.now(), "moved on to the next day's time")

        const skipping = yield* request("POST", "/v1/schedules", {
          ...as(key),
          body: { agent, cron: "0 9 * * *", input: "skipped hello", missed: "skip" }
        })
        yield* makeDue(skipping.body.id, 600)
        const [skipped] = yield* waitFor(firingsOf(skipping.body.id), (rows) => rows.length === 1, "the missed firing was seen")
        assert.strictEqual(skipped!.status, "skipped")
        assert.isNull(skipped!.run_id)
        // A later pass saw the other schedule, so passes went on after the first firing: it stays one, with one run.
        assert.strictEqual((yield* firingsOf(id)).length, 1)
        const runs = yield* request("GET", `/v1/runs?agent=${agent}`, as(key))
        assert.strictEqual(runs.body.data.length, 1, "the skipped firing started no run")
      }))

  })

  layer(TestServer.layer({
    ...ENV,
    SIGNUP_CREDITS: "0",
    SCHEDULE_POLL: "100 millis",
    SECRETS_KEY: "schedules-test-secrets-key-0123456789",
    TOOL_ALLOWED_HOSTS: "127.0.0.1"
  }), LIVE)((it) => {
    it.effect("a wallet with nothing in it fails the firing with schedule.failed, to the schedule's own endpoint; the schedule goes on", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const key = yield* apiKeyOf(user)
        // An endpoint that subscribes to nothing about schedules: it gets the failure as this schedule's own.
        const hook = yield* request("POST", "/v1/webhooks", {
          token: user.token,
          body: { url: "http://127.0.0.1:9/atrium", events: ["run.completed"] }
        })
        assert.strictEqual(hook.status, 201, hook.text)
        const made = yield* request("POST", "/v1/schedules", {
          ...as(key),
          body: { agent, cron: "*/5 * * * *", input: "hello", webhook: hook.body.id }
        })
        assert.strictEqual(made.status, 201, made.text)
        const id = made.body.id as string
        // The wallet exists (made when first read) and holds nothing: this server grants no signup credits.
        const wallet = yield* request("GET", "/api/wallet", { token: user.token })
        assert.strictEqual(wallet.status, 200, wallet.text)
        yield* makeDue(id, 5)
        const [firing] = yield* waitFor(firingsOf(id), (rows) => rows.length === 1 && rows[0]!.status !== "pending", "the firing settled")
        assert.strictEqual(firing!.status, "failed")
        assert.match(String(firing!.error), /no credits/)
        assert.isNull(firing!.run_id)
        const deliveries = yield* Effect.flatMap(TestServer, (server) =>
          server.query(`
            SELECT v.type, v.data, d.endpoint_id FROM webhook_events v JOIN webhook_deliveries d ON d.event_id = v.id
            WHERE v.account_id = '${user.userId}'`))
        assert.deepStrictEqual(deliveries.map((row) => [row.type, row.endpoint_id]), [["schedule.failed", hook.body.id]])
        assert.strictEqual((deliveries[0]!.data as any).id, id)
        const schedule = yield* request("GET", `/v1/schedules/${id}`, as(key))
        assert.strictEqual(schedule.body.status, "active")
        assert.strictEqual(schedule.body.last_firing.status, "failed")
        assert.isAbove(Date.parse(schedule.body.next_run_at), Date.now())
        assert.strictEqual((yield* request("GET", "/v1/runs", as(key))).body.data.length, 0, "no run was started")
      }))
  })
})
