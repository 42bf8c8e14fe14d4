import { Context, Deferred, Effect, Layer, Queue } from "effect"
import type { Micros } from "../../src/platform/Money.js"
import { InsufficientFunds, type KnowledgePassage, KnowledgeSearch, RunPayer } from "../../src/runtime/Ports.js"

/**
 * Test implementations of the run engine's ports (`src/runtime/Ports.ts`), for tests of one module's layers: each is
 * the smallest thing that keeps the port's contract, in memory, and lets the test see what was asked of it. The live
 * implementations (billing's `RunPayerLive`, knowledge's `KnowledgeSearchLive`) are tested through the platform.
 * See docs/testing.md, "Ports". (The key-value port has its own in-memory implementation in src, `makeMemory`.)
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
      const holds = new Map<string, Micros>()
      const voided = new Set<string>()
      const heldBy = (accountId: string) => {
        let held = 0n
        for (const [key, amount] of holds) if (key.startsWith(`${accountId}\u0000`)) held += amount
        return held
      }
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
        balance: (accountId) => Effect.sync(() => balanceOf(accountId) - heldBy(accountId)),
        // Holds as the wallet keeps them (docs/billing.md, "Holds"): never more than is available, voided by a settle.
        hold: (accountId, holdId, amount) =>
          Effect.sync(() => {
            const existing = holds.get(`${accountId}\u0000${holdId}`) ?? 0n
            const available = balanceOf(accountId) - heldBy(accountId)
            const wanted = amount > existing ? amount - existing : 0n
            const next = existing + (wanted < available ? wanted : available > 0n ? available : 0n)
            if (next > 0n) holds.set(`${accountId}\u0000${holdId}`, next)
            // This wallet's holds never lapse: its runs need not ask again.
            return { amount: next, expiresAt: Number.MAX_SAFE_INTEGER }
          }),
        settle: (accountId, holdId, posted) =>
          Effect.sync(() => {
            holds.delete(`${accountId}\u0000${holdId}`)
            return posted.map(({ amount, charge }) => {
              if (charges.some((c) => c.key === charge.key)) return true
              if (voided.has(`${accountId}\u0000${holdId}`)) return false
              if (balanceOf(accountId) - heldBy(accountId) < amount) return false
              balances.set(accountId, balanceOf(accountId) - amount)
              charges.push({ accountId, amount, key: charge.key })
              return true
            })
          }),
        // As the wallet's final settle: the hold is gone, and a later settle of it posts nothing new.
        voidHold: (accountId, holdId) =>
          Effect.sync(() => {
            holds.delete(`${accountId}\u0000${holdId}`)
            voided.add(`${accountId}\u0000${holdId}`)
          })
      }).pipe(Context.add(RunPayerTest, { charges }))
    }))
}

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
