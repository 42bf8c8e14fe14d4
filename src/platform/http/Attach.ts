import type * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import type * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Chunk, Deferred, Effect, Either, Exit, FiberId, FiberSet, Option, Stream } from "effect"
import * as Crypto from "node:crypto"
import { IdempotencyConflict, InvalidRequest } from "../Errors.js"
import { wireErrorResponse } from "./ErrorResponse.js"

/**
 * `Idempotency-Key` on the requests that start a run (`POST /v1/chat/completions`, `/v1/responses`,
 * `/v1/agents/run`, `/v1/sessions/:id/events`; docs/http.md). A client that times out and retries sends the same
 * key (the `openai` SDK does on every retry): the retry attaches to the run the first request started and reads it
 * from its start, live while it runs and replayed once it has finished, instead of starting another run.
 *
 * The generic gate (Idempotency.ts) stores a finished answer; a run's answer is a stream that may still be going, so
 * here the run is detached from the request that started it (a client that leaves no longer stops it) and its items
 * are kept in memory, on the runner that took the first request, for `KEPT_MS` after it ends. A retry that reaches
 * another runner starts afresh: docs/runs.md says so.
 */

const KEPT_MS = 10 * 60 * 1000
const KEY = /^[\x21-\x7e]{1,255}$/

const sha256 = (text: string) => Crypto.createHash("sha256").update(text).digest("base64url")

class Entry<A> {
  readonly items: Array<A> = []
  started = false
  done = false
  endedAt = 0
  private changed = Deferred.unsafeMake<void>(FiberId.none)
  constructor(readonly fingerprint: string) {}

  private wake() {
    const changed = this.changed
    this.changed = Deferred.unsafeMake<void>(FiberId.none)
    Deferred.unsafeDone(changed, Exit.void)
  }
  push(item: A) {
    this.items.push(item)
    this.wake()
  }
  end() {
    this.done = true
    this.endedAt = Date.now()
    this.wake()
  }
  /** Every item from the first, then the live ones until the end. */
  follow(): Stream.Stream<A> {
    return Stream.paginateChunkEffect(0, (at: number) =>
      Effect.suspend(() => {
        if (at < this.items.length) {
          return Effect.succeed([Chunk.unsafeFromArray(this.items.slice(at)), Option.some(this.items.length)] as const)
        }
        if (this.done) return Effect.succeed([Chunk.empty<A>(), Option.none<number>()] as const)
        return Effect.as(Deferred.await(this.changed), [Chunk.empty<A>(), Option.some(at)] as const)
      }))
  }
}

export class Attachments extends Effect.Service<Attachments>()("atrium/platform/http/Attachments", {
  scoped: Effect.gen(function*() {
    // The detached runs belong to the server, not to a request: they end with it (interrupted at shutdown).
    const fibers = yield* FiberSet.make()
    const entries = new Map<string, Entry<any>>()

    const prune = () => {
      const now = Date.now()
      for (const [key, entry] of entries) if (entry.done && now - entry.endedAt > KEPT_MS) entries.delete(key)
    }

    /**
     * The items of the run `start` begins, or of the one an earlier request with the same key began. `scope` says
     * whose keys these are (account, end user, route), `payload` what was asked: the same key with another payload,
     * or a retry that arrives before the first request has started its run, is a 409 (which the `openai` SDK and
     * the AI SDK retry). Without a key, `start`'s items as they come, tied to the request as before.
     */
    const attach = <A, E, R>(
      request: HttpServerRequest.HttpServerRequest,
      scope: string,
      payload: unknown,
      start: Effect.Effect<Stream.Stream<A>, E, R>
    ): Effect.Effect<Either.Either<Stream.Stream<A>, HttpServerResponse.HttpServerResponse>, E, R> =>
      Effect.gen(function*() {
        const header = request.headers["idempotency-key"]
        if (header === undefined) return Either.right(yield* start)
        if (!KEY.test(header)) {
          return Either.left(yield* wireErrorResponse(new InvalidRequest({ message: "Invalid request: Idempotency-Key: 1-255 visible ASCII characters." })))
        }
        prune()
        const key = `${sha256(scope)}:${sha256(header)}`
        const fingerprint = sha256(JSON.stringify(payload ?? null))
        const found = entries.get(key)
        if (found !== undefined) {
          if (found.fingerprint !== fingerprint) {
            return Either.left(yield* wireErrorResponse(new IdempotencyConflict({ message: "This Idempotency-Key was sent with a different request." })))
          }
          if (!found.started) {
            return Either.left(yield* wireErrorResponse(new IdempotencyConflict({ message: "A request with this Idempotency-Key is being answered; retry shortly." })))
          }
          return Either.right(found.follow())
        }
        const entry = new Entry<A>(fingerprint)
        entries.set(key, entry)
        const items = yield* start.pipe(Effect.onError(() => Effect.sync(() => entries.delete(key))))
        entry.started = true
        yield* FiberSet.run(
          fibers,
          Stream.runForEach(items, (item) => Effect.sync(() => entry.push(item))).pipe(
            Effect.ensuring(Effect.sync(() => entry.end()))
          )
        )
        return Either.right(entry.follow())
      })

    return { attach } as const
  })
}) {}
