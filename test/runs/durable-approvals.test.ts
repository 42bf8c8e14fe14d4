import { assert, describe, it, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as Http from "node:http"
import { request } from "../support/Client.js"
import { openStream, parseStream } from "../support/Sse.js"
import { makeMigratedStorage, makeSmsInbox, startServer, TestServer } from "../support/TestServer.js"
import { agentWith, apiKeyOf, ENV, LIVE, newUser, pollRun, toolDirective } from "./runs-support.js"

/**
 * Issue 43 item 2 (docs/runs.md, "Approvals in a background run"): a background run that meets an `ask` tool call
 * waits on a `DurableDeferred`, its workflow suspended (no fiber anywhere), and the approval route resolves it on any
 * runner. It survives its runner being stopped and another started on the same database, and goes on when approved;
 * a denied one goes on with the denial, an unanswered one is denied at its `DurableClock` (APPROVAL_TIMEOUT, 2 s here),
 * and a cancel wakes it and ends it `cancelled`, billed only for the step it finished.
 */

const CALC = toolDirective("calculator", { expression: "6 * 7" })
const U1 = { "x-end-user-id": "u1" }

/** A client whose connections stay open between requests for as long as the server keeps them. */
const keptAlive = new Http.Agent({ keepAlive: true })

/**
 * Follows a run's log over `agent` until its `approval.required`: resolves then with the whole stream, to come once it
 * ends (in an object: a promise resolved with a promise would wait for that one).
 */
const followOver = (agent: Http.Agent, url: string, key: string) =>
  new Promise<{ readonly whole: Promise<string> }>((resolve, reject) => {
    const request = Http.get(url, { agent, headers: { authorization: `Bearer ${key}`, ...U1 } }, (response) => {
      let raw = ""
      const whole = new Promise<string>((done) => response.on("end", () => done(raw)))
      response.setEncoding("utf8")
      response.on("data", (text: string) => {
        raw += text
        if (raw.includes("event: approval.required\n")) resolve({ whole })
      })
    })
    request.on("error", reject)
  })

const poll = (key: string, id: string, until: (run: Record<string, any>) => boolean) => pollRun(key, id, until)

const terminal = (run: Record<string, any>) => run.status !== "queued" && run.status !== "in_progress"

/** Starts a background run of `agent` and reads its log until its `approval.required`. */
const waitingRun = (key: string, agent: string) =>
  Effect.gen(function*() {
    const started = yield* request("POST", "/v1/agents/run", { token: key, headers: U1, body: { agent, message: CALC, background: true } })
    assert.strictEqual(started.status, 202, started.text)
    const live = yield* openStream(`/v1/runs/${started.body.id}/events`, { token: key, method: "GET", headers: U1 })
    const asked = yield* live.until("approval.required")
    // Done with it (a follower left open no longer holds its server's stop: the restart test below).
    yield* live.cancel
    const required = asked.events.find((e) => e.event === "approval.required")
    assert.isDefined(required, asked.raw)
    return { id: started.body.id as string, approvalId: required!.data.approval_id as string, required: required!.data }
  })

/** The whole log of a run that has ended. */
const logOf = (key: string, id: string) =>
  Effect.flatMap(TestServer, (server) =>
    Effect.promise(() =>
      fetch(`${server.url}/v1/runs/${id}/events`, { headers: { authorization: `Bearer ${key}`, ...U1 } }).then(async (r) => parseStream(await r.text()))
    ))

const answer = (key: string, approvalId: string, body: Record<string, unknown>) =>
  request("POST", `/v1/approvals/${approvalId}`, { token: key, headers: U1, body })

/** The run's ledger entries: `<run>:<step>` keys and amounts (micro-credits), as the wallet took them. */
const ledgerOf = (runId: string) =>
  Effect.flatMap(TestServer, (server) =>
    server.query(`SELECT idempotency_key, amount::text AS amount FROM ledger_entries WHERE scope = 'run' AND idempotency_key LIKE '${runId}:%' ORDER BY idempotency_key`))

describe("durable approvals: on one server", () => {
  // Long enough that only the answer ends the wait, however loaded the machine (the timeout has its own server below).
  layer(TestServer.layer({ ...ENV, APPROVAL_TIMEOUT: "2 minutes", BACKGROUND_CANCEL_POLL: "100 millis" }), LIVE)((it) => {
    it.effect("approved: the tool runs and the run completes; denied: the model goes on with the denial", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const key = yield* apiKeyOf(user)
        const agent = yield* agentWith(user.token, { calculator: "ask" })

        const yes = yield* waitingRun(key, agent)
        assert.match(yes.approvalId, /^apv_/)
        assert.strictEqual(yes.required.name, "calculator")
        assert.deepStrictEqual(yes.required.arguments, { expression: "6 * 7" })
        // Someone else's answer is a 404 and leaves it open; the owner's goes through once.
        const foreign = yield* request("POST", `/v1/approvals/${yes.approvalId}`, { token: key, headers: { "x-end-user-id": "u2" }, body: { decision: "approve" } })
        assert.strictEqual(foreign.status, 404, foreign.text)
        const approved = yield* answer(key, yes.approvalId, { decision: "approve" })
        assert.strictEqual(approved.status, 200, approved.text)
        const twice = yield* answer(key, yes.approvalId, { decision: "deny" })
        assert.strictEqual(twice.status, 404, twice.text)
        const done = yield* poll(key, yes.id, terminal)
        assert.strictEqual(done.status, "completed", JSON.stringify(done))
        const told = yield* logOf(key, yes.id)
        const names = told.events.map((e) => e.event)
        assert.include(names, "tool_call.completed")
        assert.strictEqual(names.filter((n) => n === "approval.required").length, 1)
        assert.strictEqual(told.events.find((e) => e.event === "tool_call.result")?.data.output.result, 42)

        const no = yield* waitingRun(key, agent)
        const denied = yield* answer(key, no.approvalId, { decision: "deny", reason: "not today" })
        assert.strictEqual(denied.status, 200, denied.text)
        const ended = yield* poll(key, no.id, terminal)
        assert.strictEqual(ended.status, "completed", JSON.stringify(ended))
        const log = yield* logOf(key, no.id)
        assert.deepInclude(log.events.find((e) => e.event === "tool_call.denied")!.data, { name: "calculator", reason: "not today" })
        assert.notInclude(log.events.map((e) => e.event), "tool_call.completed")
        // Billed per step, once each: the step that asked and the step after the answer.
        const entries = yield* ledgerOf(no.id)
        assert.deepStrictEqual(entries.map((e) => e.idempotency_key), [`${no.id}:1`, `${no.id}:2`])
        assert.strictEqual(-entries.reduce((sum, e) => sum + Number(e.amount), 0) / 1e6, ended.credits_charged)
      }), { timeout: 60_000 })

    it.effect("a cancel wakes a run waiting for its approval: cancelled, billed for the step it finished", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const key = yield* apiKeyOf(user)
        const agent = yield* agentWith(user.token, { calculator: "ask" })
        const waiting = yield* waitingRun(key, agent)
        const cancelled = yield* request("POST", `/v1/runs/${waiting.id}/cancel`, { token: key, headers: U1 })
        assert.strictEqual(cancelled.status, 200, cancelled.text)
        const ended = yield* poll(key, waiting.id, terminal)
        assert.strictEqual(ended.status, "cancelled", JSON.stringify(ended))
        const entries = yield* ledgerOf(waiting.id)
        assert.deepStrictEqual(entries.map((e) => e.idempotency_key), [`${waiting.id}:1`])
        assert.strictEqual(-Number(entries[0]!.amount) / 1e6, ended.credits_charged)
        assert.isAbove(ended.credits_charged, 0)
        // Its approval went with it.
        const late = yield* answer(key, waiting.approvalId, { decision: "approve" })
        assert.strictEqual(late.status, 404, late.text)
        const log = yield* logOf(key, waiting.id)
        assert.strictEqual(log.events[log.events.length - 1]!.data.code, "cancelled")
      }), { timeout: 60_000 })
  })
})

describe("durable approvals: nobody answers", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("nobody answers: denied with reason timeout at its DurableClock, and the run goes on", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const key = yield* apiKeyOf(user)
        const agent = yield* agentWith(user.token, { calculator: "ask" })
        const waiting = yield* waitingRun(key, agent)
        const ended = yield* poll(key, waiting.id, terminal)
        assert.strictEqual(ended.status, "completed", JSON.stringify(ended))
        const log = yield* logOf(key, waiting.id)
        assert.strictEqual(log.events.find((e) => e.event === "tool_call.denied")!.data.reason, "timeout")
        // Expired: the answer is a 404 now.
        const late = yield* answer(key, waiting.approvalId, { decision: "approve" })
        assert.strictEqual(late.status, 404, late.text)
      }), { timeout: 60_000 })
  })
})

describe("durable approvals: across a restart", () => {
  it.scopedLive("a run waiting for its approval survives its server stopping; another server on the database resumes it when approved", () =>
    Effect.gen(function*() {
      const storage = yield* makeMigratedStorage
      const inbox = yield* makeSmsInbox
      // Long enough that only the answer ends the wait (no timeout, no deadline in the way).
      const env = { ...ENV, APPROVAL_TIMEOUT: "10 minutes" }

      let stopping = 0
      const first = yield* Effect.scoped(Effect.gen(function*() {
        const server = yield* startServer(storage, inbox, env)
        return yield* Effect.gen(function*() {
          const user = yield* newUser
          const key = yield* apiKeyOf(user)
          const agent = yield* agentWith(user.token, { calculator: "ask" })
          const waiting = yield* waitingRun(key, agent)
          // Someone still follows the waiting run's log as its server stops, on a connection its client keeps alive.
          const follower = yield* Effect.promise(() => followOver(keptAlive, `${server.url}/v1/runs/${waiting.id}/events`, key))
          stopping = Date.now()
          return { key, follower, ...waiting }
        }).pipe(Effect.provideService(TestServer, server))
      }))
      // The follower did not hold the stop (its server's SHUTDOWN_GRACE is 10 s, which it took before: the Node server
      // interrupts no request fiber), nor did its connection once idle; its stream ended without `[DONE]`: the run
      // goes on, its client resumes.
      assert.isBelow(Date.now() - stopping, 8_000, "the server stopped without waiting out its 10 s grace for the follower")
      const cut = parseStream(yield* Effect.promise(() => first.follower.whole), { expectDone: false })
      assert.isFalse(cut.done, cut.raw)
      assert.strictEqual(cut.events.filter((e) => e.event === "approval.required").length, 1)
      keptAlive.destroy()
      // The first server is gone; the run waited in no one's memory. A second one answers and resumes it.
      const server = yield* startServer(storage, inbox, env)
      yield* Effect.gen(function*() {
        const before = yield* request("GET", `/v1/runs/${first.id}`, { token: first.key, headers: U1 })
        assert.strictEqual(before.body.status, "in_progress", before.text)
        const approved = yield* answer(first.key, first.approvalId, { decision: "approve" })
        assert.strictEqual(approved.status, 200, approved.text)
        const done = yield* poll(first.key, first.id, terminal)
        assert.strictEqual(done.status, "completed", JSON.stringify(done))
        const told = yield* logOf(first.key, first.id)
        assert.strictEqual(told.events.find((e) => e.event === "tool_call.result")?.data.output.result, 42)
        // Nothing told twice by the replay on the second server: one run.created, one approval.required.
        const names = told.events.map((e) => e.event)
        assert.strictEqual(names.filter((n) => n === "run.created").length, 1)
        assert.strictEqual(names.filter((n) => n === "approval.required").length, 1)
        const entries = yield* ledgerOf(first.id)
        assert.deepStrictEqual(entries.map((e) => e.idempotency_key), [`${first.id}:1`, `${first.id}:2`])
        assert.strictEqual(-entries.reduce((sum, e) => sum + Number(e.amount), 0) / 1e6, done.credits_charged)
      }).pipe(Effect.provideService(TestServer, server))
    }), { timeout: 120_000 })
})

describe("durable approvals: a subagent's, inside a delegation", () => {
  it.scopedLive("a background run's subagent waits for its approval durably: approved after a restart, the tree completes, each step billed once", () =>
    Effect.gen(function*() {
      const storage = yield* makeMigratedStorage
      const inbox = yield* makeSmsInbox
      const env = { ...ENV, APPROVAL_TIMEOUT: "10 minutes" }

      const first = yield* Effect.scoped(Effect.gen(function*() {
        const server = yield* startServer(storage, inbox, env)
        return yield* Effect.gen(function*() {
          const user = yield* newUser
          const key = yield* apiKeyOf(user)
          const child = yield* agentWith(user.token, { calculator: "ask" })
          const parent = yield* agentWith(user.token, {}, { subagents: [child] })
          const started = yield* request("POST", "/v1/agents/run", {
            token: key,
            headers: U1,
            body: { agent: parent, message: `/delegate ${child} ${CALC}`, background: true }
          })
          assert.strictEqual(started.status, 202, started.text)
          const live = yield* openStream(`/v1/runs/${started.body.id}/events`, { token: key, method: "GET", headers: U1 })
          const asked = yield* live.until("approval.required")
          yield* live.cancel
          const required = asked.events.find((e) => e.event === "approval.required")
          assert.isDefined(required, asked.raw)
          // The child's approval is the parent run's: its row names the workflow that waits for it.
          const rows = yield* server.query(`SELECT run_id FROM pending_approvals WHERE id = '${required!.data.approval_id}'`)
          assert.deepStrictEqual(rows.map((r) => r.run_id), [started.body.id])
          return { key, id: started.body.id as string, approvalId: required!.data.approval_id as string }
        }).pipe(Effect.provideService(TestServer, server))
      }))
      // The first server is gone, and the child with it: nothing of the tree waited in memory.
      const server = yield* startServer(storage, inbox, env)
      yield* Effect.gen(function*() {
        const approved = yield* answer(first.key, first.approvalId, { decision: "approve" })
        assert.strictEqual(approved.status, 200, approved.text)
        const done = yield* poll(first.key, first.id, terminal)
        assert.strictEqual(done.status, "completed", JSON.stringify(done))
        const told = yield* logOf(first.key, first.id)
        const names = told.events.map((e) => e.event)
        // Told once each: the replays on the second server told nothing of what the first had told.
        for (const name of ["run.created", "approval.required", "delegation.started", "delegation.completed", "tool_call.result"]) {
          assert.strictEqual(names.filter((n) => n === name).length, 1, `${name} in ${names.join(", ")}`)
        }
        const completed = told.events.find((e) => e.event === "delegation.completed")!.data
        assert.strictEqual(completed.status, "completed")
        assert.include(completed.output, `calculator returned: {"expression":"6 * 7","result":42}`)

        // One child run (its id the parent's call's place), completed; each step of each run billed once, and the
        // parent's credits its own steps' and its child's.
        const runs = yield* server.query(`SELECT id, status, credits_charged::text AS credits FROM runs WHERE parent_run_id = '${first.id}'`)
        assert.deepStrictEqual(runs.map((r) => r.status), ["completed"])
        const childId = runs[0]!.id as string
        const parentEntries = yield* ledgerOf(first.id)
        const childEntries = yield* ledgerOf(childId)
        assert.deepStrictEqual(parentEntries.map((e) => e.idempotency_key), [`${first.id}:1`, `${first.id}:2`])
        assert.deepStrictEqual(childEntries.map((e) => e.idempotency_key), [`${childId}:1`, `${childId}:2`])
        const sum = (entries: ReadonlyArray<Record<string, any>>) => -entries.reduce((total, e) => total + Number(e.amount), 0)
        assert.strictEqual(sum(childEntries), Number(runs[0]!.credits))
        assert.strictEqual((sum(parentEntries) + sum(childEntries)) / 1e6, done.credits_charged)
      }).pipe(Effect.provideService(TestServer, server))
    }), { timeout: 120_000 })
})
