import { Context, Deferred, Effect, Layer, Option, Queue } from "effect"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs/promises"
import { ObjectStorage, type ObjectStorageService } from "../../src/files/Storage.js"
import { SmsSender } from "../../src/identity/Sms.js"
import { KeyValue, makeMemory } from "../../src/platform/KeyValue.js"
import type { Micros } from "../../src/platform/Money.js"
import {
  type AgentModel,
  InsufficientFunds,
  type KnowledgePassage,
  KnowledgeSearch,
  RunnableAgents,
  RunPayer
} from "../../src/runtime/Ports.js"

/**
 * Test implementations of the platform's ports (its `Context.Tag`s), for tests of one module's layers: each is the
 * smallest thing that keeps the port's contract, in memory, and lets the test see what was asked of it. The live
 * implementations are tested against the same contract elsewhere (test/platform/keyValue.test.ts,
 * test/files/*, test/security/sandbox-*.test.ts). See docs/testing.md, "Ports".
 */

/** `RunPayer`: balances in memory (every account starts with `initial`), each charge recorded once per key. */
export class RunPayerTest extends Context.Tag("test/RunPayerTest")<RunPayerTest, {
  readonly charges: ReadonlyArray<{ readonly accountId: string; readonly amount: Micros; readonly key: string }>
}>() {
  static layer = (initial: Micros = 1_000_000_000n) =>
    Layer.effectContext(Effect.sync(() => {
      const balances = new Map<string, Micros>()
      const charges: Array<{ readonly accountId: string; readonly amount: Micros; readonly key: string }> = []
      const balanceOf = (accountId: string) => balances.get(accountId) ?? initial
      return Context.make(RunPayer, {
        charge: (accountId, amount, charge) =>
          Effect.suspend(() => {
            if (charges.some((c) => c.key === charge.key)) return Effect.void
            if (balanceOf(accountId) < amount) {
              return Effect.fail(new InsufficientFunds({ message: "Not enough credits for the next step." }))
            }
            balances.set(accountId, balanceOf(accountId) - amount)
            charges.push({ accountId, amount, key: charge.key })
            return Effect.void
          }),
        balance: (accountId) => Effect.sync(() => balanceOf(accountId))
      }).pipe(Context.add(RunPayerTest, { charges }))
    }))
}

/** `KnowledgeSearch`: the same passages for every query (none by default). */
export const KnowledgeSearchTest = (passages: ReadonlyArray<KnowledgePassage> = []) =>
  Layer.succeed(KnowledgeSearch, { search: (_owner, _stores, _query, maxResults) => Effect.succeed(passages.slice(0, maxResults)) })

/** `RunnableAgents`: a fixed list, the same for every user. */
export const RunnableAgentsTest = (agents: ReadonlyArray<AgentModel> = []) =>
  Layer.succeed(RunnableAgents, {
    list: () => Effect.succeed(agents),
    find: (identifier) => Effect.succeed(Option.fromNullable(agents.find((a) => a.identifier === identifier)))
  })

/** `KeyValue`: the in-memory store (its TTLs follow Effect's `Clock`, so the `TestClock` moves them). */
export const KeyValueTest = Layer.effect(KeyValue, makeMemory("test:"))

/** `SmsSender`: every message kept, in order. */
export class SmsSenderTest extends Context.Tag("test/SmsSenderTest")<SmsSenderTest, {
  readonly sent: ReadonlyArray<{ readonly phone: string; readonly text: string }>
}>() {
  static layer = Layer.effectContext(Effect.sync(() => {
    const sent: Array<{ readonly phone: string; readonly text: string }> = []
    return Context.make(SmsSender, { send: (phone, text) => Effect.sync(() => void sent.push({ phone, text })) }).pipe(
      Context.add(SmsSenderTest, { sent })
    )
  }))
}

/** `ObjectStorage`: objects in memory; its URLs are never served (a test of the storage route uses the real one). */
export const ObjectStorageTest = Layer.sync(ObjectStorage, (): ObjectStorageService => {
  const objects = new Map<string, Uint8Array>()
  const signed = (key: string, method: "PUT" | "GET", expiresAt: Date) =>
    Effect.succeed({ url: `memory://${key}`, method, headers: {}, expiresAt })
  return {
    uploadUrl: (key, options) => signed(key, "PUT", options.expiresAt),
    downloadUrl: (key, options) => signed(key, "GET", options.expiresAt),
    stat: (key) =>
      Effect.sync(() =>
        Option.map(Option.fromNullable(objects.get(key)), (bytes) => ({
          size: bytes.length,
          sha256: Crypto.createHash("sha256").update(bytes).digest("hex")
        }))
      ),
    remove: (key) => Effect.sync(() => void objects.delete(key)),
    read: (key, maxBytes) => Effect.sync(() => Option.filter(Option.fromNullable(objects.get(key)), (b) => b.length <= maxBytes)),
    put: (key, path) => Effect.promise(() => Fs.readFile(path)).pipe(Effect.map((bytes) => void objects.set(key, new Uint8Array(bytes))))
  }
})

/** One search of a gated knowledge base, waiting for the test to answer it. */
export interface GatedSearch {
  readonly query: string
  readonly storeIds: ReadonlyArray<string>
  /** Answers the search with these passages. */
  readonly answer: (passages: ReadonlyArray<KnowledgePassage>) => Effect.Effect<void>
  /** Completed if the search was interrupted (its run stopped) before it was answered. */
  readonly interrupted: Deferred.Deferred<void>
}

/**
 * `KnowledgeSearch` whose every search waits until the test answers it: a run's `file_search` call becomes an event
 * the test waits for (`searches`), in place of a sleep, and a point where the test holds the run (to queue turns
 * behind it, interrupt it, or passivate its session).
 */
export class KnowledgeGate extends Context.Tag("test/KnowledgeGate")<KnowledgeGate, {
  readonly searches: Queue.Dequeue<GatedSearch>
}>() {
  static layer = Layer.effectContext(Effect.gen(function*() {
    const searches = yield* Queue.unbounded<GatedSearch>()
    return Context.make(KnowledgeSearch, {
      search: (_owner, storeIds, query) =>
        Effect.gen(function*() {
          const answer = yield* Deferred.make<ReadonlyArray<KnowledgePassage>>()
          const interrupted = yield* Deferred.make<void>()
          yield* Queue.offer(searches, {
            query,
            storeIds,
            interrupted,
            answer: (passages) => Deferred.succeed(answer, passages).pipe(Effect.asVoid)
          })
          return yield* Deferred.await(answer).pipe(Effect.onInterrupt(() => Deferred.succeed(interrupted, undefined)))
        })
    }).pipe(Context.add(KnowledgeGate, { searches }))
  }))
}
