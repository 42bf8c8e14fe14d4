import { assert, describe, layer } from "@effect/vitest"
import { Chunk, Effect, Stream } from "effect"
import { FileId, makeAtriumFetchClient, type PublicEvent, RunId, UserId } from "../../src/client.js"
import { TestServer } from "../support/TestServer.js"
import { agentWith, apiKeyOf, ENV, LIVE, newUser } from "../runs/runs-support.js"

/**
 * Issue 25 item 3: `atrium/client` (src/client.ts, contracts only) against the real server: a call into every
 * endpoint group, and the streamed answers as `Stream`s of typed public events.
 */
const typesOf = (events: Chunk.Chunk<PublicEvent>) => Chunk.toReadonlyArray(events).map((event) => event.type)
const textOf = (events: Chunk.Chunk<PublicEvent>) =>
  Chunk.toReadonlyArray(events).flatMap((event) => event.type === "output.text.delta" ? [event.delta] : []).join("")

describe("atrium/client", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("streams a run as typed events; a failed run is RunFailed; stream: false is one result", () =>
      Effect.gen(function*() {
        const { url } = yield* TestServer
        const user = yield* newUser
        const client = yield* makeAtriumFetchClient({ baseUrl: url, token: user.token })
        const agent = yield* agentWith(user.token)

        const events = yield* Stream.runCollect(client.runs.run({ payload: { agent, message: "hello there" } }))
        const types = typesOf(events)
        assert.strictEqual(types[0], "run.created")
        assert.strictEqual(types[types.length - 1], "run.completed")
        assert.strictEqual(textOf(events), "You said: hello there")
        const completed = Chunk.unsafeLast(events)
        assert.isTrue(completed.type === "run.completed" && completed.usage.output_tokens > 0)

        const failed = yield* Effect.flip(Stream.runDrain(client.runs.run({ payload: { agent, message: "/fail on purpose" } })))
        assert.strictEqual(failed._tag, "RunFailed")
        assert.deepInclude(failed, { code: "model_error" })

        const missing = yield* Effect.flip(Stream.runDrain(client.runs.run({ payload: { agent: "no-such-agent", message: "hi" } })))
        assert.strictEqual(missing._tag, "NotFound")

        const whole = yield* client.runs.run({ payload: { agent, message: "hi", stream: false } })
        assert.strictEqual(whole.status, "completed")
        assert.strictEqual(whole.output, "You said: hi")

        const chat = yield* client.runs.chatCompletions({ payload: { model: agent, messages: [{ role: "user", content: "hi" }] } })
        assert.strictEqual(chat.object, "chat.completion")
        const chatFailed = yield* Effect.flip(
          client.runs.chatCompletions({ payload: { model: agent, messages: [{ role: "user", content: "/fail broken" }] } })
        )
        assert.strictEqual(chatFailed._tag, "RunFailed", String(chatFailed))
      }))

    it.effect("streams session turns and a subscription that resumes after a seq (Last-Event-ID)", () =>
      Effect.gen(function*() {
        const { url } = yield* TestServer
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const client = yield* makeAtriumFetchClient({ baseUrl: url, token: yield* apiKeyOf(user), endUserId: "stream-user" })
        const session = yield* client.sessions.create({ payload: { agent } })

        const first = yield* Stream.runCollect(client.sessions.send({ path: { id: session.id }, payload: { type: "message", message: "one" } }))
        assert.strictEqual(textOf(first), "You said: one")
        const seqs = Chunk.toReadonlyArray(first).map((event) => event.seq)
        assert.isTrue(seqs.every((seq) => typeof seq === "number"))
        const second = yield* Stream.runCollect(client.sessions.send({ path: { id: session.id }, payload: { type: "message", message: "two" } }))
        assert.strictEqual(textOf(second), "You said: two")
        const firstEnd = Chunk.unsafeLast(first).seq!

        // From the start: both turns, in order; from the first turn's last seq: only the second turn.
        const all = Chunk.toReadonlyArray(second).length + Chunk.toReadonlyArray(first).length
        const everything = yield* Stream.runCollect(Stream.take(client.sessions.subscribe({ path: { id: session.id }, urlParams: { after: 0 } }), all))
        assert.deepStrictEqual(Chunk.toReadonlyArray(everything).map((event) => event.seq), [...seqs, ...Chunk.toReadonlyArray(second).map((event) => event.seq)])
        const resumed = yield* Stream.runCollect(
          Stream.take(client.sessions.subscribe({ path: { id: session.id }, lastEventId: firstEnd }), Chunk.size(second))
        )
        assert.deepStrictEqual(Chunk.toReadonlyArray(resumed).map((event) => event.seq), Chunk.toReadonlyArray(second).map((event) => event.seq))
        assert.strictEqual(textOf(resumed), "You said: two")

        const gone = yield* Effect.flip(Stream.runDrain(client.sessions.send({ path: { id: "ses_missing" }, payload: { type: "message", message: "x" } })))
        assert.strictEqual(gone._tag, "NotFound")
      }))

    it.effect("calls every endpoint group", () =>
      Effect.gen(function*() {
        const { url } = yield* TestServer
        const user = yield* newUser
        const client = yield* makeAtriumFetchClient({ baseUrl: url, token: user.token })
        const keyed = yield* makeAtriumFetchClient({ baseUrl: url, token: yield* apiKeyOf(user), endUserId: "groups-user" })
        const anonymous = yield* makeAtriumFetchClient({ baseUrl: url })
        const agent = yield* agentWith(user.token)

        assert.strictEqual((yield* anonymous.health.health({})).status, "ok")
        assert.isString((yield* anonymous.auth.challenge({})).challenge)
        assert.isArray((yield* client.account.listApiKeys({})).data)
        assert.include((yield* client.models.list({ urlParams: {} })).data.map((model) => model.id), "builtin")
        assert.isArray((yield* client.meters.list({ urlParams: {} })).data)
        assert.strictEqual((yield* Effect.flip(client.events.report({ payload: { event: "x", idempotency_key: "k1" } as never })))._tag, "Unauthorized")
        assert.isNumber((yield* keyed.credits.balance({})).balance)
        assert.isDefined((yield* client.wallet.wallet({})).balance)
        assert.isArray((yield* client.wallet.ledger({ urlParams: {} })).data)
        assert.isDefined(yield* Effect.either(client.paymentNotify.notify({ path: { provider: "none" } })))
        assert.isArray((yield* client.apps.list({ urlParams: {} })).data)
        const grant = yield* Effect.flip(client.internalBilling.grant({ path: { userId: UserId.make("usr_none") }, payload: { amount: 1_000_000n, idempotency_key: "k1", reason: "test" } }))
        // The private network's guard answers before HttpApi (Server.ts), with a status the endpoint does not declare:
        // the client decodes it through the wire errors' schemas all the same.
        assert.strictEqual(grant._tag, "Unauthorized")
        assert.strictEqual((grant as { message?: string }).message, "Internal routes require the operator's bearer token.")
        assert.deepStrictEqual((yield* client.agents.list({ urlParams: {} })).data.map((a) => a.identifier), [agent])
        assert.strictEqual((yield* client.runs.run({ payload: { agent, message: "x", stream: false } })).status, "completed")
        assert.strictEqual((yield* client.responses.create({ payload: { model: agent, input: "hi" } as never })).status, "completed")
        assert.isArray((yield* keyed.sessions.list({ urlParams: {} })).data)
        assert.isDefined(yield* Effect.either(client.purchases.status({ path: { agent } })))
        assert.strictEqual((yield* Effect.flip(client.reviews.approve({ path: { id: "rev_none" } } as never)))._tag, "Unauthorized")
        assert.strictEqual((yield* Effect.flip(keyed.files.get({ path: { id: FileId.make("file_none") } })))._tag, "NotFound")
        assert.isArray((yield* client.knowledge.list({ urlParams: {} })).data)
        assert.isArray((yield* client.environments.list({ urlParams: {} })).data)
        assert.isArray((yield* client.credentials.list({ urlParams: {} })).data)
        assert.isArray((yield* anonymous.market.categories({})).data)
        assert.isDefined(yield* Effect.either(client.creators.profile({})))
        assert.isArray((yield* client.notifications.list({})).data)
        assert.strictEqual((yield* Effect.flip(client.creatorReviews.approve({ path: { id: "x" } } as never)))._tag, "Unauthorized")
        assert.strictEqual((yield* Effect.flip(client.admin.queue({})))._tag, "NotFound")
        assert.isDefined(yield* client.agentSkills.list({ path: { identifier: agent }, urlParams: {} }))
        assert.isDefined(yield* client.evolution.stats({ path: { identifier: agent } }))
        assert.isArray((yield* client.distillations.list({ urlParams: {} })).data)
      }))

    it.effect("background runs: get, events as a Stream from the start and after a seq, cancel; schedules and webhooks (issue 43 item 5)", () =>
      Effect.gen(function*() {
        const { url } = yield* TestServer
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const client = yield* makeAtriumFetchClient({ baseUrl: url, token: user.token })
        const started = yield* Effect.promise(() =>
          fetch(`${url}/v1/agents/run`, {
            method: "POST",
            headers: { authorization: `Bearer ${user.token}`, "content-type": "application/json" },
            body: JSON.stringify({ agent, message: "in the background", background: true })
          }).then((r) => r.json() as Promise<{ id: RunId }>)
        )
        const events = yield* Stream.runCollect(client.runs.events({ path: { id: started.id } }))
        assert.strictEqual(textOf(events), "You said: in the background")
        assert.strictEqual(Chunk.unsafeLast(events).type, "run.completed")
        const seqs = Chunk.toReadonlyArray(events).map((event) => event.seq!)
        const rest = yield* Stream.runCollect(client.runs.events({ path: { id: started.id }, lastEventId: seqs[1]! }))
        assert.deepStrictEqual(Chunk.toReadonlyArray(rest).map((event) => event.seq), seqs.slice(2))
        const run = yield* client.runs.get({ path: { id: started.id } })
        assert.strictEqual(run.status, "completed")
        const cancelled = yield* client.runs.cancel({ path: { id: started.id } })
        assert.strictEqual(cancelled.status, "completed", "an ended run is answered as it is")
        const missing = yield* Effect.flip(client.runs.get({ path: { id: RunId.make("run_missing") } }))
        assert.strictEqual(missing._tag, "NotFound")

        const schedule = yield* client.schedules.create({ payload: { agent, cron: "0 7 * * *", timezone: "Asia/Tokyo", input: "Good morning." } })
        assert.match(schedule.next_run_at!, /T22:00:00\.000Z$/)
        const schedules = yield* client.schedules.list({ urlParams: {} })
        assert.deepStrictEqual(schedules.data.map((s) => s.id), [schedule.id])
        const paused = yield* client.schedules.pause({ path: { id: schedule.id } })
        assert.strictEqual(paused.status, "paused")
        // The contract's own schema refuses it before anything is sent.
        const badCron = yield* Effect.flip(client.schedules.create({ payload: { agent, cron: "nope", input: "x" } }))
        assert.strictEqual(badCron._tag, "ParseError")
        assert.match(String(badCron), /5 fields/)
        const hooks = yield* client.webhooks.list({ urlParams: {} })
        assert.deepStrictEqual(hooks.data, [])
      }))
  })
})
