import { assert } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import * as Crypto from "node:crypto"
import { userIdOf } from "../support/Billing.js"
import { requestAt } from "../support/Client.js"
import { pollUntil } from "../support/Poll.js"
import { freePort, launchPlatform, type PlatformProcess } from "../support/Process.js"
import { type LiveStream, openStream, type ParsedStream } from "../support/Sse.js"
import { internalAuth, type SmsInbox, TestServer } from "../support/TestServer.js"
import { CODE, makeShared, type Shared } from "./support.js"

/**
 * What the cluster files of issue 13 do to their runners: start them over one shared database, log users in, charge,
 * open sessions and streams on a chosen runner. A runner is a real `dist/main.js` process of one cluster, sharing a
 * database, a Redis prefix and a JWT secret with the others, as an operator scales out; services mode only
 * (DATABASE_URL), embedded mode being one process by design. The tests are split over `cluster*.test.ts` so that
 * their runners (minutes of processes in all) spread over the suite's workers.
 */

export const PHONES = Array.from({ length: 32 }, (_, i) => `+1555${Crypto.randomInt(1e6).toString().padStart(6, "0")}${i}`)

/** A fresh database (empty: the runners migrate it together), Redis prefix and secret every runner of a test shares. */
export const makeClusterShared = makeShared("cluster", { fromTemplate: false, phones: PHONES, env: { APPROVAL_TIMEOUT: "60 seconds" } })

export const runner = (shared: Shared, env: Record<string, string> = {}) =>
  Effect.flatMap(freePort, (port) => launchPlatform({ ...shared.env, ...env, RUNNER_PORT: String(port) }))

/** The test helpers that take a `TestServer` talk to `platform`. */
export const at = (platform: PlatformProcess) =>
  Effect.provideService(TestServer, {
    url: platform.url,
    inbox: undefined as unknown as SmsInbox,
    query: () => Effect.dieMessage("not used")
  })

export interface User {
  readonly token: string
  readonly userId: string
  readonly apiKey: string
}

let nextPhone = 0
export const newUser = (platform: PlatformProcess) =>
  Effect.gen(function*() {
    const phone = PHONES[nextPhone++]!
    const login = yield* requestAt(platform.url, "POST", "/api/auth/login", { body: { phone, code: CODE } })
    assert.strictEqual(login.status, 200, login.text)
    const token = login.body.token as string
    const key = yield* requestAt(platform.url, "POST", "/api/user/apiKey/create", { token, body: { name: "cluster" } })
    assert.strictEqual(key.status, 200, key.text)
    return { token, userId: userIdOf(token), apiKey: key.body.key as string } satisfies User
  })

export const grant = (platform: PlatformProcess, user: User, amount: string) =>
  Effect.map(
    requestAt(platform.url, "POST", `/internal/wallets/${user.userId}/grants`, {
      body: { amount, idempotency_key: Crypto.randomUUID(), reason: "cluster test" },
      headers: internalAuth
    }),
    (reply) => {
      assert.strictEqual(reply.status, 200, reply.text)
      return reply.body
    }
  )

export const balanceOn = (platform: PlatformProcess, user: User) =>
  Effect.map(requestAt(platform.url, "GET", "/openapi/credit/balance", { token: user.apiKey }), (reply) => {
    assert.strictEqual(reply.status, 200, reply.text)
    return reply.body.balance as number
  })

export const consume = (platform: PlatformProcess, user: User, amount: string, key: string = Crypto.randomUUID()) =>
  requestAt(platform.url, "POST", "/openapi/credit/consume", { token: user.apiKey, body: { amount, idempotency_key: key } })

export const agentOf = (platform: PlatformProcess, user: User, tools: Record<string, "allow" | "ask"> = {}) =>
  Effect.map(
    requestAt(platform.url, "POST", "/v1/agents", {
      token: user.token,
      body: {
        name: `Cluster ${Crypto.randomBytes(3).toString("hex")}`,
        instructions: "Answer briefly.",
        tools: Object.entries(tools).map(([name, permission]) => ({ name, permission }))
      }
    }),
    (reply) => {
      assert.strictEqual(reply.status, 201, reply.text)
      return reply.body.identifier as string
    }
  )

export const sessionOf = (platform: PlatformProcess, user: User, agent: string) =>
  Effect.map(requestAt(platform.url, "POST", "/v1/sessions", { token: user.token, body: { agent } }), (reply) => {
    assert.strictEqual(reply.status, 201, reply.text)
    return reply.body.id as string
  })

/** Sends a message on `platform` and keeps the turn's stream open. */
export const send = (platform: PlatformProcess, user: User, session: string, message: string) =>
  at(platform)(openStream(`/v1/sessions/${session}/events`, { token: user.token, body: { type: "message", message } }))

/** `GET …/events` on `platform`, from `after` when given. */
export const subscribe = (platform: PlatformProcess, user: User, session: string, lastEventId?: number) =>
  at(platform)(openStream(`/v1/sessions/${session}/events`, {
    token: user.token,
    method: "GET",
    ...(lastEventId !== undefined ? { headers: { "last-event-id": String(lastEventId) } } : {})
  }))

/**
 * `count` sessions of `agent` opened on `platform`, each with a turn of `message` running: sent there, its stream
 * held open, and its first delta seen (the turn has started, so a runner leaving or joining now meets it running).
 */
export const runningTurns = (platform: PlatformProcess, user: User, agent: string, count: number, message: string) =>
  Effect.gen(function*() {
    const sessions = yield* Effect.all(Array.from({ length: count }, () => sessionOf(platform, user, agent)), { concurrency: 4 })
    const streams = yield* Effect.all(sessions.map((s) => send(platform, user, s, message)), { concurrency: 4 })
    for (const stream of streams) yield* stream.until("output.text.delta")
    return { sessions, streams }
  })

export const seqs = (stream: ParsedStream) => stream.events.map((event) => event.data.seq as number)
export const lastEvent = (stream: ParsedStream) => stream.events[stream.events.length - 1]!

/**
 * For an assertion about how turns ended: each stream's last event whole, and what the runners logged at warn and
 * error. Why a turn was cut is in its runner's log (a lock refresh past its deadline, a refused write, a deadline), and
 * a runner's output is gone with the test: without this a failure in CI said only "run.failed".
 */
export const endsAndLogs = (streams: ReadonlyArray<ParsedStream>, runners: ReadonlyArray<PlatformProcess>) => {
  const ends = streams.map((stream, i) => `turn ${i}: ${JSON.stringify(lastEvent(stream).data)}`)
  const logs = runners.map((platform, i) => {
    const lines = platform.output().split("\n").filter((line) => /"level":"(warn|error)"/.test(line))
    return `runner ${i}, its last ${Math.min(lines.length, 30)} of ${lines.length} warnings and errors:\n${lines.slice(-30).join("\n")}`
  })
  return [...ends, ...logs].join("\n")
}

/** Reads `live` until `count` events of turn `turn` ended with run.completed / run.failed. */
export const untilEnd = (live: LiveStream) =>
  Effect.gen(function*() {
    const completed = yield* live.until("run.completed")
    if (completed.events.some((e) => e.event === "run.completed")) return completed
    return yield* live.until("run.failed")
  })

/**
 * Charges every payer 0.5 in rounds through `via(i)` (payer i's runner) while `disruption` runs and `roundsAfter`
 * rounds after it, then checks that every charge was answered 200 and that each balance fell by exactly what was
 * charged: nothing refused, lost or doubled around the disruption. The disruption is given `moreRounds(n)`, which
 * waits until `n` more rounds have been answered from when it is called (polled: the load tells no one).
 */
export const chargedThrough = <R>(
  reader: PlatformProcess,
  payers: ReadonlyArray<User>,
  via: (i: number) => PlatformProcess,
  roundsAfter: number,
  disruption: (moreRounds: (n: number) => Effect.Effect<void>) => Effect.Effect<void, never, R>
) =>
  Effect.gen(function*() {
    for (const payer of payers) yield* grant(reader, payer, "1000")
    const before = yield* Effect.all(payers.map((payer) => balanceOn(reader, payer)))
    let disrupted = false
    const statuses: Array<number> = []
    const load = Effect.gen(function*() {
      let rounds = 0
      while (!disrupted || rounds < roundsAfter) {
        const replies = yield* Effect.all(payers.map((payer, i) => consume(via(i), payer, "0.5")), { concurrency: "unbounded" })
        for (const reply of replies) statuses.push(reply.status)
        if (disrupted) rounds++
      }
    })
    const loading = yield* Effect.fork(load)
    const moreRounds = (n: number) =>
      Effect.suspend(() => {
        const from = statuses.length
        return Effect.asVoid(
          pollUntil(Effect.sync(() => statuses.length), (answered) => answered >= from + n * payers.length, `${n} more rounds of charges answered`, {
            every: 20,
            within: 120_000
          })
        )
      })
    yield* disruption(moreRounds)
    disrupted = true
    yield* Fiber.join(loading)
    assert.deepStrictEqual(statuses.filter((status) => status !== 200), [])
    const rounds = statuses.length / payers.length
    const after = yield* Effect.all(payers.map((payer) => balanceOn(reader, payer)))
    assert.deepStrictEqual(after, before.map((balance) => balance - rounds * 0.5))
  })
