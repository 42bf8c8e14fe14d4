import { Deferred, Duration, Effect } from "effect"
import * as Crypto from "node:crypto"
import { IdempotencyRepo } from "../platform/http/Repo.js"

/** How often a running call looks for a cancel that another runner took. */
const POLL = Duration.millis(250)
/** How long a cancel is kept for a call that may still be starting or running elsewhere. */
const KEPT = Duration.minutes(5)
/** The tools that run long enough to be worth cancelling: they run (and bill) the engine. */
export const CANCELLABLE: ReadonlySet<string> = new Set(["test_expert", "start_distillation", "continue_distillation"])

const sha256 = (text: string) => Crypto.createHash("sha256").update(text).digest("base64url")

/**
 * MCP cancellation (`notifications/cancelled`, issue 44 item 5) on a stateless server: the notification comes in a
 * POST of its own, which any runner of a cluster may take, while the call it names runs in another request, perhaps
 * on another runner. A cancel is written to the database (the idempotency table, keyed by the caller's credential
 * and the call's JSON-RPC id) and told at once to a call of this runner; a running call reads its key every
 * `POLL`, so a cancel taken anywhere stops it within about a quarter of a second.
 */
export class McpCancels extends Effect.Service<McpCancels>()("atrium/mcp/McpCancels", {
  effect: Effect.gen(function*() {
    const store = yield* IdempotencyRepo
    const local = new Map<string, Deferred.Deferred<void>>()
    /** The key of a call: whose credential sent it (the same credential sends its cancel), and its request id. */
    const keyOf = (caller: string, requestId: string | number) => `mcpcancel:${sha256(caller)}:${sha256(JSON.stringify(requestId))}`

    /** Records a cancel of `requestId` by `caller`, for whichever runner runs that call. */
    const cancel = (caller: string, requestId: string | number) =>
      Effect.gen(function*() {
        const key = keyOf(caller, requestId)
        const here = local.get(key)
        if (here !== undefined) yield* Deferred.succeed(here, undefined)
        yield* store.set(key, "cancelled", KEPT)
      })

    /**
     * Succeeds when the call `requestId` of `caller` is cancelled, here or on any runner; never otherwise (a call
     * races it). A cancel left from an earlier call with the same id (a client that started again) is cleared first.
     */
    const cancelled = (caller: string, requestId: string | number): Effect.Effect<void> =>
      Effect.gen(function*() {
        const key = keyOf(caller, requestId)
        yield* store.delete(key)
        const signal = yield* Deferred.make<void>()
        const poll = Effect.gen(function*() {
          while (true) {
            yield* Effect.sleep(POLL)
            if ((yield* store.get(key))._tag === "Some") return
          }
        })
        yield* Effect.acquireUseRelease(
          Effect.sync(() => void local.set(key, signal)),
          () => Effect.raceFirst(Deferred.await(signal), poll),
          () => Effect.sync(() => void local.delete(key))
        )
      })

    return { cancel, cancelled } as const
  }),
  dependencies: [IdempotencyRepo.Default]
}) {}
