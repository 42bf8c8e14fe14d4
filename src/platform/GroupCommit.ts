import { Effect, Queue, type Scope } from "effect"

/**
 * Group commit: one writer fiber takes whatever waits (between 1 and `maxBatch` items, `Queue.takeBetween`) and hands
 * it to `write` as one batch, one batch at a time. While a batch is being written the next one fills up, so under load
 * a statement carries many callers' writes, and at rest a lone write goes out at once. The wallet committer
 * (billing/Committer.ts) and the sessions' log (sessions/Log.ts) share it; each says in `write` what one statement
 * is and how a batch's outcome reaches its callers.
 *
 * `write` runs uninterruptibly (a statement is never cut halfway by the scope closing) and must answer every item
 * of its batch itself, whatever happens. When the scope closes, what is still queued is written before it ends.
 */
export const groupCommit = <A>(options: {
  readonly maxBatch: number
  readonly write: (batch: ReadonlyArray<A>) => Effect.Effect<void>
}): Effect.Effect<(item: A) => Effect.Effect<void>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const queue = yield* Queue.unbounded<A>()
    // Registered before the writer starts, so it runs after the writer stops: what is still queued is written.
    yield* Effect.addFinalizer(() =>
      Effect.flatMap(Queue.takeAll(queue), (rest) => rest.length === 0 ? Effect.void : options.write(Array.from(rest)))
    )
    yield* Queue.takeBetween(queue, 1, options.maxBatch).pipe(
      Effect.flatMap((batch) => Effect.uninterruptible(options.write(Array.from(batch)))),
      Effect.forever,
      Effect.forkScoped
    )
    return (item: A) => Effect.asVoid(Queue.offer(queue, item))
  })
