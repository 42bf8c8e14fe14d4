import { Entity, EntityId, type Envelope, Sharding, TestRunner } from "@effect/cluster"
import * as Rpc from "@effect/rpc/Rpc"
import { assert, describe, it } from "@effect/vitest"
import { Chunk, type Duration, Effect, Layer, Option, Queue, Schema } from "effect"
import { LocalEntities, localFirst, localPath, serveLocally } from "../../src/platform/Cluster.js"
import { ShardFences } from "../../src/platform/cluster/Fences.js"

/**
 * The cluster's local road (issue 45 item 1, `serveLocally`/`localFirst` in platform/Cluster.ts) on an in-memory
 * cluster (`@effect/cluster`'s `TestRunner.layer`, the shape of its own `Sharding.test.ts`: one runner, every shard
 * here, message storage in memory). The probe is an entity like the wallet: one queue fed by its mailbox and by the
 * local road, one loop deciding in order, a keyed `Add` that a repeated key replays, over a "ledger" that outlives
 * its instances (as the database outlives a wallet's).
 */

const Add = Rpc.make("Add", { payload: { key: Schema.String, amount: Schema.Number }, success: Schema.Number })
const Counter = Entity.make("Counter", [Add])
const CounterLocal = localPath<{ readonly key: string; readonly amount: number }, number>("Counter")
/** The same probe, passivated after 1 s without a message (the reaper looks every 5 s): how an instance is stopped here. */
const Brief = Entity.make("Brief", [Add])
const BriefLocal = localPath<{ readonly key: string; readonly amount: number }, number>("Brief")

/** What outlives the instances, and what each instance saw. */
const world = {
  ledger: new Map<string, { amount: number; total: number }>(),
  total: 0,
  byMessage: 0,
  byLocal: 0,
  decided: [] as Array<string>,
  /** Keys whose first decision commits and then never answers: the instance stops first (a cut mid-way). */
  cutAfterCommit: new Set<string>()
}

interface Job {
  readonly key: string
  readonly amount: number
  readonly answer: (total: number) => Effect.Effect<void>
}

const probe = <T extends string>(entity: Entity.Entity<T, typeof Add>, path: typeof CounterLocal, maxIdleTime: Duration.DurationInput) =>
  entity.toLayerMailbox(
  Effect.gen(function*() {
    const jobs = yield* Queue.unbounded<Job>()
    yield* serveLocally(path, { maxIdleTime: "5 minutes" }, (request, answer) => {
      world.byLocal++
      jobs.unsafeOffer({ ...request, answer: (total) => Effect.sync(() => answer(total)) })
    })
    return (mailbox, replier) =>
      Effect.gen(function*() {
        yield* Effect.fork(Effect.forever(Effect.gen(function*() {
          const [chunk] = yield* mailbox.takeAll
          world.byMessage += chunk.length
          yield* Queue.offerAll(
            jobs,
            Chunk.map(chunk, (request: Envelope.Request<typeof Add>): Job => ({
              key: request.payload.key,
              amount: request.payload.amount,
              answer: (total) => replier.succeed(request, total)
            }))
          )
        })))
        while (true) {
          const job = yield* Queue.take(jobs)
          world.decided.push(job.key)
          const known = world.ledger.get(job.key)
          if (known !== undefined) {
            yield* job.answer(known.total)
            continue
          }
          world.total += job.amount
          world.ledger.set(job.key, { amount: job.amount, total: world.total })
          if (world.cutAfterCommit.delete(job.key)) return yield* Effect.never
          yield* job.answer(world.total)
        }
      })
  }),
  { maxIdleTime }
)

const shardOfId = (sharding: Sharding.Sharding["Type"], id: string) => sharding.getShardId(EntityId.make(id), Counter.getShardGroup(EntityId.make(id)))

/** This runner's fences, tracked, holding `id`'s shard under `generation`. */
const holdShard = (id: string, generation: string) =>
  Effect.gen(function*() {
    const fences = yield* ShardFences
    const sharding = yield* Sharding.Sharding
    fences.track()
    const shardId = shardOfId(sharding, id)
    yield* fences.record(undefined, [shardId], (fresh) => Effect.succeed(fresh.map(({ shard }) => ({ shard, generation }))))
  })

/** The client as `Wallets` builds it: the local road first, the message when it answers `None`. */
const makeClientOf = <T extends string>(entity: Entity.Entity<T, typeof Add>, path: typeof CounterLocal) => Effect.gen(function*() {
  const local = yield* localFirst(path)
  const client = yield* entity.client
  return {
    add: (id: string, key: string, amount: number) =>
      Effect.flatMap(local(id, { key, amount }), Option.match({
        onNone: () => client(id).Add({ key, amount }),
        onSome: Effect.succeed
      })),
    byMessage: (id: string, key: string, amount: number) => client(id).Add({ key, amount })
  }
})

const makeClient = makeClientOf(Counter, CounterLocal)

const Env = Layer.merge(probe(Counter, CounterLocal, "5 minutes"), probe(Brief, BriefLocal, "1 second")).pipe(
  Layer.provideMerge(TestRunner.layer),
  Layer.provideMerge(Layer.mergeAll(ShardFences.Default, LocalEntities.Default))
)

const reset = Effect.sync(() => {
  world.ledger.clear()
  world.total = 0
  world.byMessage = 0
  world.byLocal = 0
  world.decided.length = 0
  world.cutAfterCommit.clear()
})

describe("the cluster's local road into an entity active on this runner (issue 45 item 1)", () => {
  it.scopedLive("a local request is no cluster message, and is decided in order with the messages", () =>
    Effect.gen(function*() {
      yield* reset
      const id = "c-order"
      yield* holdShard(id, "1")
      const counter = yield* makeClient
      // The first request finds no instance here: it goes as a message, and wakes the entity.
      assert.strictEqual(yield* counter.add(id, "k0", 1), 1)
      assert.deepStrictEqual([world.byMessage, world.byLocal], [1, 0])
      // Active now: the next ones take the local road, no message.
      for (let i = 1; i <= 5; i++) assert.strictEqual(yield* counter.add(id, `k${i}`, 1), 1 + i)
      assert.deepStrictEqual([world.byMessage, world.byLocal], [1, 5])
      // Local requests and messages at once go through the one loop: each decided once, totals without a gap.
      const answers = yield* Effect.forEach(
        Array.from({ length: 20 }, (_, i) => i),
        (i) => i % 2 === 0 ? counter.add(id, `m${i}`, 1) : counter.byMessage(id, `m${i}`, 1),
        { concurrency: "unbounded" }
      )
      assert.deepStrictEqual([world.byMessage, world.byLocal], [11, 15])
      assert.sameMembers(answers, Array.from({ length: 20 }, (_, i) => 7 + i))
      assert.strictEqual(world.total, 26)
      // A read after a message sees it (the local road does not overtake what the entity took before).
      yield* counter.byMessage(id, "last-message", 10)
      assert.strictEqual(yield* counter.add(id, "after", 1), 37)
      assert.strictEqual(world.decided.length, 28)
    }).pipe(Effect.provide(Env)))

  it.scopedLive("falls back to a message when the shard's fence moved", () =>
    Effect.gen(function*() {
      yield* reset
      const id = "c-fence"
      yield* holdShard(id, "1")
      const counter = yield* makeClient
      yield* counter.add(id, "a", 1)
      yield* counter.add(id, "b", 1)
      assert.deepStrictEqual([world.byMessage, world.byLocal], [1, 1])
      // The shard was acquired again under a newer generation (another runner owned it meanwhile): the instance
      // that started under generation 1 takes no local request; the message goes where the cluster sends it.
      yield* holdShard(id, "2")
      assert.strictEqual(yield* counter.add(id, "c", 1), 3)
      assert.deepStrictEqual([world.byMessage, world.byLocal], [2, 1])
    }).pipe(Effect.provide(Env)))

  it.scopedLive("a request cut mid-way (the instance stops after its commit) is re-sent with its key and counted once", () =>
    Effect.gen(function*() {
      yield* reset
      const id = "c-cut"
      yield* holdShard(id, "1")
      const counter = yield* makeClientOf(Brief, BriefLocal)
      yield* counter.add(id, "a", 1)
      world.cutAfterCommit.add("cut")
      // Taken locally and committed; the instance is passivated (no message for 1 s) before it answers: the road
      // answers None, the client sends the same key as a message, and the next instance replays the committed answer.
      assert.strictEqual(yield* counter.add(id, "cut", 5), 6)
      assert.strictEqual(world.total, 6)
      assert.deepStrictEqual(world.decided, ["a", "cut", "cut"])
      assert.deepStrictEqual([world.byMessage, world.byLocal], [2, 1])
    }).pipe(Effect.provide(Env)))
})
