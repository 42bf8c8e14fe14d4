import { HttpLayerRouter, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { NodeHttpServerRequest } from "@effect/platform-node"
import { assert, describe, layer } from "@effect/vitest"
import { Context, Effect, type Fiber, FiberRef, Layer, Option, Supervisor } from "effect"
import * as V8 from "node:v8"
import * as Vm from "node:vm"
import { request } from "../support/Client.js"
import { pollUntil } from "../support/Poll.js"
import { openStream, streamOf, textOf } from "../support/Sse.js"
import { TestServer } from "../support/TestServer.js"
import { agentWith, ENV, LIVE, newUser } from "../runs/runs-support.js"
import { Session } from "../../src/sessions/SessionRpc.js"

/**
 * A session woken by an HTTP request must not keep that request (its `HttpServerRequest`, the Node
 * `IncomingMessage`, its socket and body) reachable while the session stays active (docs/sessions.md).
 *
 * Looking the request up in the worker's context would not catch it: the cluster replaces the context the entity's
 * behaviour runs in, so the service is absent either way. What kept the request was the waking fiber's FiberRefs,
 * whose history every fiber forked from it carries. So each probed request runs under a supervisor of its own, one
 * of those FiberRefs: every fiber started with the request's FiberRefs reports to it. The last test asks the
 * garbage collector, the only witness of a runtime the cluster keeps without running a fiber from it.
 */

interface Probed {
  readonly path: string
  /** Weak, so that the probe itself keeps nothing of the request alive. */
  readonly fibers: Array<WeakRef<Fiber.RuntimeFiber<unknown, unknown>>>
  readonly message: WeakRef<object>
  answered: boolean
}

class Tracker extends Supervisor.AbstractSupervisor<void> {
  constructor(readonly probed: Probed) {
    super()
  }
  value = Effect.void
  override onStart<A, E, R>(
    _context: Context.Context<R>,
    _effect: Effect.Effect<A, E, R>,
    _parent: Option.Option<Fiber.RuntimeFiber<any, any>>,
    fiber: Fiber.RuntimeFiber<A, E>
  ) {
    this.probed.fibers.push(new WeakRef(fiber as Fiber.RuntimeFiber<unknown, unknown>))
  }
}

const probed: Array<Probed> = []

/** Runs `effect` as a probed request: under its own supervisor, noted in `probed`. */
const probe = <A, E, R>(request: HttpServerRequest.HttpServerRequest, effect: Effect.Effect<A, E, R>) => {
  const entry: Probed = {
    path: `${request.method} ${request.url}`,
    fibers: [],
    message: new WeakRef(NodeHttpServerRequest.toIncomingMessage(request)),
    answered: false
  }
  probed.push(entry)
  return effect.pipe(
    Effect.supervised(new Tracker(entry)),
    Effect.ensuring(Effect.sync(() => void (entry.answered = true)))
  )
}

const SESSION_ROUTE = /^\/v1\/sessions\/[^/]+(\/|$)/
const WAKE_ROUTE = "/probe/sessions/:id/wake"

const ProbeRoutes = Layer.mergeAll(
  // Every request of the real session routes is probed.
  HttpLayerRouter.middleware(
    (app) =>
      Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => SESSION_ROUTE.test(request.url) ? probe(request, app) : app),
    { global: true }
  ),
  // Wakes a session with a message sent to the entity straight from the request's fiber, as any caller could.
  Layer.unwrapEffect(Effect.map(Session.client, (client) =>
    HttpLayerRouter.add("POST", WAKE_ROUTE, (request) =>
      probe(
        request,
        Effect.map(
          Effect.orDie(client(request.url.split("/")[3]!).Send({ message: "woken", budget: null })),
          (sent) => HttpServerResponse.unsafeJson(sent)
        )
      ))))
)

/** Whether the fiber's FiberRefs hold an HTTP request anywhere in their history, not only in the current value. */
const holdsARequest = (fiber: Fiber.RuntimeFiber<unknown, unknown>) =>
  (fiber.getFiberRefs().locals.get(FiberRef.currentContext) ?? []).some(([, context]) =>
    Option.isSome(Context.getOption(context as Context.Context<never>, HttpServerRequest.HttpServerRequest))
  )

const running = (entry: Probed) =>
  entry.fibers.flatMap((ref) => {
    const fiber = ref.deref()
    return fiber !== undefined && fiber.unsafePoll() === null ? [fiber] : []
  })

/** Waits a little for the fibers started under `entry` to end (a handler's end just after its reply): none may stay. */
const assertNoneStillRuns = (entry: Probed) =>
  Effect.gen(function*() {
    // Polled: a fiber ending after its handler replied signals nothing the test can wait on.
    yield* pollUntil(
      Effect.sync(() => running(entry).map((fiber) => ({ fiber: fiber.id().id, holdsTheRequest: holdsARequest(fiber) }))),
      (still) => still.length === 0,
      `${entry.path}: every fiber started under the request ended after its answer`,
      { every: 50, within: 2_000 }
    )
  })

V8.setFlagsFromString("--expose-gc")
const gc = Vm.runInNewContext("gc") as () => void

const ServerWithProbes = TestServer.layer(ENV, ProbeRoutes)

const newSession = Effect.gen(function*() {
  const user = yield* newUser
  const agent = yield* agentWith(user.token)
  const created = yield* request("POST", "/v1/sessions", { token: user.token, body: { agent } })
  assert.strictEqual(created.status, 201, created.text)
  return { token: user.token, id: created.body.id as string }
})

const say = (token: string, id: string, message: string) =>
  streamOf(`/v1/sessions/${id}/events`, { token, body: { type: "message", message } })

describe("session context", () => {
  layer(ServerWithProbes, LIVE)((it) => {
    it.effect("the session's worker does not start from the fiber that woke the session", () =>
      Effect.gen(function*() {
        const session = yield* newSession
        probed.length = 0
        const woken = yield* request("POST", WAKE_ROUTE.replace(":id", session.id), {})
        assert.strictEqual(woken.status, 200, woken.text)
        const [wake] = probed
        assert.isDefined(wake)
        // The entity's handler of that message ran with the request's FiberRefs: the probe sees what it should.
        assert.isNotEmpty(wake!.fibers)
        const events = yield* openStream(`/v1/sessions/${session.id}/events?after=0`, { token: session.token, method: "GET" })
        const turn = yield* events.until("run.completed")
        yield* events.cancel
        assert.strictEqual(textOf(turn), "You said: woken")
        yield* assertNoneStillRuns(wake!)
      }))

    it.effect("no fiber a session starts outlives the HTTP requests that send it messages", () =>
      Effect.gen(function*() {
        const session = yield* newSession
        probed.length = 0
        assert.strictEqual(textOf(yield* say(session.token, session.id, "hello")), "You said: hello")
        assert.strictEqual(textOf(yield* say(session.token, session.id, "again")), "You said: again")
        assert.strictEqual(probed.length, 2)
        for (const entry of probed) {
          assert.isTrue(entry.answered, entry.path)
          yield* assertNoneStillRuns(entry)
        }
      }))

    it.effect("the request that woke a session is garbage once answered, while the session stays active", () =>
      Effect.gen(function*() {
        const session = yield* newSession
        probed.length = 0
        assert.strictEqual(textOf(yield* say(session.token, session.id, "hello")), "You said: hello")
        const [first] = probed
        assert.isDefined(first)
        // Polled, collecting each time: the garbage collector clears a WeakRef in its own time.
        yield* pollUntil(Effect.sync(() => (gc(), first!.message.deref() === undefined)), (gone) => gone, `${first!.path}: its IncomingMessage collected`, {
          every: 50,
          within: 1_000
        })
        // Still the same activation: the session answers from memory, with its history.
        assert.strictEqual(textOf(yield* say(session.token, session.id, "/history")), "I see 2 earlier messages.")
      }))
  })
})
