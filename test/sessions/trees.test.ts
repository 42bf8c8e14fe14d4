import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { request } from "../support/Client.js"
import { names, openStream, streamOf, textOf } from "../support/Sse.js"
import { TestServer } from "../support/TestServer.js"
import { agentWith, ENV, LIVE, newUser } from "../runs/runs-support.js"

/**
 * Issue 44 items 1, 3 and 4 over HTTP: a session is a tree of turns. Regenerate and edit make siblings, every read
 * follows the current leaf, `PATCH {leaf}` switches branches, a fork shares its origin's history without a copy, and a
 * message sent while a turn runs follows its `multitask_strategy`.
 */

const userTexts = (view: any) => view.messages.filter((m: any) => m.role === "user").map((m: any) => m.content)
const assistantTexts = (view: any) => view.messages.filter((m: any) => m.role === "assistant").map((m: any) => m.content)

describe("sessions as trees", () => {
  layer(TestServer.layer(ENV), LIVE)((it) => {
    it.effect("regenerate, edit, switch, tree and fork", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const created = yield* request("POST", "/v1/sessions", { token: user.token, body: { agent } })
        assert.strictEqual(created.status, 201, created.text)
        const id = created.body.id as string
        const events = `/v1/sessions/${id}/events`
        const say = (body: Record<string, unknown>) => streamOf(events, { token: user.token, body })
        const view = () => Effect.map(request("GET", `/v1/sessions/${id}`, { token: user.token }), (r) => r.body)
        const tree = (sid = id) => Effect.map(request("GET", `/v1/sessions/${sid}/tree`, { token: user.token }), (r) => r.body)

        yield* say({ type: "message", message: "one" })
        yield* say({ type: "message", message: "two" })
        // Regenerate turn 2: its message answered again, a sibling under turn 1; the session moves to it.
        const again = yield* say({ type: "regenerate", turn: 2 })
        assert.strictEqual(names(again).at(-1), "run.completed")
        assert.strictEqual(textOf(again), "You said: two")
        let shown = yield* view()
        assert.strictEqual(shown.leaf, 3)
        assert.deepStrictEqual(userTexts(shown), ["one", "two"])
        assert.deepStrictEqual(shown.messages.map((m: any) => m.turn), [1, 1, 3, 3])
        let t = yield* tree()
        assert.strictEqual(t.leaf, 3)
        assert.deepStrictEqual(t.turns.map((x: any) => [x.turn, x.parent_turn, x.children]), [[1, null, [2, 3]], [2, 1, []], [3, 1, []]])
        assert.strictEqual(t.turns[2].message_preview, "two")

        // Edit turn 2's message: a sibling under the same parent, with the new text.
        const edited = yield* say({ type: "message", message: "/history", parent_turn: 1 })
        assert.strictEqual(textOf(edited), "I see 2 earlier messages.", "the edit sees only the path to its parent")
        shown = yield* view()
        assert.deepStrictEqual(userTexts(shown), ["one", "/history"])
        // A new first message (parent_turn: null) is a second root.
        const root = yield* say({ type: "message", message: "/history", parent_turn: null })
        assert.strictEqual(textOf(root), "I see 0 earlier messages.")

        // Switch back to turn 2's branch: reads and the next turn follow it.
        const switched = yield* request("PATCH", `/v1/sessions/${id}`, { token: user.token, body: { leaf: 2 } })
        assert.strictEqual(switched.status, 200, switched.text)
        shown = yield* view()
        assert.deepStrictEqual(userTexts(shown), ["one", "two"])
        assert.deepStrictEqual(assistantTexts(shown), ["You said: one", "You said: two"])
        const next = yield* say({ type: "message", message: "/history" })
        assert.strictEqual(textOf(next), "I see 4 earlier messages.")
        t = yield* tree()
        assert.deepStrictEqual(t.turns.map((x: any) => [x.turn, x.parent_turn]), [[1, null], [2, 1], [3, 1], [4, 1], [5, null], [6, 2]])
        assert.strictEqual(t.leaf, 6)

        // Bad branches change nothing.
        assert.strictEqual((yield* request("PATCH", `/v1/sessions/${id}`, { token: user.token, body: { leaf: 99 } })).status, 404)
        assert.strictEqual((yield* request("POST", events, { token: user.token, body: { type: "regenerate", turn: 99 } })).status, 404)
        assert.strictEqual((yield* request("POST", events, { token: user.token, body: { type: "message", message: "x", parent_turn: 99 } })).status, 400)
        assert.strictEqual((yield* tree()).leaf, 6)

        // Fork at turn 3: a new session that reads the path 1 → 3 of this one, and numbers its own turns after 3.
        const fork = yield* request("POST", `/v1/sessions/${id}/fork`, { token: user.token, body: { turn: 3 } })
        assert.strictEqual(fork.status, 201, fork.text)
        const forkId = fork.body.id as string
        assert.notStrictEqual(forkId, id)
        assert.strictEqual(fork.body.agent, created.body.agent)
        const forked = yield* Effect.map(request("GET", `/v1/sessions/${forkId}`, { token: user.token }), (r) => r.body)
        assert.deepStrictEqual(forked.messages.map((m: any) => [m.turn, m.content]), [[1, "one"], [1, "You said: one"], [3, "two"], [3, "You said: two"]])
        const inFork = yield* streamOf(`/v1/sessions/${forkId}/events`, { token: user.token, body: { type: "message", message: "/history" } })
        assert.strictEqual(textOf(inFork), "I see 4 earlier messages.")
        assert.deepStrictEqual((yield* tree(forkId)).turns.map((x: any) => [x.turn, x.parent_turn]), [[1, null], [3, 1], [4, 3]])
        // The origin has none of the fork's turns; a fork of a turn it does not have is 404.
        assert.strictEqual((yield* tree()).turns.length, 6)
        assert.strictEqual((yield* request("POST", `/v1/sessions/${id}/fork`, { token: user.token, body: { turn: 42 } })).status, 404)
        // Someone else cannot fork it.
        const other = yield* newUser
        assert.strictEqual((yield* request("POST", `/v1/sessions/${id}/fork`, { token: other.token, body: { turn: 1 } })).status, 404)

        // Deleting the origin takes nothing from the fork.
        assert.strictEqual((yield* request("DELETE", `/v1/sessions/${id}`, { token: user.token })).status, 200)
        const kept = yield* Effect.map(request("GET", `/v1/sessions/${forkId}`, { token: user.token }), (r) => r.body)
        assert.deepStrictEqual(userTexts(kept), ["one", "two", "/history"])
        const after = yield* streamOf(`/v1/sessions/${forkId}/events`, { token: user.token, body: { type: "message", message: "/history" } })
        assert.strictEqual(textOf(after), "I see 6 earlier messages.")
      }))

    it.effect("multitask_strategy: reject, interrupt, rollback", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const id = (yield* request("POST", "/v1/sessions", { token: user.token, body: { agent } })).body.id as string
        const events = `/v1/sessions/${id}/events`
        const view = () => Effect.map(request("GET", `/v1/sessions/${id}`, { token: user.token }), (r) => r.body)
        const slow = () =>
          Effect.gen(function*() {
            const stream = yield* openStream(events, { token: user.token, body: { type: "message", message: "/slow 40" } })
            yield* stream.until("output.text.delta")
            return stream
          })

        // reject: a 409 session_busy the SDKs do not retry; nothing is sent.
        const running = yield* slow()
        const refused = yield* request("POST", events, { token: user.token, body: { type: "message", message: "no", multitask_strategy: "reject" } })
        assert.strictEqual(refused.status, 409, refused.text)
        assert.strictEqual(refused.body.error.type, "session_busy")
        assert.strictEqual(refused.headers.get("x-should-retry"), "false")

        // interrupt: the running turn stops keeping what it said; the new one runs after it, on its path.
        const interrupting = yield* streamOf(events, { token: user.token, body: { type: "message", message: "/history", multitask_strategy: "interrupt" } })
        const cut = yield* running.rest
        assert.strictEqual(names(cut).at(-1), "run.failed")
        assert.strictEqual(cut.events.at(-1)!.data.code, "interrupted")
        assert.strictEqual(textOf(interrupting), "I see 2 earlier messages.")
        let shown = yield* view()
        assert.deepStrictEqual(userTexts(shown), ["/slow 40", "/history"])
        assert.isTrue(assistantTexts(shown)[0].startsWith("chunk 1 "), "the interrupted turn kept what it said")

        // rollback: the running turn is cancelled and leaves the leaf's path (it stays in the tree, rolled back).
        const second = yield* slow()
        const rolling = yield* streamOf(events, { token: user.token, body: { type: "message", message: "/history", multitask_strategy: "rollback" } })
        const cancelled = yield* second.rest
        assert.strictEqual(cancelled.events.at(-1)!.data.code, "rolled_back")
        assert.strictEqual(textOf(rolling), "I see 4 earlier messages.", "the rolled-back turn is not in its context")
        shown = yield* view()
        assert.deepStrictEqual(userTexts(shown), ["/slow 40", "/history", "/history"])
        const t = yield* Effect.map(request("GET", `/v1/sessions/${id}/tree`, { token: user.token }), (r) => r.body)
        assert.deepStrictEqual(t.turns.map((x: any) => [x.turn, x.parent_turn, x.status]), [
          [1, null, "interrupted"],
          [2, 1, "completed"],
          [3, 2, "rolled_back"],
          [4, 2, "completed"]
        ])
        // enqueue (the default) waits its turn, as before.
        const third = yield* slow()
        const queued = yield* streamOf(events, { token: user.token, body: { type: "message", message: "/history", multitask_strategy: "enqueue" } })
        assert.strictEqual(names(yield* third.rest).at(-1), "run.completed")
        assert.strictEqual(textOf(queued), "I see 8 earlier messages.")
      }))

    it.effect("a tree read while turns end has its leaf and its turns from one moment (GET tree and GET session)", () =>
      Effect.gen(function*() {
        const user = yield* newUser
        const agent = yield* agentWith(user.token)
        const created = yield* request("POST", "/v1/sessions", { token: user.token, body: { agent } })
        const id = created.body.id as string
        // One branch: every turn continues the previous one, so a consistent read's leaf is its newest turn, and its
        // messages end with that turn's. Read apart, a turn ending between the leaf's read and the turns' read showed
        // the new turn under the old leaf, off the path (the chat hid it: session 30).
        const torn: Array<string> = []
        let sending = true
        const send = Effect.gen(function*() {
          for (let n = 1; n <= 25; n++) yield* streamOf(`/v1/sessions/${id}/events`, { token: user.token, body: { type: "message", message: `m${n}` } })
          sending = false
        })
        const read = Effect.gen(function*() {
          while (sending) {
            const [tree, view] = yield* Effect.all([
              request("GET", `/v1/sessions/${id}/tree`, { token: user.token }),
              request("GET", `/v1/sessions/${id}`, { token: user.token })
            ], { concurrency: 2 })
            const turns = (tree.body.turns as Array<{ turn: number }>).map((t) => t.turn)
            if (turns.length > 0 && tree.body.leaf !== Math.max(...turns)) torn.push(`tree: leaf ${tree.body.leaf} of ${turns}`)
            const last = (view.body.messages as Array<{ turn: number }>).at(-1)?.turn
            if (last !== undefined && view.body.leaf !== last) torn.push(`session: leaf ${view.body.leaf}, last message of turn ${last}`)
          }
        })
        yield* Effect.all([send, read, read, read], { concurrency: "unbounded" })
        assert.deepStrictEqual(torn, [])
      }))
  })
})
