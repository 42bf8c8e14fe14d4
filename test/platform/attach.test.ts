import { assert, describe, it } from "@effect/vitest"
import { Cause, Chunk, Effect, Either, Exit, Layer, Stream } from "effect"
import { Attachments, keyedToken } from "../../src/platform/http/Attach.js"
import { TestDatabase } from "../support/Database.js"

/**
 * A run's answer shared under its `Idempotency-Key` (`src/platform/http/Attach.ts`): a retry reads the first
 * request's run instead of starting another, and a run that failed before its first item leaves the key free, so the
 * retry starts afresh. (The durable bench once retried a background run's submission for 90 s: its first attempt met
 * a PostgreSQL restart, and every retry replayed nothing, a 500, for the key's ten minutes.)
 */

const AttachmentsTest = Attachments.Default.pipe(Layer.provide(TestDatabase()))

const itemsOf = (attached: Either.Either<{ readonly items: Stream.Stream<number>; readonly replayed: boolean }, unknown>) => {
  assert.isTrue(Either.isRight(attached), "attached, not refused")
  return Either.getOrThrow(attached)
}

describe("an answer shared under its Idempotency-Key", () => {
  it.layer(AttachmentsTest)((it) => {
    it.effect("a run that failed before its first item: its requests get the failure, and a retry starts afresh", () =>
      Effect.gen(function*() {
        const attachments = yield* Attachments
        let starts = 0
        const start = (items: Stream.Stream<number>) => Effect.sync(() => {
          starts++
          return items
        })
        const first = itemsOf(yield* attachments.attachWith("key-1", "scope", { a: 1 }, start(Stream.die(new Error("database restarting")))))
        const failed = yield* Effect.exit(Stream.runCollect(first.items))
        assert.isTrue(Exit.isFailure(failed) && Cause.isDie(failed.cause), "the first request ends with the run's failure")

        const retry = itemsOf(yield* attachments.attachWith("key-1", "scope", { a: 1 }, start(Stream.make(1, 2))))
        assert.strictEqual(starts, 2, "the retry started a run of its own")
        assert.isFalse(retry.replayed)
        assert.deepStrictEqual(Chunk.toArray(yield* Stream.runCollect(retry.items)), [1, 2])

        // That run answered: the next retry replays it, and starts nothing.
        const replay = itemsOf(yield* attachments.attachWith("key-1", "scope", { a: 1 }, start(Stream.make(9))))
        assert.strictEqual(starts, 2)
        assert.isTrue(replay.replayed)
        assert.deepStrictEqual(Chunk.toArray(yield* Stream.runCollect(replay.items)), [1, 2])
      }))

    it.effect("a run that failed after some items: a retry replays them, then the same failure, and starts nothing", () =>
      Effect.gen(function*() {
        const attachments = yield* Attachments
        const broken = Stream.concat(Stream.make(1), Stream.die(new Error("cut")))
        const first = itemsOf(yield* attachments.attachWith("key-2", "scope", { a: 1 }, Effect.succeed(broken)))
        assert.isTrue(Exit.isFailure(yield* Effect.exit(Stream.runCollect(first.items))))
        const retry = itemsOf(yield* attachments.attachWith("key-2", "scope", { a: 1 }, Effect.succeed(Stream.make(7))))
        assert.isTrue(retry.replayed)
        const seen: Array<number> = []
        const ended = yield* Effect.exit(Stream.runForEach(retry.items, (item) => Effect.sync(() => seen.push(item))))
        assert.deepStrictEqual(seen, [1])
        assert.isTrue(Exit.isFailure(ended) && Cause.isDie(ended.cause))
      }))
  })

  it("a key's token is the same for the same scope, key and request, and another for any other", () => {
    const token = keyedToken("run-background\nusr_1\n", "k", { agent: "a", message: "hi", budget: 5n })
    assert.match(token, /^[0-9a-f]{32}$/)
    assert.strictEqual(keyedToken("run-background\nusr_1\n", "k", { agent: "a", message: "hi", budget: 5n }), token)
    assert.notStrictEqual(keyedToken("run-background\nusr_2\n", "k", { agent: "a", message: "hi", budget: 5n }), token)
    assert.notStrictEqual(keyedToken("run-background\nusr_1\n", "k2", { agent: "a", message: "hi", budget: 5n }), token)
    assert.notStrictEqual(keyedToken("run-background\nusr_1\n", "k", { agent: "a", message: "hello", budget: 5n }), token)
  })
})
