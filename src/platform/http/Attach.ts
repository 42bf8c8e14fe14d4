import type * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Cause, Chunk, Deferred, Duration, Effect, Either, Exit, FiberId, FiberSet, Option, Schema, Stream } from "effect"
import * as Crypto from "node:crypto"
import { IdempotencyConflict } from "../Errors.js"
import { wireErrorResponse } from "./ErrorResponse.js"
import { IdempotencyRepo } from "./Repo.js"

/**
 * `Idempotency-Key` on the requests that start a run (`POST /v1/chat/completions`, `/v1/responses`,
 * `/v1/agents/run`, `/v1/sessions/:id/events`; docs/http.md). A client that times out and retries sends the same
 * key (the `openai` SDK does on every retry): the retry attaches to the run the first request started and reads it
 * from its start, live while it runs and replayed once it has finished, instead of starting another run.
 *
 * The generic gate (Idempotency.ts) stores a finished answer; a run's answer is a stream that may still be going, so
 * here the run is detached from the request that started it (a client that leaves no longer stops it). Its items are
 * kept in memory on the runner that took the first request (a retry there follows them live), and, when the route
 * says how its items cross processes (`Durable`), the key lives in the database too (issue 44 item 5): claimed when
 * the run starts, the run's items written there when it ends, both for `KEPT_MS`. A retry that reaches another
 * runner waits there for the first run's end and replays it: one run, one charge, wherever the retry lands.
 */

const KEPT_MS = 10 * 60 * 1000
/** A claim whose runner died before the run ended frees its key after this (longer than a run may take). */
const CLAIMED = Duration.minutes(15)
/** How often a retry on another runner looks whether the first run has ended. */
const POLL = Duration.millis(200)

/**
 * How a route's items cross processes: `encode` gives an item's JSON, or none when the item cannot be kept (a
 * failure before the run started: the key is then freed, and a retry elsewhere starts afresh); `decode` reads it back.
 */
export interface Durable<A> {
  readonly encode: (item: A) => Option.Option<unknown>
  readonly decode: (json: unknown) => A
}

/** Items that are JSON already (SSE frames, a Responses event). */
export const asJson: Durable<any> = { encode: (item) => Option.some(item), decode: (json) => json }

/** What attaching gave: the items, and whether they are an earlier request's (`Idempotent-Replayed: true`). */
export interface Attached<A> {
  readonly items: Stream.Stream<A>
  readonly replayed: boolean
}

const AttachRecord = Schema.parseJson(Schema.Union(
  Schema.Struct({ state: Schema.Literal("running"), fingerprint: Schema.String }),
  Schema.Struct({ state: Schema.Literal("done"), fingerprint: Schema.String, items: Schema.Array(Schema.Unknown) })
))
const decodeRecord = Schema.decodeUnknownOption(AttachRecord)

const sha256 = (text: string) => Crypto.createHash("sha256").update(text).digest("base64url")

/**
 * What a request asked, as its decoded payload: a budget is micro-credits (`bigint`) by then, written as its digits,
 * so `5`, `"5"` and `"5.0"` ask the same.
 */
const fingerprintOf = (payload: unknown) =>
  JSON.stringify(payload ?? null, (_, value) => typeof value === "bigint" ? value.toString() : value)

/**
 * A stable token for one request under its key: the same scope, key and payload give the same token on any runner, so
 * a route can name what it creates after it (a background run's id) and a retry finds the first attempt's creation.
 */
export const keyedToken = (scope: string, key: string, payload: unknown) =>
  Crypto.createHash("sha256").update(`${scope}\n${key}\n${fingerprintOf(payload)}`).digest("hex").slice(0, 32)

class Entry<A> {
  readonly items: Array<A> = []
  started = false
  done = false
  endedAt = 0
  /** How the run ended when it failed (a defect, an interruption): its followers end with it after its items. */
  failure: Cause.Cause<never> | undefined = undefined
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
  end(failure?: Cause.Cause<never>) {
    this.failure = failure
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
        if (this.done) {
          return this.failure === undefined ? Effect.succeed([Chunk.empty<A>(), Option.none<number>()] as const) : Effect.failCause(this.failure)
        }
        return Effect.as(Deferred.await(this.changed), [Chunk.empty<A>(), Option.some(at)] as const)
      }))
  }
}

export class Attachments extends Effect.Service<Attachments>()("atrium/platform/http/Attachments", {
  scoped: Effect.gen(function*() {
    // The detached runs belong to the server, not to a request: they end with it (interrupted at shutdown).
    const fibers = yield* FiberSet.make()
    const entries = new Map<string, Entry<any>>()
    const store = yield* IdempotencyRepo

    const prune = () => {
      const now = Date.now()
      for (const [key, entry] of entries) if (entry.done && now - entry.endedAt > KEPT_MS) entries.delete(key)
    }

    const conflict = () =>
      wireErrorResponse(new IdempotencyConflict({ message: "This Idempotency-Key was sent with a different request.", final: true }))
    const busy = () =>
      wireErrorResponse(new IdempotencyConflict({ message: "A request with this Idempotency-Key is being answered; retry shortly." }))

    /** The first run's items once it has ended on whichever runner took it; none when its claim went (it died). */
    const awaitDone = <A>(key: string, durable: Durable<A>): Effect.Effect<Option.Option<ReadonlyArray<A>>> =>
      Effect.gen(function*() {
        while (true) {
          const record = Option.flatMap(yield* store.get(key), decodeRecord)
          if (Option.isNone(record)) return Option.none()
          if (record.value.state === "done") return Option.some(record.value.items.map(durable.decode))
          yield* Effect.sleep(POLL)
        }
      })

    /** Writes a finished run's items for the other runners, or frees the key when one of them cannot be kept. */
    const keep = <A>(key: string, fingerprint: string, items: ReadonlyArray<A>, durable: Durable<A>) =>
      Effect.gen(function*() {
        const encoded: Array<unknown> = []
        for (const item of items) {
          const json = durable.encode(item)
          if (Option.isNone(json)) return yield* store.delete(key)
          encoded.push(json.value)
        }
        const text = yield* Effect.try(() => JSON.stringify({ state: "done", fingerprint, items: encoded }))
        yield* store.set(key, text, Duration.millis(KEPT_MS))
      }).pipe(Effect.catchAll(() => store.delete(key)))

    /**
     * The items of the run `start` begins, or of the one an earlier request with the same key began. `scope` says
     * whose keys these are (account, end user, route), `payload` what was asked: the same key with another payload is
     * a 409 with `x-should-retry: false`; a retry that arrives before the first request has started its run on this
     * runner is a 409 too (which the `openai` SDK and the AI SDK retry). With `durable`, a retry on another runner
     * waits for the first run's end and replays it. Without a key, `start`'s items as they come, tied to the request.
     * `key` is the request's `Idempotency-Key` as the route's contract decoded it (`RunStartHeaders`).
     */
    const attachWith = <A, E, R>(
      key: string | undefined,
      scope: string,
      payload: unknown,
      start: Effect.Effect<Stream.Stream<A>, E, R>,
      durable?: Durable<A>
    ): Effect.Effect<Either.Either<Attached<A>, HttpServerResponse.HttpServerResponse>, E, R> =>
      Effect.gen(function*() {
        if (key === undefined) return Either.right({ items: yield* start, replayed: false })
        prune()
        const entryKey = `${sha256(scope)}:${sha256(key)}`
        const storeKey = `attach:${entryKey}`
        const fingerprint = sha256(fingerprintOf(payload))
        while (true) {
          const found = entries.get(entryKey)
          if (found !== undefined) {
            if (found.fingerprint !== fingerprint) return Either.left(yield* conflict())
            if (!found.started) return Either.left(yield* busy())
            return Either.right({ items: found.follow(), replayed: true })
          }
          const entry = new Entry<A>(fingerprint)
          entries.set(entryKey, entry)
          if (durable !== undefined) {
            const claimed = yield* store.setIfAbsent(storeKey, JSON.stringify({ state: "running", fingerprint }), CLAIMED)
            if (!claimed) {
              entries.delete(entryKey)
              const record = Option.flatMap(yield* store.get(storeKey), decodeRecord)
              // Freed between the claim and this read (the first run's items could not be kept): claim it again.
              if (Option.isNone(record)) continue
              if (record.value.fingerprint !== fingerprint) return Either.left(yield* conflict())
              const items = Stream.unwrap(Effect.map(awaitDone(storeKey, durable), (done) =>
                Option.match(done, {
                  // The first runner died with its run: nothing to replay, and nothing was answered.
                  onNone: () => Stream.die(new Error("the run of this Idempotency-Key was lost; retry")),
                  onSome: (items) => Stream.fromIterable(items)
                })))
              return Either.right({ items, replayed: true })
            }
          }
          const items = yield* start.pipe(Effect.onError(() =>
            Effect.zipRight(Effect.sync(() => entries.delete(entryKey)), durable === undefined ? Effect.void : store.delete(storeKey))
          ))
          entry.started = true
          yield* FiberSet.run(
            fibers,
            Stream.runForEach(items, (item) => Effect.sync(() => entry.push(item))).pipe(
              Effect.onExit((exit) =>
                durable === undefined
                  ? Effect.void
                  : Effect.ignore(Exit.isSuccess(exit) ? keep(storeKey, fingerprint, entry.items, durable) : store.delete(storeKey))
              ),
              Effect.onExit((exit) =>
                Effect.sync(() => {
                  if (Exit.isSuccess(exit)) return entry.end()
                  // A run that failed before its first item answered nothing: its key is freed, so a retry starts
                  // afresh instead of replaying nothing (a 500 for every retry for ten minutes: the durable bench's
                  // submission whose runner met a PostgreSQL restart). Its requests end with its failure.
                  if (entry.items.length === 0 && entries.get(entryKey) === entry) entries.delete(entryKey)
                  entry.end(exit.cause)
                })
              )
            )
          )
          return Either.right({ items: entry.follow(), replayed: false })
        }
      })

    /** `attachWith`, the items only. */
    const attach = <A, E, R>(
      key: string | undefined,
      scope: string,
      payload: unknown,
      start: Effect.Effect<Stream.Stream<A>, E, R>,
      durable?: Durable<A>
    ): Effect.Effect<Either.Either<Stream.Stream<A>, HttpServerResponse.HttpServerResponse>, E, R> =>
      Effect.map(attachWith(key, scope, payload, start, durable), Either.map((attached) => attached.items))

    return { attach, attachWith } as const
  }),
  dependencies: [IdempotencyRepo.Default]
}) {}
