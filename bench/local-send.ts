/**
 * What a message to an entity of this runner costs (issue 45 item 1): CPU per message through the entity client on
 * an in-memory cluster, configured as our runners are (`platform/Cluster.ts`'s `shared`: local messages are not
 * encoded) and with the cluster's default (every local message encoded and decoded, as our clustered runners did
 * before), beside the floor the removed `LocalWallets` had: a queue offer and a callback per request, no message.
 * The entity is a mailbox entity that answers what it takes in batches (`takeAll`), as the wallet does, with a payload
 * shaped like a `Charges` message of one.
 *
 *   npx tsx bench/local-send.ts [--messages 20000] [--concurrency 64] [--rounds 3] [--commit-ms 5]
 *
 * The rounds alternate the three ways, so a loaded machine slows them alike. A script: it prints a table and
 * asserts nothing.
 *
 * `--count 1` counts instead of timing (counts do not depend on load): fibers started and Effect ops evaluated per
 * message on our path (batched, `makeEntityBatcher` + `makeEntityCaller` + the entity client), at concurrency 1 (a
 * message per charge) and at `--concurrency`; `PROBE_FIBERS=1` adds where the fibers start.
 */
import { Entity, MessageStorage, RunnerHealth, Runners, RunnerStorage, Sharding, ShardingConfig } from "@effect/cluster"
import { Rpc } from "@effect/rpc"
import { Chunk, Effect, Exit, Layer, Queue, Request, RequestResolver, Schema } from "effect"
import { makeEntityBatcher, makeEntityCaller, shared } from "../src/platform/Cluster.js"

const args = new Map<string, string>()
for (let i = 2; i < process.argv.length; i += 2) args.set(process.argv[i]!.replace(/^--/, ""), process.argv[i + 1]!)
const MESSAGES = Number(args.get("messages") ?? 20_000)
const CONCURRENCY = Number(args.get("concurrency") ?? 64)
const ROUNDS = Number(args.get("rounds") ?? 3)
/** How long the entity takes per batch (the wallet's commit), so that batches gather as they do for a hot wallet. */
const COMMIT_MS = Number(args.get("commit-ms") ?? 5)
const COUNT = args.get("count") === "1"

const Entry = Schema.Struct({
  kind: Schema.String,
  scope: Schema.String,
  key: Schema.String,
  appId: Schema.NullOr(Schema.String),
  event: Schema.NullOr(Schema.String),
  metadata: Schema.NullOr(Schema.Record({ key: Schema.String, value: Schema.String })),
  description: Schema.NullOr(Schema.String)
})
const Charge = Schema.Struct({ amount: Schema.BigInt, entry: Entry, dailyCap: Schema.NullOr(Schema.BigInt) })
const ChargesPayload = Schema.Struct({ charges: Schema.Array(Charge) })
// Without `make`'s validation, as WalletRpc.ts sends its payloads.
const Charges = Rpc.make("Charges", {
  payload: Schema.make<typeof ChargesPayload.Type, typeof ChargesPayload.Encoded, never>(ChargesPayload.ast),
  success: Schema.Array(Schema.BigInt)
})
const Probe = Entity.make("BenchProbe", [Charges])

const ProbeLive = Probe.toLayerMailbox((mailbox, replier) =>
  Effect.forever(Effect.gen(function*() {
    const [chunk] = yield* mailbox.takeAll
    if (COMMIT_MS > 0) yield* Effect.sleep(COMMIT_MS)
    for (const request of chunk) yield* replier.succeed(request, request.payload.charges.map((c) => c.amount))
  }))
)

const clusterWith = (config: Partial<ShardingConfig.ShardingConfig["Type"]>) =>
  ProbeLive.pipe(Layer.provideMerge(Sharding.layer.pipe(
    Layer.provideMerge(Runners.layerNoop),
    Layer.provideMerge(MessageStorage.layerMemory),
    Layer.provide([RunnerStorage.layerMemory, RunnerHealth.layerNoop]),
    Layer.provide(ShardingConfig.layer(config))
  )))

const charge = (i: number) => ({
  amount: 1n,
  entry: { kind: "event", scope: "bench", key: `k${i}`, appId: "app", event: "call", metadata: null, description: null },
  dailyCap: null
})

/** Counts of the fiber run loop (`--count`), as bench/probe.mjs takes them in the platform. */
const counter = { ops: 0, fibers: 0, sites: new Map<string, number>(), on: false }
const countRunLoop = async () => {
  const FR = await import(new URL("../node_modules/effect/dist/esm/internal/fiberRuntime.js", import.meta.url).href)
  const proto = FR.FiberRuntime.prototype as Record<string, unknown>
  for (const key of Object.getOwnPropertyNames(proto)) {
    if (!/^[A-Z][A-Za-z]+$/.test(key)) continue
    const orig = proto[key]
    if (typeof orig !== "function") continue
    proto[key] = function(this: unknown, op: unknown) {
      counter.ops++
      return orig.call(this, op)
    }
  }
  const seen = new WeakSet<object>()
  for (const m of ["resume", "start"]) {
    const orig = proto[m] as (this: object, e: unknown) => unknown
    proto[m] = function(this: object, effect: unknown) {
      if (!seen.has(this)) {
        seen.add(this)
        counter.fibers++
        if (counter.on && process.env.PROBE_FIBERS === "1") {
          const frames = (new Error().stack ?? "").split("\n").slice(2)
            .filter((l) => !/node_modules\/effect\/|local-send|node:internal/.test(l)).slice(0, 3)
            .map((l) => l.trim().replace(/\(.*\/(node_modules|src)\//, "($1/"))
          const key = frames.join(" < ")
          counter.sites.set(key, (counter.sites.get(key) ?? 0) + 1)
        }
      }
      return orig.call(this, effect)
    }
  }
}

/** Fibers and ops per call of `one` over MESSAGES calls, `concurrency` at a time. */
const count = <E>(one: (i: number) => Effect.Effect<unknown, E>, concurrency: number) =>
  Effect.gen(function*() {
    yield* Effect.forEach(Array.from({ length: 1000 }, (_, i) => i), one, { concurrency, discard: true })
    const [ops, fibers] = [counter.ops, counter.fibers]
    counter.on = true
    counter.sites.clear()
    yield* Effect.forEach(Array.from({ length: MESSAGES }, (_, i) => i), one, { concurrency, discard: true })
    counter.on = false
    return { fibers: (counter.fibers - fibers) / MESSAGES, ops: (counter.ops - ops) / MESSAGES }
  })

/** CPU microseconds per call of `one` over MESSAGES calls, CONCURRENCY at a time. */
const measure = <E>(one: (i: number) => Effect.Effect<unknown, E>) =>
  Effect.gen(function*() {
    yield* Effect.forEach(Array.from({ length: 1000 }, (_, i) => i), one, { concurrency: CONCURRENCY, discard: true })
    const before = process.cpuUsage()
    yield* Effect.forEach(Array.from({ length: MESSAGES }, (_, i) => i), one, { concurrency: CONCURRENCY, discard: true })
    const used = process.cpuUsage(before)
    return (used.user + used.system) / MESSAGES
  })

const viaCluster = (config: Partial<ShardingConfig.ShardingConfig["Type"]>) =>
  Effect.scoped(Effect.gen(function*() {
    const context = yield* Layer.build(clusterWith(config))
    const client = yield* Effect.provide(Probe.client, context)
    const toEntity = yield* makeEntityCaller
    const wallet = client("hot")
    return yield* measure((i) => Effect.orDie(toEntity(wallet.Charges({ charges: [charge(i)] }))))
  }))

class ChargeOf extends Request.TaggedClass("ChargeOf")<bigint, never, { readonly i: number }> {}

/** A mailbox entity that takes `commitMs` per batch, as the wallet's commit does (batches then gather). */
const batchedWith = (config: Partial<ShardingConfig.ShardingConfig["Type"]>, through: "batcher" | "resolver" | "count") =>
  Effect.scoped(Effect.gen(function*() {
    const context = yield* Layer.build(clusterWith(config))
    const client = yield* Effect.provide(Probe.client, context)
    const toEntity = yield* makeEntityCaller
    const wallet = client("hot")
    const sendBatch = (is: ReadonlyArray<number>) =>
      Effect.map(Effect.orDie(toEntity(wallet.Charges({ charges: is.map(charge) }))), (answers) => answers.map((a) => Exit.succeed(a)))
    if (through === "batcher") {
      // As `Wallets.charge` sends: `makeEntityBatcher` calling the batch function directly.
      const send = yield* makeEntityBatcher(sendBatch, () => "hot")
      return yield* measure((i) => send(i))
    }
    if (through === "count") {
      const send = yield* makeEntityBatcher(sendBatch, () => "hot")
      for (const concurrency of [1, CONCURRENCY]) {
        const counts = yield* count((i) => send(i), concurrency)
        console.log(JSON.stringify({ concurrency, commitMs: COMMIT_MS, messages: MESSAGES, perCharge: counts }))
        for (const [site, n] of [...counter.sites].map(([k, n]): [string, number] => [k, n / MESSAGES]).filter(([, n]) => n >= 0.05).sort((x, y) => y[1] - x[1])) {
          console.log(`  ${n.toFixed(2)} ${site}`)
        }
      }
      return 0
    }
    // The same batcher over `Effect.request` and a `RequestResolver.makeBatched` resolver (tried, and dearer).
    const resolver = RequestResolver.makeBatched((requests: ReadonlyArray<ChargeOf>) =>
      Effect.flatMap(sendBatch(requests.map((r) => r.i)), (exits) =>
        Effect.forEach(requests, (r, n) => Request.complete(r, exits[n]!), { discard: true })))
    const send = yield* makeEntityBatcher(
      (requests: ReadonlyArray<ChargeOf>) =>
        Effect.forEach(requests, (r) => Effect.exit(Effect.request(r, resolver)), { batching: true }).pipe(Effect.withRequestCaching(false)),
      () => "hot"
    )
    return yield* measure((i) => send(new ChargeOf({ i })))
  }))

/** The floor of the removed direct path: one queue, one loop that answers what it takes, a callback per request. */
const direct = Effect.scoped(Effect.gen(function*() {
  const jobs = yield* Queue.unbounded<{ readonly amount: bigint; readonly resume: (e: Effect.Effect<bigint>) => void }>()
  yield* Effect.forkScoped(Effect.forever(Effect.gen(function*() {
    const batch = yield* Queue.takeBetween(jobs, 1, 4096)
    for (const job of Chunk.toReadonlyArray(batch)) job.resume(Effect.succeed(job.amount))
  })))
  return yield* measure((i) => Effect.async<bigint>((resume) => void jobs.unsafeOffer({ amount: charge(i).amount, resume })))
}))

const program = Effect.gen(function*() {
  const rows: Record<string, Array<number>> = {
    "entity client, local-first, batched per entity (ours)": [],
    "the same batching through Effect.request + RequestResolver.makeBatched": [],
    "entity client, local-first, a message each": [],
    "entity client, encoded locally (before)": [],
    "direct queue (LocalWallets' floor)": []
  }
  for (let round = 0; round < ROUNDS; round++) {
    rows["entity client, local-first, batched per entity (ours)"]!.push(yield* batchedWith(shared, "batcher"))
    rows["the same batching through Effect.request + RequestResolver.makeBatched"]!.push(yield* batchedWith(shared, "resolver"))
    rows["entity client, local-first, a message each"]!.push(yield* viaCluster(shared))
    rows["entity client, encoded locally (before)"]!.push(yield* viaCluster({ ...shared, simulateRemoteSerialization: true }))
    rows["direct queue (LocalWallets' floor)"]!.push(yield* direct)
  }
  console.log(`${MESSAGES} messages per round, ${CONCURRENCY} at a time, ${COMMIT_MS} ms per batch in the entity, ${ROUNDS} rounds (CPU µs per message; median, all)\n`)
  console.log("| path | median µs | rounds |\n| --- | ---: | --- |")
  for (const [name, values] of Object.entries(rows)) {
    const sorted = [...values].sort((a, b) => a - b)
    console.log(`| ${name} | ${sorted[Math.floor(sorted.length / 2)]!.toFixed(1)} | ${values.map((v) => v.toFixed(1)).join(", ")} |`)
  }
})

;(COUNT ? countRunLoop().then(() => Effect.runPromise(batchedWith(shared, "count"))) : Effect.runPromise(program)).catch((error) => {
  console.error(error)
  process.exit(1)
})
